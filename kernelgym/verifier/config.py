"""Settings of the verifier, passed whole to the workers.

Holds:
    StageTimeouts: wall-clock budget of each stage that runs candidate code.
    VerifierConfig: every knob of the judge, with documented defaults.
    WEIGHTS: the weights contracts (``redrawn``, ``fixed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelgym.verifier.reward import RewardSpec

__all__ = ["StageTimeouts", "VerifierConfig", "WEIGHTS"]

WEIGHTS = ("redrawn", "fixed")
"""The weights contracts: ``redrawn`` (one trial redraws every floating parameter and buffer; the default)
or ``fixed`` (KernelBench's: the weights are those set at construction, never changed)."""


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
            then by registration order among tensors of equal shape and dtype. ``redrawn`` (the default)
            also checks one trial with every floating parameter and buffer moved away from its initial
            value, so an answer must compute from its parameters in ``forward`` (one whose tensors could
            not all be placed is not redrawn, and is flagged ``weights-not-redrawn``); ``fixed`` is
            KernelBench's contract: the weights set at construction never change.
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

    def __post_init__(self) -> None:
        from kernelgym.verifier.presets import get_preset

        get_preset(self.rules)
        if self.weights not in WEIGHTS:
            raise ValueError(f"VerifierConfig.weights must be one of {', '.join(WEIGHTS)}, not {self.weights!r}")
        if self.trials < 3:
            raise ValueError("VerifierConfig.trials must be at least 3")
        if (self.runs is not None and self.runs < 1) or self.warmup < 0:
            raise ValueError("VerifierConfig.runs >= 1, warmup >= 0")
