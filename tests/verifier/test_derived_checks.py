"""Checks that need no help from the task file: derived shape variants, redrawn weights (through the real judge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.tasks import load_task_file
from kernelgym.verifier import Status, VerifierConfig

pytestmark = pytest.mark.slow

HACKS = Path(__file__).resolve().parents[1] / "hacks" / "cpp"


def test_a_task_file_without_variants_still_catches_shape_specialization(cpu_suite, cache_dir: Path, tmp_path: Path):
    # The bundled task declares variants; the same program as a bare task file (as KernelBench ships them) does not.
    path = tmp_path / "relu_task.py"
    path.write_text(cpu_suite["level1/1_ReLU"].source)
    task = load_task_file(path)
    assert task.variants == ()
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=VerifierConfig(runs=3, warmup=1)) as verifier:
        result = verifier.evaluate(task, (HACKS / "p10_shape_specialization.py").read_text())
    assert result.status is Status.INCORRECT, result.feedback
    assert "[shape-variant-mismatch]" in result.feedback
