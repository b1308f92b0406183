"""``benchmarks/gpu_report.py``'s settings, read on the CPU (the report itself runs in ``test_gpu_backends.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from kernelgym.verifier import VerifierConfig

REPO = Path(__file__).resolve().parents[2]


def _gpu_report():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("gpu_report", REPO / "benchmarks" / "gpu_report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_the_timing_pass_gets_a_judge_config_from_the_flags() -> None:
    report = _gpu_report()
    args = report.parse_args(["--runs", "50", "--warmup", "4", "--no-compile-baseline"])
    config = report.timing_config(args)
    assert isinstance(config, VerifierConfig)
    assert (config.runs, config.warmup, config.compile_baseline) == (50, 4, False)
