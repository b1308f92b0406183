"""What the verifier returns.

Holds:
    Status: the outcome of one evaluation.
    Violation: one broken rule, with its id, line and a sentence.
    StageSeconds: wall time spent in each stage.
    EvalResult: the frozen, JSON-serialisable record of one evaluation.
    JUDGE_ERROR_FLAG: the flag older records carry for a judge error (they had status ``runtime_error``).
    is_judge_error: whether a result or its record is a judge error (the one test, for every reader).
    JudgeError: raised where a judge error must not pass as the answer's verdict (the env, after retries).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from typing import Any

__all__ = ["Status", "Violation", "StageSeconds", "EvalResult", "STAGES", "JUDGE_ERROR_FLAG", "JudgeError", "is_judge_error"]

STAGES = ("extract", "inspect", "build", "check", "time")
JUDGE_ERROR_FLAG = "judge-error"
"""The flag that records written before status ``judge_error`` existed carry for a judge error."""


class Status(str, Enum):
    """Outcome of one evaluation, from least to most advanced failure, then ``ok``.

    ``ok``: legal, compiled and correct (timing may or may not show a speedup).
    ``format_error``: no usable ``ModelNew`` program in the text.
    ``illegal``: a rule was broken (PyTorch fallback, hack, forbidden access).
    ``compile_error``: the native code did not build.
    ``runtime_error``: loading or running the candidate raised or crashed.
    ``incorrect``: ran, but outputs (or inputs, by mutation) differ from the reference.
    ``timeout``: a stage ran past its wall-clock budget.
    ``judge_error``: the judge itself failed (a worker that could not start or died, an internal
    error); it says nothing about the answer, scores 0 and is never paid out as a reward.
    """

    OK = "ok"
    FORMAT_ERROR = "format_error"
    ILLEGAL = "illegal"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    INCORRECT = "incorrect"
    TIMEOUT = "timeout"
    JUDGE_ERROR = "judge_error"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Violation:
    """One broken rule.

    Attributes:
        rule: stable rule id, e.g. ``"torch-compute-in-forward"``.
        line: 1-based line in the extracted candidate program (0 when not tied to a line).
        message: a sentence an LLM can act on.
        where: ``"python"``, ``"cpp"`` (native source) or ``"runtime"``.
    """

    rule: str
    line: int
    message: str
    where: str = "python"


@dataclass(frozen=True)
class StageSeconds:
    """Wall-clock seconds spent in each stage (0.0 for a stage that did not run)."""

    extract: float = 0.0
    inspect: float = 0.0
    build: float = 0.0
    check: float = 0.0
    time: float = 0.0

    @property
    def total(self) -> float:
        """Sum over stages."""
        return self.extract + self.inspect + self.build + self.check + self.time


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class EvalResult:
    """The record of one evaluation of a candidate against a task.

    Attributes:
        task_id: the task evaluated.
        backend: the backend the candidate targeted.
        status: the outcome (see :class:`Status`).
        parsed: a ``ModelNew`` program was extracted and is valid Python.
        legal: no rule was broken (static or runtime).
        compiled: the candidate's native code built and its module loaded.
        correct: outputs matched the reference on every trial and variant.
        speedup_eager: reference eager time / candidate time (``None``: not timed).
        speedup_compile: ``torch.compile`` reference time / candidate time.
        faster: ``speedup_eager`` above the configured threshold (1.1 by default).
        runtime_ms: candidate median time per call.
        runtime_spread_ms: candidate interquartile range.
        timed_calls: the candidate's credited timed calls, those its median is over.
        ref_eager_ms: reference eager median time.
        ref_compile_ms: reference ``torch.compile`` median time.
        timing_meaningful: ``False`` when timing cannot mean anything (interpreter, emulation).
        max_abs_error: largest absolute error seen in correctness trials.
        max_rel_error: largest relative error seen in correctness trials.
        violations: broken rules.
        flags: warnings that do not change the status (e.g. ``"excessive-speedup"``).
        feedback: a text written for an LLM to act on.
        score: the bounded reward from :class:`~kernelgym.verifier.reward.RewardSpec`.
        seconds: wall time per stage.
        cache_hit: the build was served from the content-addressed cache.
        custom_kernel_calls: native kernel entry points/launches seen during one forward.
        seeds: the seeds used for the correctness trials (reproducibility).
        device: the device the candidate ran on, in words.
        rules: the rule preset it was judged by (``native`` or ``kernelbench``).
        weights: the weights contract it was judged by (``redrawn``, ``fixed`` or ``seeded``; see
            :class:`~kernelgym.verifier.config.VerifierConfig`).
        judge_reason: for ``judge_error``, why the judge failed (for people and logs; kept out of ``feedback``).
        kernelbench_status: under the ``kernelbench`` preset, where the strict verdict was not ``ok`` for a reason
            KernelBench's contract does not know (weights redrawn, shapes derived from the task, modes), or was ``ok``
            with the reference's weights copied over other ones ``ModelNew``'s own ``__init__`` made: the status
            under that contract (the weights ``ModelNew``'s own ``__init__`` makes from the task's seed, the task's
            own shapes, KernelBench's tolerances, every hack defense on). ``None``: the same as ``status`` (read it
            through :attr:`kernelbench_verdict`).
        kernelbench_speedup: the speedup measured under that contract, where it was judged and its verdict is ``ok``.
        kernelbench_differs_by: the kernelgym-only check that separates the two verdicts (a rule id, or a sentence).
        own_kernel_share: for an ``ok`` answer on a device, the share of its forward's device time spent in kernels
            its own source defines (the rest is PyTorch's and its libraries'); below ``VerifierConfig.lazy_share``
            it is flagged ``lazy-optimization`` (:mod:`kernelgym.verifier.kernel_share`). ``None``: not measured.
    """

    task_id: str
    backend: str
    status: Status
    parsed: bool = False
    legal: bool = False
    compiled: bool = False
    correct: bool = False
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    faster: bool = False
    runtime_ms: float | None = None
    runtime_spread_ms: float | None = None
    timed_calls: int = 0
    ref_eager_ms: float | None = None
    ref_compile_ms: float | None = None
    timing_meaningful: bool = False
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    violations: tuple[Violation, ...] = ()
    flags: tuple[str, ...] = ()
    feedback: str = ""
    score: float = 0.0
    seconds: StageSeconds = field(default_factory=StageSeconds)
    cache_hit: bool = False
    custom_kernel_calls: int = 0
    seeds: tuple[int, ...] = ()
    device: str = ""
    rules: str = "native"
    weights: str = "redrawn"
    judge_reason: str = ""
    kernelbench_status: str | None = None
    kernelbench_speedup: float | None = None
    kernelbench_differs_by: str = ""
    own_kernel_share: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        for name in ("speedup_eager", "speedup_compile", "max_abs_error", "max_rel_error", "kernelbench_speedup"):
            object.__setattr__(self, name, _finite_or_none(getattr(self, name)))

    @property
    def ok(self) -> bool:
        """Legal, compiled and correct."""
        return self.status is Status.OK

    @property
    def judge_error(self) -> bool:
        """The judge failed; the result says nothing about the answer."""
        return self.status is Status.JUDGE_ERROR

    @property
    def kernelbench_verdict(self) -> Status | None:
        """The verdict under KernelBench's own contract (``None`` unless judged under the ``kernelbench`` preset)."""
        if self.kernelbench_status is not None:
            return Status(self.kernelbench_status)
        return self.status if self.rules == "kernelbench" else None

    @property
    def kernelbench_speedup_eager(self) -> float | None:
        """The speedup under KernelBench's contract (the strict one where both verdicts agree)."""
        if self.kernelbench_status is not None:
            return self.kernelbench_speedup
        return self.speedup_eager if self.rules == "kernelbench" else None

    @property
    def speedup(self) -> float | None:
        """Speedup over the eager reference (the headline number)."""
        return self.speedup_eager

    def with_changes(self, **changes: Any) -> EvalResult:
        """Return a copy with some fields replaced."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dict (``status`` as its string, violations as dicts)."""
        data = asdict(self)
        data["status"] = self.status.value
        data["speedup"] = self.speedup
        return data

    def to_json(self) -> str:
        """One-line JSON."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["violations"] = tuple(Violation(**v) for v in data.get("violations", ()))
        kwargs["seconds"] = StageSeconds(**data.get("seconds", {}))
        kwargs["flags"] = tuple(data.get("flags", ()))
        kwargs["seeds"] = tuple(data.get("seeds", ()))
        return cls(**kwargs)


def is_judge_error(record: EvalResult | Mapping[str, Any]) -> bool:
    """Whether ``record`` (a result, or its dict as a run file holds it) is a judge error.

    Records written before status ``judge_error`` existed say so with the ``judge-error`` flag.

    Example:
        >>> is_judge_error({"status": "judge_error"}), is_judge_error({"status": "runtime_error", "flags": ["judge-error"]})
        (True, True)
        >>> is_judge_error({"status": "runtime_error"})
        False
    """
    if isinstance(record, EvalResult):
        return record.judge_error or JUDGE_ERROR_FLAG in record.flags
    return record.get("status") == Status.JUDGE_ERROR.value or JUDGE_ERROR_FLAG in (record.get("flags") or ())


class JudgeError(RuntimeError):
    """The judge failed on an answer, again after retries; raised so that no reward is paid for it.

    Attributes:
        result: the last judge-error result (``result.judge_reason`` says why the judge failed).
    """

    def __init__(self, result: EvalResult, attempts: int = 1) -> None:
        self.result = result
        super().__init__(
            f"the judge failed on an answer to {result.task_id} ({attempts} attempt(s)): {result.judge_reason or 'no reason given'}; "
            "the answer was not judged and no reward was paid for it"
        )
