"""Checking the per-call times a candidate reports against the judge's own clock (trusted side).

Holds:
    TimingAudit: what the judge credits, and whether it believed the candidate.
    audit_claims: compare reported per-call times with the wall time the judge measured around each call.

The candidate times each of its calls with device events (or the host clock)
in its own process, which it controls. The judge times the same calls from
outside, as the wall time from sending a call to its synchronized reply. That
wall time minus the channel's round trip and the harness's per-call overhead
(both measured by the judge) bounds the true call time from above, so a
candidate that reports less than it could have taken is not believed: the
judge's own figure is credited instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from kernelgym.backends.base import median_and_iqr

__all__ = ["TimingAudit", "audit_claims", "BELIEF_RATIO", "ALLOWANCE_MS"]

BELIEF_RATIO = 2.0 / 3.0
"""A reported median below this fraction of the judge's median (minus the allowance) is not believed:
a lie that goes unnoticed gains at most 1.5x."""

ALLOWANCE_MS = 0.1
"""Slack per call (beyond the measured harness overhead) that the judge does not hold against a candidate."""


@dataclass(frozen=True)
class TimingAudit:
    """The outcome of an audit.

    Attributes:
        credited_ms: the per-call time the speedup uses.
        spread_ms: its interquartile range.
        wall_ms: the judge's own per-call estimate (wall minus round trip and overhead).
        rejected: the candidate's reported times disagreed with the judge's clock.
        sentence: why, for the feedback (empty when believed).
    """

    credited_ms: float
    spread_ms: float
    wall_ms: float
    rejected: bool
    sentence: str = ""


def audit_claims(reported_ms: Sequence[float], walls_ms: Sequence[float], roundtrip_ms: float, overhead_ms: float) -> TimingAudit:
    """Credit the reported median unless the judge's clock says the calls took clearly longer.

    Args:
        reported_ms: per-call times the candidate reported.
        walls_ms: wall time of each of those calls, measured by the judge around the request.
        roundtrip_ms: the channel's round trip (an empty request), measured by the judge.
        overhead_ms: per-call harness overhead outside the timed region (poisoning, flushing,
            synchronizing), measured by the judge on the reference's identical loop.

    Example:
        >>> audit_claims([1.0, 1.0, 1.0], [1.3, 1.3, 1.3], 0.2, 0.05).rejected
        False
        >>> audit_claims([0.01, 0.01, 0.01], [5.3, 5.3, 5.3], 0.2, 0.05).credited_ms
        5.05
    """
    own = [max(w - roundtrip_ms - overhead_ms, 0.0) for w in walls_ms]
    wall_ms, wall_spread = median_and_iqr(own)
    claimed, claimed_spread = median_and_iqr(list(reported_ms))
    valid = all(x == x and x >= 0.0 for x in reported_ms)  # NaN or negative claims are never believed
    # The harness's overhead and the round trip are measured on the judge's side, warm; the candidate's
    # call runs after the judge's checks have cooled its caches, and may cost as much again.
    if valid and claimed >= BELIEF_RATIO * wall_ms - ALLOWANCE_MS - overhead_ms - roundtrip_ms:
        return TimingAudit(claimed, claimed_spread, wall_ms, False)
    sentence = (
        f"Your process reported {statistics.median(reported_ms) if reported_ms else 0.0:.4f} ms per call, but the judge measured "
        f"{wall_ms:.4f} ms per call from outside; the judge's measurement is credited."
    )
    return TimingAudit(wall_ms, wall_spread, wall_ms, True, sentence)
