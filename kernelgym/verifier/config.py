"""Settings of the verifier, passed whole to the workers.

Holds:
    StageTimeouts: wall-clock budget of each stage that runs candidate code.
    VerifierConfig: every knob of the judge, with documented defaults.
    WEIGHTS: the weights contracts (``redrawn``, ``fixed``, ``seeded``).
    CONTRACT_TIMINGS: how the speedup under KernelBench's contract is timed.
    SERVED_BOUNDS, check_bounds: the settings a judge serving untrusted clients accepts (``kernelgym serve``).
    config_from_dict: a config from JSON overrides (nested ``reward``, ``timeouts`` too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from kernelgym.errors import KernelGymError
from kernelgym.verifier.kernel_share import LAZY_SHARE
from kernelgym.verifier.reward import RewardSpec

__all__ = ["CONTRACT_TIMINGS", "SERVED_BOUNDS", "StageTimeouts", "VerifierConfig", "WEIGHTS", "check_bounds", "config_from_dict"]

WEIGHTS = ("redrawn", "fixed", "seeded")
"""The weights contracts: ``redrawn`` (one trial redraws every floating parameter and buffer; the default),
``fixed`` (the reference's weights copied into ``ModelNew`` at construction, never changed) or ``seeded``
(KernelBench's own: ``ModelNew`` keeps what its ``__init__`` made from the reference's seed; nothing is copied)."""

CONTRACT_TIMINGS = ("kernelgym", "kernelbench")
"""How the speedup under KernelBench's contract is timed (``VerifierConfig.contract_timing``)."""


@dataclass(frozen=True)
class StageTimeouts:
    """Seconds each worker stage may take before the candidate (or the worker) is killed.

    ``build`` covers starting the candidate's process and compiling native code
    (a cold C++ ``load_inline`` build takes ~30 s on 2 cores, more when several
    run at once). ``check`` and ``time`` are floors: once the judge has run the
    reference, each grows to ``per_reference_call`` times the reference's own
    cost of the calls the stage plans, up to ``ceiling``, so no honest kernel
    times out because its task is large.
    """

    build: float = 600.0
    check: float = 120.0
    time: float = 180.0
    per_reference_call: float = 30.0
    ceiling: float = 3600.0

    def scaled(self, floor: float, reference_seconds: float, calls: int) -> float:
        """The budget of a stage of ``calls`` calls whose reference call costs ``reference_seconds``."""
        return min(self.ceiling, max(floor, self.per_reference_call * reference_seconds * calls))


@dataclass(frozen=True)
class VerifierConfig:
    """How strictly and how long to judge.

    Attributes:
        trials: correctness trials, each with fresh random inputs (fresh seeds).
        atol: absolute tolerance for fp32 outputs (task override wins).
        rtol: relative tolerance for fp32 outputs (task override wins).
        low_precision_tol: atol = rtol for fp16/bf16 outputs.
        check_variants: also run the task's extra input shapes.
        timing: run the timing stage at all.
        warmup: untimed calls before timing.
        runs: timed calls, median and interquartile range reported (``None``: as many as fit in
            ``timing_seconds`` of the reference's calls, at most the backend's default, 20 on a CPU and
            100 on a GPU (KernelBench's count), and never fewer than 20; ``runs=100`` times every task
            as KernelBench does).
        timing_seconds: about what the timed calls of each program should take, when ``runs`` is ``None``:
            a GPU task whose reference call costs 1 ms or less gets 100 calls, a 4 ms one 25, a 5 ms or
            longer one 20.
        compile_baseline: also time ``torch.compile(Model)`` (slow to compile on a CPU).
        faster_threshold: ``faster`` means ``speedup_eager > faster_threshold``.
        roofline_bandwidth_gbs: peak memory bandwidth used for the excessive-speedup
            check (``None``: the backend's default).
        seed: base seed; ``None`` draws a fresh one per evaluation so trial inputs
            cannot be predicted.
        reward: how the score is computed.
        timeouts: per-stage wall-clock budgets.
        memory_limit_gb: address-space limit of a worker process.
        rules: the rule preset, ``native`` (no PyTorch/ATen compute; the default) or ``kernelbench``
            (PyTorch operators allowed in ``ModelNew``; every hack defense on): :mod:`kernelgym.verifier.presets`.
        weights: the weights contract. The reference's parameters and buffers reach ``ModelNew`` by name,
            then by shape and role among tensors of equal shape and dtype. ``redrawn`` (the default)
            also checks one trial with every floating parameter and buffer moved away from its initial
            value, so an answer must compute from its parameters in ``forward`` (one with no place for
            some is ``incorrect``, ``weights-unplaced``, unless it names them in ``constant_weights``: then
            they are not redrawn, and it is flagged ``weights-not-redrawn`` and scored lower); ``fixed``: the
            weights copied in at construction never change; ``seeded`` is KernelBench's own contract: nothing is
            copied, ``ModelNew`` keeps the weights its ``__init__`` made after the reference's seed was set (as
            KernelBench builds both), so an answer that transforms its weights in ``__init__`` is checked as
            KernelBench checks it, and one whose ``__init__`` draws them in another order is wrong there too. The
            verdict under KernelBench's contract uses ``seeded``.
        profile_calls: on a device, watched untimed calls of a timed answer's ``forward`` profiled for the share of
            their device time in the answer's own kernels (``EvalResult.own_kernel_share``; 0 turns it off):
            :mod:`kernelgym.verifier.kernel_share`.
        lazy_share: an answer whose own kernels ran less than this share is flagged ``lazy-optimization``.
        kernelbench_contract: under the ``kernelbench`` preset, also give the verdict under KernelBench's own
            contract where the strict one rests on a check KernelBench does not make (``EvalResult.kernelbench_status``):
            an answer the strict verdict rejects that way is checked (and timed) again, or, rejected by a static rule
            of :data:`~kernelgym.verifier.presets.CONTRACT_WAIVED`, judged by a worker without them. ``False`` saves
            that judging (an RL loop that rewards the strict verdict only).
        contract_timing: how that verdict's speedup is timed: ``kernelgym`` (the strict verdict's timing of the
            device's work, in the contract's mode; repeatable to 1.75% on CUDA-L1's answers across two hosts) or
            ``kernelbench`` (KernelBench's own procedure, host time included, each program in a fresh process:
            :mod:`kernelgym.verifier.kernelbench_timing`; on a host, its ``host_time`` method). Measured on one H200
            (``benchmarks/results/real-answers.md``, hold 10), the latter's figures differed from themselves by 16.5%
            (median) between two runs and from KernelBench's by 8-12%: like KernelBench's own, they move with what
            else the host runs.
    """

    trials: int = 3
    atol: float = 1e-4
    rtol: float = 1e-4
    low_precision_tol: float = 1e-2
    check_variants: bool = True
    timing: bool = True
    warmup: int = 3
    runs: int | None = None
    timing_seconds: float = 0.1
    compile_baseline: bool = False
    faster_threshold: float = 1.1
    roofline_bandwidth_gbs: float | None = None
    seed: int | None = None
    reward: RewardSpec = field(default_factory=RewardSpec)
    timeouts: StageTimeouts = field(default_factory=StageTimeouts)
    memory_limit_gb: float = 16.0
    rules: str = "native"
    weights: str = "redrawn"
    profile_calls: int = 3
    lazy_share: float = LAZY_SHARE
    kernelbench_contract: bool = True
    contract_timing: str = "kernelgym"

    def __post_init__(self) -> None:
        from kernelgym.verifier.presets import get_preset

        get_preset(self.rules)
        if self.weights not in WEIGHTS:
            raise ValueError(f"VerifierConfig.weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}")
        if self.contract_timing not in CONTRACT_TIMINGS:
            raise ValueError(f"VerifierConfig.contract_timing must be one of {', '.join(CONTRACT_TIMINGS)}, not {self.contract_timing!r}")
        if self.trials < 3:
            raise ValueError("VerifierConfig.trials must be at least 3")
        if (self.runs is not None and self.runs < 1) or self.warmup < 0:
            raise ValueError("VerifierConfig.runs >= 1, warmup >= 0")
        if self.profile_calls < 0 or not 0.0 <= self.lazy_share <= 1.0:
            raise ValueError("VerifierConfig.profile_calls >= 0, 0 <= lazy_share <= 1")


_DEFAULTS = VerifierConfig()

SERVED_BOUNDS: dict[str, tuple[float, float]] = {
    "trials": (3, 20),
    "warmup": (0, 100),
    "runs": (1, 1000),
    "timing_seconds": (0.0, 10.0),
    "faster_threshold": (1.0, 100.0),
    "memory_limit_gb": (0.5, 64.0),
    # Tolerances: a request may tighten them, never loosen them beyond the defaults (the ``kernelbench``
    # preset's floor, KernelBench's 1e-4 for fp32, is the judge's own and applies whatever a request asks).
    "atol": (0.0, _DEFAULTS.atol),
    "rtol": (0.0, _DEFAULTS.rtol),
    "low_precision_tol": (0.0, _DEFAULTS.low_precision_tol),
    "timeouts.build": (1.0, 1800.0),
    "timeouts.check": (1.0, 600.0),
    "timeouts.time": (1.0, 600.0),
    "timeouts.per_reference_call": (1.0, 100.0),
    "timeouts.ceiling": (1.0, 3600.0),
    "reward.compile_weight": (0.0, 1.0),
    "reward.correct_weight": (0.0, 1.0),
    "reward.speed_weight": (0.0, 1.0),
    "reward.speedup_cap": (1.0, 1000.0),
    "reward.own_share_weight": (0.0, 1.0),
    "profile_calls": (0, 20),
    "lazy_share": (0.0, 1.0),
}
"""The range (inclusive) of every numeric setting a judge serving untrusted clients accepts (:func:`check_bounds`)."""

_INTEGERS = frozenset({"trials", "warmup", "runs", "profile_calls"})
_SERVED_FIXED = {
    "check_variants": (True, "a served judge always checks the task's extra shapes"),
    "roofline_bandwidth_gbs": (None, "a served judge uses its own device's peak bandwidth"),
    # A seed the client chose would tell its answer the trial inputs (a table of outputs would pass).
    "seed": (None, "a served judge draws its own seeds, which the answer cannot know"),
}


def check_bounds(config: VerifierConfig) -> None:
    """Refuse settings that a judge serving untrusted clients must not take: a request may tighten the judge, never
    loosen it (tolerances above the defaults, variants off, a roofline of its choosing) or hold its workers for long
    (counts and budgets beyond :data:`SERVED_BOUNDS`) or know its trial inputs (a ``seed``). ``None`` ``runs`` keeps
    its meaning.

    Raises:
        ValueError: one line naming the first setting out of bounds and its bound.

    Example:
        >>> check_bounds(VerifierConfig(atol=1e-5, runs=100))
        >>> check_bounds(VerifierConfig(atol=1e30))
        Traceback (most recent call last):
        ...
        ValueError: atol is 1e+30; a served judge takes it from 0 to 0.0001
    """
    for name, (required, why) in _SERVED_FIXED.items():
        if getattr(config, name) is not required:
            raise ValueError(f"{name} must be {'true' if required is True else 'null'}: {why}")
    for booleans in ("timing", "compile_baseline", "kernelbench_contract"):
        if not isinstance(getattr(config, booleans), bool):
            raise ValueError(f"{booleans} must be true or false")
    for name, (low, high) in SERVED_BOUNDS.items():
        owner, _, leaf = name.rpartition(".")
        value = getattr(getattr(config, owner) if owner else config, leaf)
        if value is None and name == "runs":
            continue
        kinds = (int,) if name in _INTEGERS else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ValueError(f"{name} must be {'an integer' if name in _INTEGERS else 'a number'}, not {value!r}")
        if not low <= value <= high:  # also refuses NaN
            raise ValueError(f"{name} is {value:g}; a served judge takes it from {low:g} to {high:g}")


def config_from_dict(overrides: Mapping[str, Any], base: VerifierConfig | None = None) -> VerifierConfig:
    """``base`` (default settings if ``None``) with ``overrides`` applied; nested settings may be partial dicts.

    Raises:
        ValueError: an unknown setting, or a value the config refuses (the message names it).

    Example:
        >>> config = config_from_dict({"rules": "kernelbench", "timeouts": {"build": 60}})
        >>> config.rules, config.timeouts.build, config.timeouts.check
        ('kernelbench', 60, 120.0)
    """
    base = base or VerifierConfig()
    known = {f.name for f in fields(VerifierConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown config setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {}
    for name, value in overrides.items():
        try:  # one setting at a time, so that the reason names it
            current = getattr(base, name)
            values[name] = replace(current, **value) if is_dataclass(current) and isinstance(value, Mapping) else value
            replace(base, **{name: values[name]})
        except (TypeError, ValueError, KernelGymError) as exc:
            raise ValueError(f"bad config setting {name}: {exc}") from None
    return replace(base, **values)  # each setting is checked on its own (no check of the config spans two)
