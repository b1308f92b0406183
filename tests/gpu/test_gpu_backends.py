"""The GPU backends on a real GPU: the bundled answers, broken variants, the hack corpus, CUDA errors, timing.

Every test is marked ``gpu`` (skipped without CUDA). Candidates are judged in
batches: one verifier per backend with several workers sharing the GPU builds
and checks everything in parallel (timing noise does not matter there): the
bundled answers, broken variants of them, and the CUDA and Triton samples of
``tests/hacks`` and ``tests/legit`` with the status each names in its header.
A one-worker verifier then judges a failing kernel and a good one on the same
GPU one after the other, and a one-worker verifier with the GPU to itself
times a few answers.

``KERNELGYM_GPU_TEST_WORKERS`` sets the parallel workers (default 8: a cold
CUDA build takes ~30 s on 2 cores, so builds dominate).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.tasks import load_suite
from kernelgym.verifier import StageTimeouts, VerifierConfig
from kernelgym.verifier.result import EvalResult

pytestmark = pytest.mark.gpu

SUITE = load_suite("gpu")
RELU = SUITE["level1/1_ReLU"]
WORKERS = int(os.environ.get("KERNELGYM_GPU_TEST_WORKERS", "8"))
PARALLEL = VerifierConfig(runs=5, warmup=1, timeouts=StageTimeouts(check=60.0))
REPO = Path(__file__).resolve().parents[2]


def variant(task_id: str, backend: str, old: str, new: str) -> str:
    """The bundled answer of ``task_id`` with one piece of text replaced (which must be there)."""
    code = SUITE[task_id].solution(backend)
    assert old in code, f"{old!r} not in the {backend} answer of {task_id}"
    return code.replace(old, new)


RELU_LAUNCH = "relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>"

# name -> (task id, backend, code, expected status, expected rule or None)
BROKEN = {
    "cuda-half-range": (
        "level1/1_ReLU", "cuda", variant("level1/1_ReLU", "cuda", "i < n; i += stride", "i < n / 2; i += stride"),
        "incorrect", "wrong-output",
    ),
    "cuda-output-never-written": (
        "level1/1_ReLU", "cuda", variant("level1/1_ReLU", "cuda", RELU_LAUNCH, f"if (n < 0) {RELU_LAUNCH}"),
        "incorrect", "wrong-output",
    ),
    "cuda-softmax-unnormalized": (
        "level1/5_Softmax", "cuda", variant("level1/5_Softmax", "cuda", "expf(row[j] - m) * inv", "expf(row[j] - m)"),
        "incorrect", "wrong-output",
    ),
    "cuda-matmul-drops-k-tail": (
        "level1/9_Matmul", "cuda", variant("level1/9_Matmul", "cuda", "k0 < K; k0 += BK", "k0 + BK <= K; k0 += BK"),
        "incorrect", "shape-variant-mismatch",
    ),
    "triton-add-subtracts": (
        "level1/4_Add", "triton", variant("level1/4_Add", "triton", "a + b, mask=mask", "a - b, mask=mask"),
        "incorrect", "wrong-output",
    ),
    "triton-softmax-mask-zero": (
        "level1/5_Softmax", "triton", variant("level1/5_Softmax", "triton", 'other=-float("inf")', "other=0.0"),
        "incorrect", "shape-variant-mismatch",
    ),
}

# Kernels that break the GPU context or never finish, and a good answer to judge after each.
FAULTS = {
    "cuda": (
        variant("level1/1_ReLU", "cuda", "y[i] = v > 0.0f ? v : 0.0f;", "y[i + ((int64_t)1 << 40)] = v > 0.0f ? v : 0.0f;"),
        variant(
            "level1/1_ReLU", "cuda", "const float v = x[i];",
            # One thread spins for about a minute (bounded, so the GPU frees itself even if the kill came late).
            "if (i == 0) { const long long t0 = clock64(); while (clock64() - t0 < 120000000000LL) {} }\n"
            "        const float v = x[i];",
        ),
    ),
    "triton": (
        variant("level1/1_ReLU", "triton", "tl.store(y_ptr + offsets,", "tl.store(y_ptr + offsets + (1 << 40),"),
        None,
    ),
}
FAULT_TIMEOUTS = StageTimeouts(check=30.0)

# A Triton kernel that does not compile (Triton compiles at the first launch, inside forward).
TRITON_COMPILE_ERROR = variant("level1/1_ReLU", "triton", "tl.maximum(x, 0.0)", "tl.maximum(x, no_such_name)")


def solutions(backend: str) -> list[str]:
    return [task.id for task in SUITE if backend in task.solutions]


def corpus(backend: str) -> dict[str, tuple[str, str, str, str | None]]:
    """``tests/hacks`` and ``tests/legit`` samples: name -> (task id, code, expected status, expected rule)."""
    samples = {}
    for folder in ("hacks", "legit"):
        for path in sorted((REPO / "tests" / folder / backend).glob("*.py")):
            code = path.read_text()
            header = dict(line[2:].split(": ", 1) for line in code.splitlines()[:4] if line.startswith("# ") and ": " in line)
            samples[f"{folder}/{backend}/{path.stem}"] = (header["task"], code, header["expect"], header.get("rule"))
    return samples


CORPUS = {backend: corpus(backend) for backend in ("cuda", "triton")}

@pytest.fixture(scope="module")
def parallel_results(cache_dir: Path) -> Iterator[dict[tuple[str, str], EvalResult]]:
    """Answers, broken variants and faulting kernels of both backends, judged in parallel (this builds them all)."""
    judged: dict[tuple[str, str], EvalResult] = {}
    for backend in ("cuda", "triton"):
        pairs = {("ok", task_id): (SUITE[task_id], SUITE[task_id].solution(backend)) for task_id in solutions(backend)}
        pairs |= {("broken", name): (SUITE[spec[0]], spec[2]) for name, spec in BROKEN.items() if spec[1] == backend}
        pairs |= {("fault", f"{backend}-{i}"): (RELU, code) for i, code in enumerate(FAULTS[backend]) if code}
        pairs |= {("corpus", name): (SUITE[spec[0]], spec[1]) for name, spec in CORPUS[backend].items()}
        if backend == "triton":
            pairs[("compile", "triton")] = (RELU, TRITON_COMPILE_ERROR)
        with Verifier(backend=backend, num_workers=WORKERS, cache_dir=cache_dir, config=PARALLEL) as verifier:
            results = verifier.evaluate_many(list(pairs.values()))
        judged |= {(kind, f"{backend}:{name}" if kind == "ok" else name): r for (kind, name), r in zip(pairs, results, strict=True)}
    yield judged


@pytest.mark.parametrize(
    "key", [f"{b}:{t}" for b in ("cuda", "triton") for t in solutions(b)]
)
def test_bundled_answer_is_correct_on_the_gpu(parallel_results: dict[tuple[str, str], EvalResult], key: str) -> None:
    result = parallel_results[("ok", key)]
    assert result.status.value == "ok", result.feedback
    assert result.timing_meaningful and result.custom_kernel_calls >= 1
    assert result.speedup_eager is not None and result.speedup_eager > 0


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_variant_is_caught(parallel_results: dict[tuple[str, str], EvalResult], name: str) -> None:
    _, _, _, status, rule = BROKEN[name]
    result = parallel_results[("broken", name)]
    assert result.status.value == status, result.feedback
    assert rule in {v.rule for v in result.violations}, result.feedback


def test_triton_compile_error_names_the_problem(parallel_results: dict[tuple[str, str], EvalResult]) -> None:
    result = parallel_results[("compile", "triton")]
    assert result.status.value in ("compile_error", "runtime_error"), result.feedback
    assert "could not compile" in result.feedback and "no_such_name" in result.feedback


@pytest.mark.parametrize("name", [name for samples in CORPUS.values() for name in samples])
def test_corpus_sample_gets_its_expected_status(parallel_results: dict[tuple[str, str], EvalResult], name: str) -> None:
    _, _, status, rule = CORPUS[name.split("/")[1]][name]
    result = parallel_results[("corpus", name)]
    assert result.status.value == status, result.feedback
    if rule is not None:
        assert rule in {v.rule for v in result.violations}, result.feedback


def test_poisoning_fills_freed_memory_in_place_and_keeps_it_cached() -> None:
    """A result left in freed memory reads as NaN in the next allocation, in every float format, and a
    second call of one signature hands nothing back to the driver (no driver allocation around a timed call)."""
    import torch

    from kernelgym.backends import get_backend

    backend = get_backend("cuda")
    backend.poison_memory(("first call",))
    stale = torch.full((1 << 22,), 7.0, device="cuda")
    del stale
    reserved = torch.cuda.memory_reserved()
    backend.poison_memory(("first call",))
    assert torch.cuda.memory_reserved() == reserved
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        assert torch.empty(1 << 22, dtype=dtype, device="cuda").isnan().all()
    backend.poison_memory(("other shapes",))  # a new signature: the first call's allocations are poisoned too
    assert torch.empty(1 << 20, device="cuda").isnan().all()


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_faulting_kernel_then_a_good_one_on_the_same_gpu(cache_dir: Path, backend: str) -> None:
    """One worker: an illegal memory access (and, for CUDA, a hung kernel) ends in a failure, and the next answer passes."""
    illegal, hung = FAULTS[backend]
    good = RELU.solution(backend)
    pairs = [(RELU, illegal), (RELU, good)] + ([(RELU, hung), (RELU, good)] if hung else [])
    config = VerifierConfig(runs=5, warmup=1, timeouts=FAULT_TIMEOUTS)
    with Verifier(backend=backend, num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        results = verifier.evaluate_many(pairs)
    assert results[0].status.value == "runtime_error", results[0].feedback
    assert "illegal memory access" in results[0].feedback or "CUDA error" in results[0].feedback
    assert results[1].status.value == "ok", results[1].feedback
    if hung:
        assert results[2].status.value == "timeout", results[2].feedback
        assert results[3].status.value == "ok", results[3].feedback


@pytest.mark.parametrize(("backend", "task_ids"), [("cuda", ["level1/1_ReLU", "level2/1_Scale_Tanh_Add"]), ("triton", ["level1/5_Softmax"])])
def test_timing_on_a_gpu_of_its_own(cache_dir: Path, backend: str, task_ids: list[str]) -> None:
    """One worker per GPU, 100 event-timed runs, eager and torch.compile references."""
    config = VerifierConfig(runs=100, warmup=10, compile_baseline=True)
    with Verifier(backend=backend, cache_dir=cache_dir, config=config) as verifier:
        results = verifier.evaluate_many([(SUITE[t], SUITE[t].solution(backend)) for t in task_ids])
    for result in results:
        assert result.status.value == "ok", result.feedback
        assert result.timing_meaningful and "NVIDIA" in result.device
        assert result.runtime_ms and result.ref_eager_ms and result.ref_compile_ms, result.feedback
        assert result.speedup_compile is not None and "excessive-speedup" not in result.flags


def test_gpu_report_writes_machine_date_commit(tmp_path: Path, cache_dir: Path) -> None:
    out = tmp_path / "results"
    env = dict(os.environ, KERNELGYM_CACHE=str(cache_dir))
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_report.py"), "--tasks", "level1/1_ReLU", "--runs", "10",
         "--no-compile-baseline", "--out", str(out)],
        check=True, env=env, cwd=REPO, timeout=600,
    )
    (md,) = out.glob("gpu-*.md")
    (js,) = out.glob("gpu-*.json")
    text = md.read_text()
    for field in ("Machine", "Date", "Commit", "level1/1_ReLU"):
        assert field in text
    assert '"machine"' in js.read_text()


def _allocating_relu(gib: float) -> str:
    """The bundled Triton ReLU answer that first asks the device for ``gib`` GiB in ``forward``."""
    return variant("level1/1_ReLU", "triton", "        x = x.contiguous()\n",
                   f"        spare = torch.empty({int(gib * 2**30)}, dtype=torch.uint8, device=x.device)\n"
                   "        x = x.contiguous()\n")


def test_out_of_memory_is_the_answers_unless_another_process_holds_the_gpu(cache_dir: Path) -> None:
    """An answer that asks for more than the device has is a ``runtime_error``; one that asks for 8 GiB while
    another process holds all but 6 GiB of the device gets a ``judge_error``, which is not the answer's failure."""
    hog_code = ("import sys, torch\n"
                "free, total = torch.cuda.mem_get_info()\n"
                "held = torch.empty(free - 6 * 2**30, dtype=torch.uint8, device='cuda')\n"
                "print(total, flush=True)\n"
                "sys.stdin.read()\n")
    config = VerifierConfig(runs=5, warmup=1, timeouts=FAULT_TIMEOUTS)
    with Verifier(backend="triton", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        own = verifier.evaluate(RELU, _allocating_relu(1024))
        hog = subprocess.Popen([sys.executable, "-c", hog_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert int(hog.stdout.readline()) > 0  # the memory is held
            crowded = verifier.evaluate(RELU, _allocating_relu(8))
        finally:
            hog.kill()
            hog.wait()
    assert own.status.value == "runtime_error", own.feedback
    assert "out of memory" in own.feedback
    assert crowded.status.value == "judge_error", crowded.feedback
    assert "held by processes other than this judge's" in crowded.judge_reason
    assert "out of memory" not in crowded.feedback  # the judge's reason is not the answer's feedback
