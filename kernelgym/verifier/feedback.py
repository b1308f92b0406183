"""Feedback text written for an LLM to act on, and the one place a verdict becomes a scored result.

Holds:
    compose_feedback: one status line, the details, the violations and a hint.
    conclude: a verdict (status, details, what was measured) as an :class:`EvalResult` with its
        score and feedback. The static stages, the judge and the executor's failure path all end here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelgym.verifier.result import EvalResult, Status, Violation
from kernelgym.verifier.reward import RewardSpec

__all__ = ["compose_feedback", "conclude", "HINTS"]

HINTS = {
    Status.OK: "The kernel is correct. To earn more, make it faster than the PyTorch reference.",
    Status.FORMAT_ERROR: "Answer with one Python code block that defines `class ModelNew(nn.Module)`.",
    Status.ILLEGAL: "Compute every output in your own native kernel; PyTorch/ATen may only allocate and reshape.",
    Status.COMPILE_ERROR: "Fix the first compiler error above; later errors often follow from it.",
    Status.RUNTIME_ERROR: "Check pointer arithmetic, sizes and dtypes; the kernel crashed or raised while running.",
    Status.INCORRECT: "Compare your indexing and accumulation with the reference; test odd sizes too.",
    Status.TIMEOUT: "The stage ran too long: look for infinite loops or far too much work per call.",
}


def compose_feedback(status: Status, details: Sequence[str], violations: Sequence[Violation] = (), lead: str = "") -> str:
    """Assemble feedback: the status line, then ``lead`` (e.g. the compiler's first error), details, violations, hint.

    Example:
        >>> print(compose_feedback(Status.COMPILE_ERROR, ["  4 | int x = y;"], lead="main.cpp:4:9: error: 'y' undeclared"))
        Status: compile_error
        main.cpp:4:9: error: 'y' undeclared
          4 | int x = y;
        Hint: Fix the first compiler error above; later errors often follow from it.
    """
    lines = [f"Status: {status.value}"]
    lines.extend(d for d in (lead, *details) if d)
    for v in violations:
        where = f"line {v.line}" if v.line else v.where
        lines.append(f"- [{v.rule}] {where}: {v.message}")
    lines.append(f"Hint: {HINTS[status]}")
    return "\n".join(lines)


def conclude(
    task_id: str,
    backend: str,
    status: Status,
    *,
    reward: RewardSpec | None = None,
    details: Sequence[str] = (),
    violations: Sequence[Violation] = (),
    lead: str = "",
    compiled: bool = False,
    correct: bool = False,
    speedup_eager: float | None = None,
    timing_meaningful: bool = False,
    **measured: Any,
) -> EvalResult:
    """The verdict as a result: score (``reward``'s formula, default weights if ``None``) and feedback composed here.

    ``parsed`` and ``legal`` follow from the status; ``measured`` holds the other
    :class:`EvalResult` fields (timings, errors, seconds, seeds, ...).

    Example:
        >>> r = conclude("level1/1_ReLU", "cpp", Status.INCORRECT, details=["Output 0 differs."], compiled=True)
        >>> (r.parsed, r.legal, r.score, r.feedback.splitlines()[0])
        (True, True, 0.1, 'Status: incorrect')
    """
    violations = tuple(violations)
    score = (reward or RewardSpec()).score(
        status, compiled=compiled, correct=correct, speedup=speedup_eager, timing_meaningful=timing_meaningful
    )
    return EvalResult(
        task_id=task_id,
        backend=backend,
        status=status,
        parsed=status is not Status.FORMAT_ERROR,
        legal=status not in (Status.FORMAT_ERROR, Status.ILLEGAL),
        compiled=compiled,
        correct=correct,
        speedup_eager=speedup_eager,
        timing_meaningful=timing_meaningful,
        violations=violations,
        feedback=compose_feedback(status, details, violations, lead),
        score=score,
        **measured,
    )
