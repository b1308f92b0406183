"""Feedback text written for an LLM to act on.

Holds:
    compose_feedback: one status line, the details, the violations and a hint.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelgym.verifier.result import Status, Violation

__all__ = ["compose_feedback", "HINTS"]

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
