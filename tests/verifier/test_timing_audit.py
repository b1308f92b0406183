"""Tests of kernelgym.verifier.timing_audit: reported per-call times checked against the judge's clock."""

from __future__ import annotations

import pytest

from kernelgym.verifier.timing_audit import ALLOWANCE_MS, BELIEF_RATIO, audit_claims


def test_honest_claims_are_credited_as_reported():
    audit = audit_claims([2.0, 2.1, 1.9, 2.0], [2.6, 2.7, 2.5, 2.6], roundtrip_ms=0.3, overhead_ms=0.2)
    assert not audit.rejected and audit.sentence == ""
    assert audit.credited_ms == pytest.approx(2.0, abs=0.05)


def test_a_fake_clock_is_replaced_by_the_judges_measurement():
    audit = audit_claims([0.001] * 6, [10.5] * 6, roundtrip_ms=0.3, overhead_ms=0.2)
    assert audit.rejected
    assert audit.credited_ms == pytest.approx(10.0)
    assert "judge measured" in audit.sentence


def test_halving_the_claim_is_caught_but_a_noisy_small_kernel_is_not():
    assert audit_claims([5.0] * 5, [10.5] * 5, roundtrip_ms=0.3, overhead_ms=0.2).rejected
    assert not audit_claims([7.0] * 5, [10.5] * 5, roundtrip_ms=0.3, overhead_ms=0.2).rejected
    # A 10 us kernel whose harness costs more than the kernel itself stays believed.
    assert not audit_claims([0.01] * 5, [0.6] * 5, roundtrip_ms=0.3, overhead_ms=0.2).rejected


@pytest.mark.parametrize("bad", [float("nan"), -1.0])
def test_nan_or_negative_claims_are_never_believed(bad):
    assert audit_claims([1.0, bad, 1.0], [1.4, 1.4, 1.4], roundtrip_ms=0.2, overhead_ms=0.1).rejected


def test_the_belief_rule_uses_its_documented_constants():
    wall = 4.0
    edge = BELIEF_RATIO * wall - ALLOWANCE_MS - 0.5 - 0.5
    assert not audit_claims([edge + 1e-6] * 3, [wall + 0.5 + 0.5] * 3, roundtrip_ms=0.5, overhead_ms=0.5).rejected
    assert audit_claims([edge - 1e-3] * 3, [wall + 0.5 + 0.5] * 3, roundtrip_ms=0.5, overhead_ms=0.5).rejected
