"""Checking the per-call times a candidate reports against the judge's own measure (trusted side).

Holds:
    TimingAudit: what the judge credits, and whether it believed the candidate.
    audit_claims: compare reported per-call times with the judge's own measure of the same calls.

The candidate times each of its calls with device events (or the host clock)
in its own process, which it controls. The judge measures the same calls from
outside: the wall time from sending a call to its reply on a device, the CPU
time of the candidate's threads over it on a host, less the channel's round
trip and the harness's own per-call work (measured by the judge as probe
calls: the same request around a judge's module that only allocates the
outputs, made at random between the candidate's calls, in which nothing of the
candidate's runs). That bounds the call's true time from below, so a claim
clearly under it is not believed and the judge's figure is credited instead:
the credited time is never below the judge's figure less the noise of its
probes. "Clearly" is that noise, measured in the same stage (the spread of the
probes' figures), not a fixed allowance, and never the spread of the
candidate's own calls: an answer that pads some of its calls with work widens
that spread as it likes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernelgym.backends.base import median_and_iqr

__all__ = ["TimingAudit", "audit_claims"]


@dataclass(frozen=True)
class TimingAudit:
    """The outcome of an audit.

    Attributes:
        credited_ms: the per-call time the speedup uses.
        spread_ms: its interquartile range.
        wall_ms: the judge's own per-call estimate (its measure minus round trip and overhead).
        noise_ms: how far below ``wall_ms`` a claim may lie and still be believed (the probes' spread).
        rejected: the candidate's reported times lay below the judge's measure by more than its noise.
        sentence: the measurement, for the feedback (empty when believed).
    """

    credited_ms: float
    spread_ms: float
    wall_ms: float
    noise_ms: float
    rejected: bool
    sentence: str = ""


def audit_claims(reported_ms: Sequence[float], own_ms: Sequence[float], probe_ms: Sequence[float]) -> TimingAudit:
    """Credit the reported median unless the judge's own measure says the calls took longer, beyond its probes' noise.

    Args:
        reported_ms: per-call times the candidate reported.
        own_ms: the judge's own measure of each of those calls, taken from outside (wall or CPU time of the request).
        probe_ms: the same measure of probe requests: calls made the same way in the candidate's process of a
            judge's module that only allocates the outputs (the channel and the harness around a forward).

    Example:
        >>> audit_claims([1.0, 1.0, 1.0], [1.22, 1.25, 1.2], [0.25, 0.26, 0.24]).rejected
        False
        >>> audit_claims([0.01, 0.01, 0.01], [5.3, 5.3, 5.3], [0.25, 0.25, 0.25]).credited_ms
        5.05
        >>> padded = [1.3, 1.3, 1.3, 9.3, 9.3]  # two calls in five padded with work: the calls' spread is 8 ms
        >>> audit_claims([0.5] * 5, padded, [0.25, 0.26, 0.24]).credited_ms
        1.05
    """
    probe, probe_spread = median_and_iqr(list(probe_ms))
    own = [max(w - probe, 0.0) for w in own_ms]
    wall_ms, wall_spread = median_and_iqr(own)
    claimed, claimed_spread = median_and_iqr(list(reported_ms))
    noise = probe_spread
    valid = bool(reported_ms) and all(x == x and x >= 0.0 for x in reported_ms)  # NaN or negative claims are never believed
    if valid and claimed >= wall_ms - noise:
        return TimingAudit(claimed, claimed_spread, wall_ms, noise, False)
    sentence = (
        f"Timing: your process's own timer read {claimed:.4f} ms per call; measured from outside, the calls took "
        f"{wall_ms:.4f} ms (noise of that measure {noise:.4f} ms), so the outside measure is credited."
    )
    return TimingAudit(wall_ms, wall_spread, wall_ms, noise, True, sentence)
