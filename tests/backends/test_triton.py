"""The ``triton`` backend checked for real without a GPU, under Triton's interpreter.

Tasks of the bundled ``gpu`` suite are shrunk to their first shape variant
(the interpreter runs each Triton program in Python) and judged through the
real verifier: the bundled Triton solutions pass, a wrong kernel is
incorrect, PyTorch compute hidden from the static rules and a kernel that is
never launched are caught at runtime, and interpreter timings are never
reported as speedups. On a machine with a GPU the same candidates run on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelgym import Verifier
from kernelgym.backends import get_backend
from kernelgym.tasks import Task, load_suite
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier.result import EvalResult

pytest.importorskip("triton")

INTERPRETED = not torch.cuda.is_available()
SUITE = load_suite("gpu")
SOLVED = [task.id for task in SUITE if "triton" in task.solutions]
RELU = SUITE["level1/1_ReLU"]
RELU_CALL = "relu_kernel[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)"

# Broken variants of the bundled ReLU answer, and the status each must get.
BROKEN = {
    "wrong-math": (RELU.solution("triton").replace("tl.maximum(x, 0.0)", "tl.abs(x)"), "incorrect", "wrong-output"),
    # on an object: a dict element called in forward is refused statically (unresolved-call); this reaches the runtime guard
    "torch-behind-a-table": (
        "import types\n" + RELU.solution("triton").replace(
            "class ModelNew", "_IMPLS = types.SimpleNamespace(fast=torch.relu)\n\n\nclass ModelNew"
        ).replace("        return y", "        return _IMPLS.fast(y)"),
        "illegal",
        "aten-fallback",
    ),
    "never-launched": (
        RELU.solution("triton").replace(RELU_CALL, f"if n < 0:\n            {RELU_CALL}"),
        "illegal",
        "decoy-kernel",
    ),
}


def shrunk(task: Task) -> Task:
    """The task with its first shape variant as the main shapes (the interpreter is slow on big ones)."""
    first, *rest = task.variants
    overrides = "".join(f"\n{name} = {value!r}" for name, value in first.items())
    return dataclasses.replace(task, source=task.source + "\n# shrunk for Triton's interpreter" + overrides + "\n", variants=tuple(rest))


@pytest.fixture(scope="module")
def results(cache_dir: Path) -> Iterator[dict[str, EvalResult]]:
    """Every candidate of this module, judged in one batch."""
    pairs = [(shrunk(SUITE[task_id]), SUITE[task_id].solution("triton")) for task_id in SOLVED]
    pairs += [(shrunk(RELU), code) for code, _, _ in BROKEN.values()]
    pairs.append((shrunk(RELU), Path(__file__).parents[1].joinpath("legit", "triton", "relu_autotune.py").read_text()))
    config = VerifierConfig(runs=3, warmup=1)
    with Verifier(backend="triton", num_workers=2, cache_dir=cache_dir, config=config) as verifier:
        judged = verifier.evaluate_many(pairs)
    yield dict(zip([*SOLVED, *BROKEN, "autotuned"], judged, strict=True))


@pytest.mark.parametrize("task_id", SOLVED)
def test_bundled_triton_solution_is_correct(results: dict[str, EvalResult], task_id: str) -> None:
    result = results[task_id]
    assert result.status.value == "ok", result.feedback
    assert result.correct and result.custom_kernel_calls >= 1
    if INTERPRETED:
        assert "timing-not-meaningful" in result.flags
        assert result.timing_meaningful is False and result.speedup_eager is None and not result.faster
        assert "Triton interpreter" in result.device


def test_autotuned_kernel_runs_its_first_config_under_the_interpreter(results: dict[str, EvalResult]) -> None:
    assert results["autotuned"].status.value == "ok", results["autotuned"].feedback


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_triton_candidate_is_caught(results: dict[str, EvalResult], name: str) -> None:
    _, status, rule = BROKEN[name]
    result = results[name]
    assert result.status.value == status, result.feedback
    assert rule in {v.rule for v in result.violations}


@pytest.mark.skipif(not INTERPRETED, reason="a GPU is present: Triton runs on it")
def test_without_a_gpu_workers_start_in_interpreter_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = get_backend("triton")
    assert backend.unavailable_reason() is None
    # Without a GPU the executor pins no worker (no device index): it runs Triton's interpreter.
    assert backend.worker_environment(None) == {"TRITON_INTERPRET": "1"}
    assert backend.device().type == "cpu"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert backend.timing_meaningful is False


def _caught_signals() -> int:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1], 16) for line in handle if line.startswith("SigCgt:"))


def test_factory_warmup_installs_the_compilers_signal_handlers_before_candidates_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's compiler (LLVM) installs crash handlers at its first run; the factory makes that happen before forking.

    A candidate's first launch would otherwise change its signal handlers under the judge's eyes
    (``process-state-changed`` on honest answers, seen on an H100). Compiling needs no GPU: the
    warm-up is checked here in a fresh process, forced past the interpreter check.
    """
    import subprocess
    import sys

    script = (
        "import signal, sys\n"
        "from tests.backends.test_triton import _caught_signals\n"
        "from kernelgym.backends.triton import TritonBackend\n"
        "TritonBackend.interpreted = property(lambda self: False)\n"
        "before = _caught_signals()\n"
        "TritonBackend().prepare_factory()\n"
        "after = _caught_signals()\n"
        "term = 1 << (signal.SIGTERM - 1)\n"
        "print(int(not before & term), int(bool(after & term)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["1", "1"], done.stdout + done.stderr
