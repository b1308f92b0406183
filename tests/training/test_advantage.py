"""TRLOO's turn-level advantages against a small case worked out by hand (no verl needed)."""

from __future__ import annotations

import pytest
import torch

from kernelgym.training.advantage import (
    check_estimator,
    returns_to_go,
    trloo_advantages,
    trloo_turn_advantages,
    turn_index,
)

# Group "p": a ends after 2 turns, b solves at turn 1, c plays 3 turns. Group "q" has one trajectory.
REWARDS = [[0.1, 0.5], [0.6], [0.0, 0.1, 0.3], [0.2, 0.4]]
GROUPS = ["p", "p", "p", "q"]
# Returns to go (gamma 1): a [0.6, 0.5], b [0.6], c [0.4, 0.4, 0.3], d [0.6, 0.4].
# Turn 1 of p: every trajectory; a: 0.6 - (0.6 + 0.4) / 2 = 0.1, b: the same, c: 0.4 - (0.6 + 0.6) / 2 = -0.2.
# Turn 2 of p: b has ended, so a and c only; a: 0.5 - 0.4 = 0.1, c: 0.4 - 0.5 = -0.1.
# Turn 3 of p: c alone, no baseline: 0.3. Group q: d alone at every turn: its returns, 0.6 and 0.4.
EXPECTED = [[0.1, 0.1], [0.1], [-0.2, -0.1, 0.3], [0.6, 0.4]]


def test_turn_advantages_match_the_hand_computed_case():
    advantages = trloo_turn_advantages(REWARDS, GROUPS)
    assert [len(row) for row in advantages] == [2, 1, 3, 2]
    for row, expected in zip(advantages, EXPECTED, strict=True):
        assert row == pytest.approx(expected)


def test_a_trajectory_is_left_out_of_its_own_baseline():
    # Raising a's first-turn reward moves the others' turn-1 advantages, never a's own baseline.
    raised = [[1.1, 0.5], *REWARDS[1:]]
    before, after = trloo_turn_advantages(REWARDS, GROUPS), trloo_turn_advantages(raised, GROUPS)
    assert after[0][0] - before[0][0] == pytest.approx(1.0)
    assert after[1][0] - before[1][0] == pytest.approx(-0.5) and after[2][0] - before[2][0] == pytest.approx(-0.5)
    assert after[0][1] == pytest.approx(before[0][1])  # later turns' returns do not see earlier rewards


def test_discounted_returns():
    assert returns_to_go([0.0, 0.1, 0.3], gamma=0.5) == pytest.approx([0.125, 0.25, 0.3])
    # c's returns with gamma 0.5 are [0.125, 0.25, 0.3]; a's [0.35, 0.5]; b's [0.6]
    advantages = trloo_turn_advantages(REWARDS, GROUPS, gamma=0.5)
    assert advantages[2] == pytest.approx([0.125 - (0.35 + 0.6) / 2, 0.25 - 0.5, 0.3])


def test_token_advantages_follow_the_turns_of_the_mask():
    mask = torch.tensor(
        [
            [1, 1, 0, 0, 1, 0, 0],  # a: answer, feedback, repair, padding
            [1, 1, 1, 0, 0, 0, 0],  # b: one answer
            [1, 0, 1, 1, 0, 1, 0],  # c: three answers
            [1, 0, 1, 0, 0, 0, 0],  # d
        ]
    )
    assert turn_index(mask)[2].tolist() == [0, -1, 1, 1, -1, 2, -1]
    advantages = trloo_advantages(REWARDS, mask, GROUPS)
    expected = torch.tensor(
        [
            [0.1, 0.1, 0.0, 0.0, 0.1, 0.0, 0.0],
            [0.1, 0.1, 0.1, 0.0, 0.0, 0.0, 0.0],
            [-0.2, 0.0, -0.1, -0.1, 0.0, 0.3, 0.0],
            [0.6, 0.0, 0.4, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert torch.all(advantages[mask == 0] == 0)


def test_a_mask_that_disagrees_with_the_rewards_is_refused():
    with pytest.raises(ValueError, match="2 turns but it has 1 rewards"):
        trloo_advantages([[0.5]], torch.tensor([[1, 0, 1]]), ["p"])


def test_unknown_estimator_is_refused():
    assert check_estimator("trloo") == "trloo"
    with pytest.raises(ValueError, match="grpo, trloo"):
        check_estimator("ppo")
