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


def test_variants_that_keep_the_init_inputs_reuse_the_task_s_own_models():
    from types import SimpleNamespace

    from kernelgym.verifier.judge import _same_models_first, _same_values

    # init inputs of a GEMM task: (in_features, out_features); batch_size changes only the inputs
    harness = SimpleNamespace(init_inputs_for=lambda v: [v.get("in_features", 8192), v.get("out_features", 8192)])
    base = {"batch_size": 1024, "in_features": 8192, "out_features": 8192}
    shapes = [({}, True), ({"batch_size": 129, "in_features": 513, "out_features": 513}, False),
              ({"batch_size": 192, "in_features": 768, "out_features": 768}, False), ({"batch_size": 65}, False)]
    assert _same_models_first(harness, shapes, base) == [shapes[0], shapes[3], shapes[1], shapes[2]]
    assert _same_values([8, (1, 2), 0.5], [8, (1, 2), 0.5])
    assert not _same_values([8, (1, 2)], [8, [1, 2]]) and not _same_values([1], [True]) and not _same_values([float("nan")], [float("nan")])
