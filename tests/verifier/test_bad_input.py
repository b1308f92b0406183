"""Bad input gets a status and a sentence, never a crash; nothing is left running afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.tasks import Task

# One native module with every misbehaviour; each candidate calls one of them,
from kernelgym.verifier import StageTimeouts, Status, VerifierConfig

# One native module with every misbehaviour; each candidate calls one of them,
# so the whole file costs a single (cached) build.
EVIL_MODULE = '''
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = a[i] > 0.f ? a[i] : 0.f;
    return out;
}
torch::Tensor spin(torch::Tensor x) {
    volatile int forever = 1;
    while (forever) {}
    return x;
}
torch::Tensor crash(torch::Tensor x) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
    return x;
}
"""

module = load_inline(
    name="evil",
    cpp_sources=cpp_source,
    functions=["relu", "spin", "crash"],
    extra_cflags=["-O3", "-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        {body}
'''


def candidate(body: str) -> str:
    return EVIL_MODULE.replace("{body}", body)


def built_ahead(suite: dict, _items: list) -> list:
    """The one build every candidate of this module shares (``answers_built_ahead`` in ``tests/conftest.py``)."""
    return [(suite["level1/1_ReLU"], candidate("return module.relu(x)"))]


@pytest.fixture(scope="module")
def strict_verifier(cache_dir: Path):
    config = VerifierConfig(runs=2, warmup=1, timeouts=StageTimeouts(build=600, check=8, time=8), memory_limit_gb=8)
    verifier = Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config)
    yield verifier
    verifier.close()


@pytest.fixture(scope="module")
def relu(cpu_suite) -> Task:
    return cpu_suite["level1/1_ReLU"]


def _kernelgym_processes(module: bytes = b"kernelgym.executor.worker") -> list[int]:
    """Live processes running ``module`` that descend from this test process (other kernelgym runs on the machine do not count)."""
    parents, found = {}, []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(stat[1])
            if module in cmdline and stat[0] != "Z":
                found.append(int(entry))

    def ours(pid: int) -> bool:
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parents.get(pid, 0)
        return False

    return [pid for pid in found if ours(pid)]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("", "empty"),
        ("I would write a fast kernel here, but I am not sure how.", "code"),
        ("```python\nimport torch\nx = 1\n```", "ModelNew"),
        ("```python\nclass ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n```", "line"),
    ],
)
def test_unusable_text_is_a_format_error(strict_verifier: Verifier, relu: Task, text: str, phrase: str) -> None:
    result = strict_verifier.evaluate(relu, text)
    assert result.status is Status.FORMAT_ERROR
    assert result.score == 0.0
    assert phrase.lower() in result.feedback.lower()


@pytest.mark.slow
def test_working_candidate_is_ok(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, candidate("return module.relu(x)"))
    assert result.status is Status.OK, result.feedback
    assert result.custom_kernel_calls >= 1


@pytest.mark.slow
def test_python_infinite_loop_times_out(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, candidate("while True:\n            module.relu(x)"))
    assert result.status is Status.TIMEOUT
    assert "check stage exceeded" in result.feedback


@pytest.mark.slow
def test_native_infinite_loop_times_out(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, candidate("return module.spin(x)"))
    assert result.status is Status.TIMEOUT


@pytest.mark.slow
def test_segfault_is_a_runtime_error(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, candidate("return module.crash(x)"))
    assert result.status is Status.RUNTIME_ERROR
    assert "SIGSEGV" in result.feedback


PROCESS_MODULE = EVIL_MODULE.replace(
    "torch::Tensor relu(", "#include <unistd.h>\ntorch::Tensor quit(torch::Tensor x) { _exit(0); return x; }\n"
    "torch::Tensor spawn(torch::Tensor x) { if (syscall(57) == 0) { for (;;) pause(); } return x; }\ntorch::Tensor relu(",
).replace('functions=["relu", "spin", "crash"]', 'functions=["relu", "spin", "crash", "quit", "spawn"]').replace('name="evil"', 'name="evil_process"')


@pytest.mark.slow
def test_exit_or_fork_from_native_code_is_refused_before_it_runs(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, PROCESS_MODULE.replace("{body}", "return module.quit(x)"))
    assert result.status is Status.ILLEGAL
    assert "[forbidden-native-symbol]" in result.feedback and "`_exit`" in result.feedback and "`syscall`" in result.feedback


def test_python_exit_is_illegal(strict_verifier: Verifier, relu: Task) -> None:
    result = strict_verifier.evaluate(relu, candidate("import os\n        os._exit(0)"))
    assert result.status is Status.ILLEGAL


@pytest.mark.slow
def test_huge_allocation_is_a_runtime_error(strict_verifier: Verifier, relu: Task) -> None:
    body = "big = torch.empty(100 * 2**30, dtype=torch.uint8)\n        return module.relu(x)"
    result = strict_verifier.evaluate(relu, candidate(body))
    assert result.status is Status.RUNTIME_ERROR
    assert "memory" in result.feedback.lower() or "alloc" in result.feedback.lower()


@pytest.mark.slow
def test_a_timed_out_candidate_leaves_no_process(strict_verifier: Verifier, relu: Task) -> None:
    strict_verifier.evaluate(relu, candidate("return module.relu(x)"))  # the worker, its factory and a spare are up
    before = len(_kernelgym_processes(b"kernelgym.executor.candidate"))
    result = strict_verifier.evaluate(relu, candidate("return module.spin(x)"))
    assert result.status is Status.TIMEOUT
    # The spinning candidate was killed; a fresh spare took its place, no more.
    assert len(_kernelgym_processes(b"kernelgym.executor.candidate")) <= before, "the timed-out candidate survived"


@pytest.mark.slow
def test_next_evaluation_still_works(strict_verifier: Verifier, relu: Task) -> None:
    strict_verifier.evaluate(relu, candidate("return module.crash(x)"))
    result = strict_verifier.evaluate(relu, candidate("return module.relu(x)"))
    assert result.status is Status.OK, result.feedback


def test_task_without_model_is_reported(strict_verifier: Verifier) -> None:
    broken = Task(id="level1/99_Broken", name="Broken", level=1, problem_id=99, source="import torch\nx = 1\n")
    result = strict_verifier.evaluate(broken, candidate("return module.relu(x)"))
    assert result.status is Status.RUNTIME_ERROR
    assert "Task error" in result.feedback and "Model" in result.feedback


def test_writes_outside_the_sandbox_are_refused(tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    script = textwrap.dedent(
        f"""
        from kernelgym.executor.sandbox import restrict_filesystem
        applied = restrict_filesystem(({str(inside)!r},))
        if applied == "unavailable":
            print("unavailable"); raise SystemExit(0)
        open({str(inside / 'ok.txt')!r}, "w").write("fine")
        try:
            open({str(outside / 'escape.txt')!r}, "w").write("escaped")
            print("escaped")
        except PermissionError:
            print("refused")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    if out == "unavailable":
        pytest.skip("this kernel has no Landlock")
    assert out == "refused"
    assert (inside / "ok.txt").exists() and not (outside / "escape.txt").exists()


def _children() -> set[int]:
    return {pid for pid in _kernelgym_processes() if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())}


def test_no_worker_left_after_close(cache_dir: Path, relu: Task) -> None:
    others = _children()
    verifier = Verifier(backend="cpp", num_workers=2, cache_dir=cache_dir, config=VerifierConfig(runs=1, warmup=0))
    verifier.evaluate_many([(relu, candidate("return module.relu(x)"))] * 2)
    mine = _children() - others
    assert mine, "the evaluation should have started workers"
    verifier.close()
    assert not (mine & set(_kernelgym_processes()))
