"""The fake verifier every CPU test of the envs and wrappers shares: a verdict scripted by the answer's first word.

Holds:
    judge: the verdict on one answer: its first word is the status (``format_error`` when it is none);
        ``"ok 2.0"`` sets the speedup (default 1.0, also when the second word is no number).
    FakeVerifier: a verifier (``evaluate``/``evaluate_many``/``close``) that judges with :func:`judge`
        and records its calls.
"""

from __future__ import annotations

from kernelgym.tasks.task import Task
from kernelgym.verifier.result import EvalResult, Status
from kernelgym.verifier.reward import RewardSpec

__all__ = ["FakeVerifier", "judge"]


def _speedup(rest: list[str]) -> float:
    """The speedup an ``ok`` answer names as its second word (1.0 when it names none)."""
    try:
        return float(rest[0])
    except (IndexError, ValueError):
        return 1.0


def judge(task_id: str, text: str, spec: RewardSpec | None = None) -> EvalResult:
    """Judge ``text`` as the status named by its first word (``"ok"``, ``"incorrect"``, ...).

    Every later stage fails the way that status implies, the score comes from the real
    :class:`RewardSpec`, and the feedback quotes the answer, so tests can tell attempts apart
    and see feedback sanitised and cut.
    """
    words = text.split()
    status = Status(words[0]) if words and words[0] in {s.value for s in Status} else Status.FORMAT_ERROR
    speedup = _speedup(words[1:]) if status is Status.OK else None
    parsed = status is not Status.FORMAT_ERROR
    legal = parsed and status is not Status.ILLEGAL
    compiled = status in (Status.OK, Status.INCORRECT, Status.RUNTIME_ERROR, Status.TIMEOUT)
    correct = status is Status.OK
    score = (spec or RewardSpec()).score(status, compiled=compiled, correct=correct, speedup=speedup, timing_meaningful=True)
    return EvalResult(
        task_id=task_id,
        backend="fake",
        status=status,
        parsed=parsed,
        legal=legal,
        compiled=compiled,
        correct=correct,
        speedup_eager=speedup,
        timing_meaningful=True,
        feedback=f"[{status.value}] on {task_id}: {text}",
        score=score,
    )


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
        return judge(task.id, text, self.spec)

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
