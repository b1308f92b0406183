"""Feedback text written for an LLM to act on, and the one place a verdict becomes a scored result.

Holds:
    compose_feedback: one status line, the details, the violations and a hint (an illegal answer's from its rule preset).
    conclude: a verdict (status, details, what was measured) as an :class:`EvalResult` with its
        score and feedback. The static stages, the judge and the executor's failure path all end here.
    JUDGE_ERROR_FEEDBACK: the whole feedback of a ``judge_error`` (its reason goes to ``judge_reason``).
    with_contract / contract_of_rejected: a strict verdict with the verdict under KernelBench's contract beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kernelgym.verifier.presets import get_preset
from kernelgym.verifier.result import EvalResult, Status, Violation
from kernelgym.verifier.reward import RewardSpec

__all__ = ["compose_feedback", "conclude", "contract_of_rejected", "HINTS", "JUDGE_ERROR_FEEDBACK", "with_contract"]

HINTS = {
    Status.OK: "The kernel is correct. To earn more, make it faster than the PyTorch reference.",
    Status.FORMAT_ERROR: "Answer with one Python code block that defines `class ModelNew(nn.Module)`.",
    Status.COMPILE_ERROR: "Fix the first compiler error above; later errors often follow from it.",
    Status.RUNTIME_ERROR: "Check pointer arithmetic, sizes and dtypes; the kernel crashed or raised while running.",
    Status.INCORRECT: "Compare your indexing and accumulation with the reference; test odd sizes too.",
    Status.TIMEOUT: "The stage ran too long: look for infinite loops or far too much work per call.",
}
"""The hint closing each status's feedback; an ``illegal`` answer's comes from its rule preset instead."""

JUDGE_ERROR_FEEDBACK = (
    "Status: judge_error\n"
    "The judge failed before it reached a verdict on this answer; the attempt is not counted."
)
"""A judge error's feedback: no reason (an LLM cannot act on the judge's failure) and no hint."""


def compose_feedback(status: Status, details: Sequence[str], violations: Sequence[Violation] = (), lead: str = "",
                     rules: str = "native") -> str:
    """Assemble feedback: the status line, then ``lead`` (e.g. the compiler's first error), details, violations, hint.

    The hint is the status's (:data:`HINTS`); an ``illegal`` answer's is what its rule preset ``rules`` asks.

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
    hint = get_preset(rules).illegal_hint if status is Status.ILLEGAL else HINTS[status]
    lines.append(f"Hint: {hint}")
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
    :class:`EvalResult` fields (timings, errors, seconds, seeds, ...). A ``judge_error`` scores 0, its
    feedback is :data:`JUDGE_ERROR_FEEDBACK`, and ``lead`` and ``details`` become its ``judge_reason``.

    Example:
        >>> r = conclude("level1/1_ReLU", "cpp", Status.INCORRECT, details=["Output 0 differs."], compiled=True)
        >>> (r.parsed, r.legal, r.score, r.feedback.splitlines()[0])
        (True, True, 0.1, 'Status: incorrect')
    """
    violations = tuple(violations)
    if status is Status.JUDGE_ERROR:  # says nothing about the answer: no score, and the reason is for people only
        return EvalResult(task_id=task_id, backend=backend, status=status, parsed=True, compiled=compiled,
                          feedback=JUDGE_ERROR_FEEDBACK, judge_reason="\n".join(d for d in (lead, *details) if d), **measured)
    score = (reward or RewardSpec()).score(
        status, compiled=compiled, correct=correct, speedup=speedup_eager, timing_meaningful=timing_meaningful,
        own_kernel_share=measured.get("own_kernel_share"),
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
        feedback=compose_feedback(status, details, violations, lead, measured.get("rules", "native")),
        score=score,
        **measured,
    )


def with_contract(result: EvalResult, kb_status: Status, kb_speedup: float | None, differs_by: str,
                  reason: str = "") -> EvalResult:
    """``result`` with the verdict under KernelBench's contract, and a line of feedback saying what separates them
    (``reason``: why the contract's verdict is not ``ok``, where it is not)."""
    timed = f", speedup {kb_speedup:.3f}x" if kb_speedup is not None else ""
    why = f" ({reason})" if reason and kb_status is not Status.OK else ""
    both_ok = kb_status is Status.OK and result.status is Status.OK
    differs = (f"the two verdicts agree; the speedups differ by {differs_by}." if both_ok else
               f"the strict verdict differs by {differs_by}, a check KernelBench does not make.")
    line = (f"Under KernelBench's own contract (its seeds and inputs, the weights ModelNew's own __init__ makes from its "
            f"seed, the model called as built, the task's own shapes, torch.allclose) this answer is {kb_status.value}{timed}{why}; {differs}")
    return result.with_changes(kernelbench_status=kb_status.value, kernelbench_speedup=kb_speedup,
                               kernelbench_differs_by=differs_by, feedback=f"{result.feedback}\n{line}")


def contract_of_rejected(strict: EvalResult, judged: EvalResult) -> EvalResult:
    """The static stages' ``illegal`` verdict, with the verdict of the same answer judged under KernelBench's contract.

    A judge error says nothing of the answer: the strict verdict then stands alone.
    """
    seconds = replace(judged.seconds, extract=strict.seconds.extract, inspect=strict.seconds.inspect)
    strict = strict.with_changes(seconds=seconds, compiled=judged.compiled, cache_hit=judged.cache_hit, device=judged.device,
                                 own_kernel_share=judged.own_kernel_share)
    if judged.status is Status.JUDGE_ERROR:
        return strict
    kb_status = Status(judged.kernelbench_status) if judged.kernelbench_status is not None else judged.status
    differs_by = ", ".join(dict.fromkeys(f"`{v.rule}`" for v in strict.violations))
    return with_contract(strict, kb_status, judged.kernelbench_speedup_eager, differs_by, _first_detail(judged.feedback))


def _first_detail(feedback: str, limit: int = 300) -> str:
    r"""The first line of a judgement's feedback after its ``Status:`` line (what the verdict rests on), shortened.

    Example:
        >>> _first_detail("Status: incorrect\n- [wrong-output] runtime: trial 1: the output differs\nHint: ...")
        '- [wrong-output] runtime: trial 1: the output differs'
    """
    lines = [line.strip() for line in feedback.splitlines() if line.strip() and not line.startswith("Status:")]
    return lines[0][:limit] if lines else ""
