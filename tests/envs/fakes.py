"""Small real stand-ins for the envs tests: a scripted verifier and a toy suite.

Holds:
    FakeVerifier: judges an answer by its first word (a Status value); ``"ok 2.0"`` sets the speedup.
    toy_suite: three tiny KernelBench-format tasks.
"""

from __future__ import annotations

from kernelgym.tasks.task import Task, TaskSuite
from kernelgym.verifier.result import EvalResult, Status
from kernelgym.verifier.reward import RewardSpec

__all__ = ["FakeVerifier", "toy_suite"]

_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.{op}(x)


def get_inputs():
    return [torch.randn(16, 4096)]


def get_init_inputs():
    return []
'''


def toy_suite() -> TaskSuite:
    """Three single-op tasks (ReLU, Sigmoid, Tanh) in KernelBench format."""
    ops = ("relu", "sigmoid", "tanh")
    names = ("ReLU", "Sigmoid", "Tanh")
    tasks = tuple(
        Task(id=f"level1/{i}_{name}", name=name, level=1, problem_id=i, source=_SOURCE.format(op=op), suite="toy")
        for i, (name, op) in enumerate(zip(names, ops, strict=True), start=1)
    )
    return TaskSuite("toy", tasks)


class FakeVerifier:
    """A deterministic verifier: the answer's first word is the verdict (``format_error`` when it is none).

    For ``ok`` an optional second word is the speedup (default 1.0). Later stages fail the way the
    status implies, the score comes from the real :class:`RewardSpec`, and the feedback quotes the
    answer (so feedback sanitising and truncation can be observed). ``calls`` records
    ``("evaluate", 1)`` or ``("evaluate_many", batch size)`` per call.
    """

    def __init__(self, spec: RewardSpec | None = None) -> None:
        self.spec = spec or RewardSpec()
        self.calls: list[tuple[str, int]] = []
        self.closed = False

    def judge(self, task: Task, text: str) -> EvalResult:
        """The verdict on one answer (records nothing)."""
        words = text.split()
        values = {s.value for s in Status}
        status = Status(words[0]) if words and words[0] in values else Status.FORMAT_ERROR
        speedup = None
        if status is Status.OK:
            speedup = float(words[1]) if len(words) > 1 else 1.0
        parsed = status is not Status.FORMAT_ERROR
        legal = parsed and status is not Status.ILLEGAL
        compiled = status in (Status.OK, Status.INCORRECT, Status.RUNTIME_ERROR, Status.TIMEOUT)
        correct = status is Status.OK
        score = self.spec.score(status, compiled=compiled, correct=correct, speedup=speedup, timing_meaningful=True)
        return EvalResult(
            task_id=task.id,
            backend="fake",
            status=status,
            parsed=parsed,
            legal=legal,
            compiled=compiled,
            correct=correct,
            speedup_eager=speedup,
            timing_meaningful=True,
            feedback=f"[{status.value}] on {task.id}: {text}",
            score=score,
        )

    def evaluate(self, task: Task, text: str) -> EvalResult:
        """Judge one answer."""
        self.calls.append(("evaluate", 1))
        return self.judge(task, text)

    def evaluate_many(self, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
        """Judge a batch of answers."""
        self.calls.append(("evaluate_many", len(pairs)))
        return [self.judge(task, text) for task, text in pairs]

    def close(self) -> None:
        """Mark closed."""
        self.closed = True
