"""The bounded reward computed from an evaluation.

Holds:
    RewardSpec: weights that turn stage outcomes into a score in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelgym.verifier.result import Status

__all__ = ["RewardSpec"]


@dataclass(frozen=True)
class RewardSpec:
    """Weights that turn an evaluation into a score in ``[0, 1]``.

    The score is 0 for ``format_error`` and for ``illegal`` (a hack earns
    nothing, however fast). Otherwise::

        score = compile_weight * compiled
              + correct_weight * correct
              + speed_weight * correct * clip(log2(speedup) / log2(speedup_cap), 0, 1)
              + own_share_weight * correct * own_kernel_share

    With the defaults (0.1, 0.5, 0.4, cap 4) a kernel that builds earns 0.1, a
    correct one 0.6, a correct one at parity 0.6, twice as fast 0.8, four or
    more times as fast 1.0. The speed term needs a meaningful timing; under an
    interpreter it is 0. Weights must be non-negative and sum to at most 1, so
    the score is bounded by construction.

    ``own_share_weight`` (0 by default) rewards the share of the forward's device time
    spent in the answer's own kernels (``EvalResult.own_kernel_share``, the profiling
    reward against lazy optimization: :mod:`kernelgym.verifier.kernel_share`); where the
    share is not measured (a host, profiling off) that term is 0. To use it, take its
    weight from the others, e.g. ``RewardSpec(correct_weight=0.4, own_share_weight=0.1)``.

    Example:
        >>> RewardSpec().score(Status.OK, compiled=True, correct=True, speedup=2.0, timing_meaningful=True)
        0.8
    """

    compile_weight: float = 0.1
    correct_weight: float = 0.5
    speed_weight: float = 0.4
    speedup_cap: float = 4.0
    own_share_weight: float = 0.0

    def __post_init__(self) -> None:
        weights = (self.compile_weight, self.correct_weight, self.speed_weight, self.own_share_weight)
        if min(weights) < 0 or sum(weights) > 1 + 1e-9:
            raise ValueError("RewardSpec weights must be >= 0 and sum to at most 1")
        if self.speedup_cap <= 1:
            raise ValueError("RewardSpec.speedup_cap must be > 1")

    def score(
        self,
        status: Status,
        *,
        compiled: bool,
        correct: bool,
        speedup: float | None,
        timing_meaningful: bool,
        own_kernel_share: float | None = None,
    ) -> float:
        """Score one evaluation; see the class docstring for the formula."""
        if status in (Status.FORMAT_ERROR, Status.ILLEGAL):
            return 0.0
        total = self.compile_weight * compiled + self.correct_weight * correct
        if correct and timing_meaningful and speedup is not None and speedup > 0:
            gain = math.log2(speedup) / math.log2(self.speedup_cap)
            total += self.speed_weight * min(max(gain, 0.0), 1.0)
        if correct and own_kernel_share is not None:
            total += self.own_share_weight * min(max(own_kernel_share, 0.0), 1.0)
        return round(total, 6)
