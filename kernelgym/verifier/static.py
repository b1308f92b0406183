"""The static stages, run in the caller's process: extract the program, then inspect it.

Holds:
    StaticOutcome: what the static stages concluded about one answer.
    run_static_stages: extract and inspect one answer.

Neither stage runs candidate code: extraction parses text and inspection walks
syntax trees, so both are safe (and cheap) outside the sandbox.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelgym.tasks.task import Task
from kernelgym.verifier.extract import FormatError, extract_program
from kernelgym.verifier.feedback import conclude
from kernelgym.verifier.inspect import inspect_program
from kernelgym.verifier.presets import CONTRACT_WAIVED, get_preset
from kernelgym.verifier.result import EvalResult, StageSeconds, Status

__all__ = ["StaticOutcome", "run_static_stages"]


@dataclass(frozen=True)
class StaticOutcome:
    """What the static stages concluded about one answer.

    Attributes:
        code: the extracted program ("" when extraction failed).
        seconds: time spent extracting and inspecting.
        rejection: the final result when a static stage rejected the answer
            (``format_error`` or ``illegal``); ``None`` when it goes on to the worker stages.
        contract_only: under the ``kernelbench`` preset, every rule the answer broke is one KernelBench's contract
            does not have (:data:`~kernelgym.verifier.presets.CONTRACT_WAIVED`): it can still be judged under that
            contract.
    """

    code: str
    seconds: StageSeconds
    rejection: EvalResult | None = None
    contract_only: bool = False


def run_static_stages(task: Task, text: str, backend: str, rules: str = "native") -> StaticOutcome:
    """Extract the program from ``text`` and inspect it against the rules of preset ``rules`` for ``backend``.

    Example:
        >>> from kernelgym.tasks import load_suite
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> run_static_stages(task, "no code here", "cpp").rejection.status.value
        'format_error'
    """
    start = time.perf_counter()
    try:
        code = extract_program(text if isinstance(text, str) else "")
    except FormatError as exc:
        seconds = StageSeconds(extract=time.perf_counter() - start)
        return StaticOutcome("", seconds, conclude(task.id, backend, Status.FORMAT_ERROR, details=[str(exc)], seconds=seconds,
                                                   rules=rules))
    extracted = time.perf_counter()
    waived = get_preset(rules).waived
    violations = tuple(v for v in inspect_program(code, backend, reference=task.source) if v.rule not in waived)
    seconds = StageSeconds(extract=extracted - start, inspect=time.perf_counter() - extracted)
    if not violations:
        return StaticOutcome(code, seconds)
    details = [f"Static analysis found {len(violations)} rule violation(s):"]
    rejection = conclude(task.id, backend, Status.ILLEGAL, details=details, violations=violations, seconds=seconds, rules=rules)
    contract_only = rules == "kernelbench" and all(v.rule in CONTRACT_WAIVED for v in violations)
    return StaticOutcome(code, seconds, rejection, contract_only)
