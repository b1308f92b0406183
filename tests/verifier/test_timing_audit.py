"""Tests of kernelgym.verifier.timing_audit: reported per-call times checked against the judge's own measure."""

from __future__ import annotations

import pytest

from kernelgym.verifier.timing_audit import audit_claims

PROBES = [0.30, 0.31, 0.29, 0.30, 0.30]


def test_honest_claims_are_credited_as_reported():
    audit = audit_claims([2.0, 2.1, 1.9, 2.0], [2.3, 2.4, 2.2, 2.3], PROBES)
    assert not audit.rejected and audit.sentence == ""
    assert audit.credited_ms == pytest.approx(2.0, abs=0.05)


def test_a_fake_clock_is_replaced_by_the_judges_measurement():
    audit = audit_claims([0.001] * 6, [10.3] * 6, PROBES)
    assert audit.rejected
    assert audit.credited_ms == pytest.approx(10.0)
    assert "measured from outside" in audit.sentence and "10.0000 ms" in audit.sentence


def test_a_claim_below_the_measure_by_more_than_its_noise_is_not_believed():
    # Steady probes: noise about 0.01 ms, so a claim 0.2 ms under the measure is not believed.
    assert audit_claims([1.8] * 5, [2.3, 2.3, 2.31, 2.29, 2.3], PROBES).rejected
    # A claim within the probes' noise of the measure is believed.
    assert not audit_claims([1.995] * 5, [2.3, 2.3, 2.31, 2.29, 2.3], PROBES).rejected


def test_padded_calls_do_not_widen_the_noise():
    """Calls the candidate pads with work spread the judge's measures of its calls, never the allowance:
    a fake clock's claims stay refused, and the judge's median of the calls is credited."""
    padded = [2.3, 2.3, 2.3, 12.3, 12.3, 2.3, 12.3, 2.3]
    audit = audit_claims([0.1] * 8, padded, PROBES)
    assert audit.rejected and audit.noise_ms == pytest.approx(0.01)
    assert audit.credited_ms == pytest.approx(2.0)


def test_noise_is_the_measured_spread_of_the_probes():
    audit = audit_claims([1.0] * 5, [1.3, 1.35, 1.4, 1.45, 1.5], [0.2, 0.25, 0.3, 0.35, 0.4])
    assert audit.noise_ms == pytest.approx(0.15)  # the probes' interquartile range, not the calls'
    assert audit.wall_ms == pytest.approx(1.1)


@pytest.mark.parametrize("bad", [float("nan"), -1.0])
def test_nan_or_negative_claims_are_never_believed(bad):
    assert audit_claims([1.0, bad, 1.0], [1.4, 1.4, 1.4], PROBES).rejected


def test_a_probe_holds_memory_as_a_call_does(tmp_path):
    """A probe frees the last call's outputs and keeps its own, as a call does: the next call then poisons as much
    free memory after a probe as after a call (the audit subtracts one from the other)."""
    import torch

    from kernelgym.backends import get_backend
    from kernelgym.verifier.candidate_side import CandidateSide

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    side = CandidateSide(get_backend("cpp"), tmp_path, tmp_path)
    side.model = Double()
    side.inputs, side.outputs = [torch.ones(8)], [torch.zeros(8)]
    assert side.cmd_call(False, False)["ok"]
    called = side.kept[0]
    assert side.cmd_probe(False, False)["ok"]
    assert len(side.kept) == 1 and side.kept[0] is not called and side.kept[0].shape == called.shape


def test_timed_calls_fill_the_budget_between_twenty_and_the_backends_count():
    from kernelgym.verifier.config import VerifierConfig
    from kernelgym.verifier.timing_stage import MIN_RUNS, timed_calls

    budget = VerifierConfig().timing_seconds
    # A GPU (100 calls at most): a short kernel gets KernelBench's count, longer ones what fits, never under 20.
    assert timed_calls(100, budget, 0.0005) == 100
    assert timed_calls(100, budget, 0.004) == int(budget / 0.004)
    assert timed_calls(100, budget, 0.5) == MIN_RUNS == 20
    # A CPU (20 at most) always times its 20; a backend whose count is below the floor keeps its own.
    assert timed_calls(20, budget, 0.00002) == timed_calls(20, budget, 2.0) == 20
    assert timed_calls(8, budget, 2.0) == 8
