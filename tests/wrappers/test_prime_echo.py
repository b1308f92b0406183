"""Tests of kernelgym.wrappers.prime_echo: properties of the reward and the wrapper on a fake env."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.wrappers.prime_echo import PrimeEcho, prime_echo_rewards

from .fakes import ScriptedKernelEnv, play

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
scores_st = st.lists(unit, min_size=1, max_size=8)
alpha_st = unit
gamma_st = st.floats(min_value=1e-3, max_value=1.0, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@given(scores=scores_st, alpha=alpha_st, gamma=gamma_st)
def test_returns_telescope_to_anchor_plus_discounted_best(scores, alpha, gamma):
    rewards = prime_echo_rewards(scores, alpha, gamma)
    best_last = max(gamma**k * s for k, s in enumerate(scores))
    expected = alpha * scores[0] + (1 - alpha) * best_last
    assert len(rewards.step_rewards) == len(scores)
    assert close(sum(rewards.step_rewards), expected)
    assert close(rewards.trajectory_reward, expected)
    assert close(rewards.best[-1], best_last)


@given(scores=scores_st, alpha=alpha_st, gamma=gamma_st)
def test_first_step_pays_the_first_score_and_later_steps_never_punish(scores, alpha, gamma):
    rewards = prime_echo_rewards(scores, alpha, gamma)
    assert rewards.step_rewards[0] == scores[0]
    assert all(r >= 0.0 for r in rewards.step_rewards[1:])


@given(scores=scores_st, gamma=gamma_st)
def test_alpha_one_counts_only_the_first_attempt(scores, gamma):
    rewards = prime_echo_rewards(scores, alpha=1.0, gamma=gamma)
    assert rewards.trajectory_reward == scores[0]
    assert all(r == 0.0 for r in rewards.step_rewards[1:])


@given(scores=scores_st)
def test_alpha_zero_gamma_one_is_best_of_turns(scores):
    assert close(prime_echo_rewards(scores, alpha=0.0, gamma=1.0).trajectory_reward, max(scores))


@given(data=st.data(), solved=unit, alpha=alpha_st, gamma=gamma_st)
def test_solving_at_turn_one_is_never_worth_less_than_later(data, solved, alpha, gamma):
    before = data.draw(st.lists(st.floats(min_value=0.0, max_value=solved), max_size=7), label="failed turns")
    early = prime_echo_rewards([solved, *before], alpha, gamma).trajectory_reward
    late = prime_echo_rewards([*before, solved], alpha, gamma).trajectory_reward
    assert early >= late - 1e-12


def test_no_turns_give_no_reward():
    rewards = prime_echo_rewards([], 0.5, 0.9)
    assert (rewards.step_rewards, rewards.best, rewards.trajectory_reward) == ((), (), 0.0)


@pytest.mark.parametrize(("alpha", "gamma"), [(-0.1, 0.9), (1.5, 0.9), (0.5, 0.0), (0.5, 1.2)])
def test_out_of_range_parameters_are_rejected(alpha, gamma):
    with pytest.raises(ValueError):
        prime_echo_rewards([0.5], alpha, gamma)
    with pytest.raises(ValueError):
        PrimeEcho(ScriptedKernelEnv(), alpha=alpha, gamma=gamma)


@pytest.mark.parametrize("answers", [["compile_error a", "incorrect b", "ok c"], ["ok first"], ["incorrect x"] * 3])
def test_wrapper_pays_step_rewards_and_keeps_the_raw_score(answers):
    env = PrimeEcho(ScriptedKernelEnv(max_turns=3), alpha=0.3, gamma=0.8)
    _, _, steps = play(env, lambda obs, turn: answers[turn], seed=0)
    raw = [s.info["score"] for s in steps]
    expected = prime_echo_rewards(raw, alpha=0.3, gamma=0.8)
    assert [s.reward for s in steps] == pytest.approx(list(expected.step_rewards))
    assert [s.info["score"] for s in steps] == [s.info["result"]["score"] for s in steps]
    assert [s.info["prime_echo"]["best"] for s in steps] == pytest.approx(list(expected.best))
    assert steps[-1].info["prime_echo"]["trajectory_reward"] == pytest.approx(expected.trajectory_reward)


def test_wrapper_forgets_scores_at_reset():
    env = PrimeEcho(ScriptedKernelEnv(max_turns=2), alpha=0.5, gamma=0.9)
    play(env, lambda obs, turn: "ok good", seed=0)
    _, _, steps = play(env, lambda obs, turn: "incorrect worse")
    assert steps[0].info["prime_echo"]["best"] == steps[0].info["score"]
    assert steps[0].reward == steps[0].info["score"] > 0.0
