"""MirrorPop's mask and stats (pure torch; verl is not needed)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.training.mirrorpop import (
    DEFAULT_TAU,
    TAU_ENV_VAR,
    mirrorpop_mask,
    mirrorpop_stats,
    sequence_deviation,
    tau_from_env,
)

finite = st.floats(min_value=-20.0, max_value=0.0, allow_nan=False, width=32)


@st.composite
def batches(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = draw(st.integers(1, 5))
    length = draw(st.integers(1, 7))
    cells = n * length
    log_prob = torch.tensor(draw(st.lists(finite, min_size=cells, max_size=cells))).reshape(n, length)
    ref = torch.tensor(draw(st.lists(finite, min_size=cells, max_size=cells))).reshape(n, length)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=cells, max_size=cells))).reshape(n, length)
    return log_prob, ref, mask


@settings(max_examples=60, deadline=None)
@given(batches())
def test_deviation_is_the_mean_absolute_gap_over_counted_tokens(batch):
    log_prob, ref, mask = batch
    d = sequence_deviation(log_prob, ref, mask)
    for i in range(len(d)):
        gaps = [abs(float(a) - float(b)) for a, b, m in zip(log_prob[i], ref[i], mask[i], strict=True) if m]
        assert float(d[i]) == pytest.approx(sum(gaps) / len(gaps) if gaps else 0.0, abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.0, 5.0))
def test_the_mask_is_mirror_symmetric_and_ignores_uncounted_tokens(batch, tau):
    log_prob, ref, mask = batch
    keep = mirrorpop_mask(log_prob, ref, mask, tau)
    assert torch.equal(keep, mirrorpop_mask(ref, log_prob, mask, tau))
    assert torch.equal(keep, mirrorpop_mask(2 * ref - log_prob, ref, mask, tau))
    scrambled = torch.where(mask, log_prob, log_prob - 7.0)
    assert torch.equal(keep, mirrorpop_mask(scrambled, ref, mask, tau))


@settings(max_examples=60, deadline=None)
@given(batches(), st.floats(0.0, 5.0), st.floats(0.0, 5.0))
def test_a_larger_tau_keeps_more(batch, tau_a, tau_b):
    log_prob, ref, mask = batch
    low, high = sorted((tau_a, tau_b))
    kept_low = mirrorpop_mask(log_prob, ref, mask, low)
    kept_high = mirrorpop_mask(log_prob, ref, mask, high)
    assert torch.all(kept_high | ~kept_low)


def test_a_sequence_exactly_at_tau_is_kept_and_one_above_is_popped():
    log_prob = torch.zeros(2, 4)
    ref = torch.tensor([[0.25, -0.25, 0.25, -0.25], [0.5, 0.0, 0.0, 0.54]])
    assert mirrorpop_mask(log_prob, ref, torch.ones(2, 4), tau=0.25).tolist() == [True, False]


def test_stats_count_only_sequences_with_tokens():
    log_prob = torch.zeros(3, 2)
    ref = torch.tensor([[0.1, 0.1], [1.0, 1.0], [9.0, 9.0]])
    mask = torch.tensor([[1, 1], [1, 1], [0, 0]])
    keep, stats = mirrorpop_stats(log_prob, ref, mask, tau=0.5)
    assert keep.tolist() == [True, False, True]  # no tokens: nothing to pop
    assert (stats.sequences, stats.popped, stats.popped_fraction) == (2, 1, 0.5)
    assert stats.d_mean == pytest.approx((0.1 + 1.0) / 2) and stats.d_max == pytest.approx(1.0)
    assert stats.as_metrics("p/")["p/d_max"] == stats.d_max


def test_an_empty_batch_has_zero_stats():
    _, stats = mirrorpop_stats(torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3), tau=0.1)
    assert (stats.sequences, stats.popped_fraction, stats.d_max) == (0, 0.0, 0.0)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="same"):
        sequence_deviation(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="tau"):
        mirrorpop_mask(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), tau=-0.1)


def test_the_mask_has_no_gradient_path():
    log_prob = torch.zeros(1, 3, requires_grad=True)
    d = sequence_deviation(log_prob, torch.ones(1, 3), torch.ones(1, 3))
    assert not d.requires_grad


def test_tau_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(TAU_ENV_VAR, raising=False)
    assert tau_from_env() == DEFAULT_TAU
    monkeypatch.setenv(TAU_ENV_VAR, "0.35")
    assert tau_from_env() == 0.35
    for bad in ("abc", "-1", "nan"):
        monkeypatch.setenv(TAU_ENV_VAR, bad)
        with pytest.raises(ValueError, match=TAU_ENV_VAR):
            tau_from_env()
