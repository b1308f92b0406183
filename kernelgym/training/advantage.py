"""Turn-level advantages for multi-turn episodes: TRLOO, beside GRPO's per-trajectory advantage.

Holds:
    ADVANTAGE_ESTIMATORS: the estimators a trainer config may name (``"grpo"``, ``"trloo"``).
    check_estimator: refuse an unknown estimator name with a sentence that lists the known ones.
    returns_to_go: a trajectory's return from each of its turns on.
    trloo_turn_advantages: TRLOO's advantage of every turn of every trajectory, as plain numbers.
    turn_index: the turn each response token belongs to (runs of 1 in the response mask).
    trloo_advantages: TRLOO's advantages as a token-level tensor in verl's layout.

GRPO gives every token of trajectory ``i`` the same advantage, its trajectory reward against the
group's mean (and std), a mean that includes ``i`` itself; in a multi-turn episode that also pays
a repair turn for what the first turn earned. TRLOO (Turn-level REINFORCE Leave-One-Out, from
Dr.Kernel) scores each turn by what followed it, against the trajectories of the same group that
reached the same turn, leaving the trajectory itself out:

    G[i, t] = sum over k = t .. T_i of gamma**(k - t) * r[i, k]     (the return from turn t)
    N_t     = the trajectories j of the group with T_j >= t          (those that reached turn t)
    A[i, t] = G[i, t] - mean of G[j, t] over j in N_t, j != i        (if |N_t| >= 2)
    A[i, t] = G[i, t]                                                (if i is alone at turn t)

A trajectory that ended before turn ``t`` (it solved the task, ran out of turns or of response
length) has no tokens at turn ``t`` and takes no part in that turn's baselines. Every token of turn
``t`` gets ``A[i, t]``; feedback and padding tokens get 0. Nothing is divided by a std.

Example:
    >>> [[round(a, 3) for a in turns] for turns in trloo_turn_advantages([[0.1, 0.5], [0.6]], ["p", "p"])]
    [[0.0, 0.5], [0.0]]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "check_estimator",
    "returns_to_go",
    "trloo_advantages",
    "trloo_turn_advantages",
    "turn_index",
]

ADVANTAGE_ESTIMATORS = ("grpo", "trloo")


def check_estimator(name: str) -> str:
    """``name`` if it is one of :data:`ADVANTAGE_ESTIMATORS`; otherwise ``ValueError`` naming them."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {name!r}; choose one of {', '.join(ADVANTAGE_ESTIMATORS)}")
    return name


def returns_to_go(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """``G_t = r_t + gamma * G_{t+1}`` for every turn ``t`` of one trajectory.

    Example:
        >>> returns_to_go([0.0, 0.1, 0.3], gamma=0.5)
        [0.125, 0.25, 0.3]
    """
    returns: list[float] = []
    following = 0.0
    for reward in reversed(rewards):
        following = float(reward) + gamma * following
        returns.append(following)
    return returns[::-1]


def trloo_turn_advantages(
    turn_rewards: Sequence[Sequence[float]], groups: Sequence[Hashable], gamma: float = 1.0
) -> list[list[float]]:
    """TRLOO's advantage ``A[i][t]`` of every turn of every trajectory (see the module docstring).

    Args:
        turn_rewards: per trajectory, the reward of each of its turns, in turn order (trajectories may
            have different numbers of turns; PrimeEcho's step rewards are such rewards).
        groups: per trajectory, the group it belongs to (trajectories sampled for the same prompt).
        gamma: discount of later turns' rewards in a turn's return.

    Returns:
        Per trajectory, one advantage per turn.

    Raises:
        ValueError: ``turn_rewards`` and ``groups`` differ in length.
    """
    if len(turn_rewards) != len(groups):
        raise ValueError(f"{len(turn_rewards)} trajectories but {len(groups)} group labels")
    returns = [returns_to_go(rewards, gamma) for rewards in turn_rewards]
    # the sum and count of the returns of each (group, turn), to take one trajectory out of in O(1)
    totals: dict[tuple[Hashable, int], float] = defaultdict(float)
    counts: dict[tuple[Hashable, int], int] = defaultdict(int)
    for group, trajectory in zip(groups, returns, strict=True):
        for turn, value in enumerate(trajectory):
            totals[group, turn] += value
            counts[group, turn] += 1
    advantages: list[list[float]] = []
    for group, trajectory in zip(groups, returns, strict=True):
        row = []
        for turn, value in enumerate(trajectory):
            others = counts[group, turn] - 1
            baseline = (totals[group, turn] - value) / others if others else 0.0
            row.append(value - baseline)
        advantages.append(row)
    return advantages


def turn_index(response_mask: torch.Tensor) -> torch.Tensor:
    """The turn (0, 1, ...) of every model token of ``response_mask[B, L]``; -1 for feedback and padding.

    A turn is a run of 1s: in a multi-turn response the model's turns are separated by feedback
    turns, whose tokens are masked 0 (as the ``kernelgym`` agent loop writes them).

    Example:
        >>> turn_index(torch.tensor([[1, 1, 0, 0, 1, 0]])).tolist()
        [[0, 0, -1, -1, 1, -1]]
    """
    mask = response_mask.bool()
    previous = torch.zeros_like(mask)
    previous[:, 1:] = mask[:, :-1]
    starts = mask & ~previous
    return torch.where(mask, starts.long().cumsum(dim=1) - 1, torch.full_like(mask, -1, dtype=torch.long))


def trloo_advantages(
    turn_rewards: Sequence[Sequence[float]],
    response_mask: torch.Tensor,
    groups: Sequence[Hashable],
    gamma: float = 1.0,
) -> torch.Tensor:
    """TRLOO's token-level advantages ``[B, L]``: each model token gets the advantage of its turn.

    Args:
        turn_rewards: per trajectory (row of ``response_mask``), the reward of each turn it played.
        response_mask: ``[B, L]``, 1 for the model's tokens, 0 for feedback and padding.
        groups: per trajectory, its group (verl's ``uid`` / ``index``).
        gamma: discount of later turns' rewards in a turn's return.

    Returns:
        A float tensor shaped like ``response_mask``, 0 outside the model's tokens.

    Raises:
        ValueError: a row's mask has a different number of turns than its rewards.

    Example:
        >>> mask = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0]])
        >>> advantages = trloo_advantages([[0.0, 0.5], [0.3]], mask, ["p", "p"])
        >>> [[round(a, 3) for a in row] for row in advantages.tolist()]
        [[0.2, 0.0, 0.5, 0.5], [-0.2, -0.2, 0.0, 0.0]]
    """
    turns = turn_index(response_mask)
    played = (turns.max(dim=1).values + 1).tolist()
    for row, (count, rewards) in enumerate(zip(played, turn_rewards, strict=True)):
        if count != len(rewards):
            raise ValueError(
                f"trajectory {row}: its response mask holds {count} turns but it has {len(rewards)} rewards"
            )
    per_turn = trloo_turn_advantages(turn_rewards, groups, gamma)
    width = max((len(row) for row in per_turn), default=0)
    # one extra column (0.0) that feedback and padding tokens (turn -1) read
    table = torch.zeros(len(per_turn), width + 1)
    for row, values in enumerate(per_turn):
        table[row, : len(values)] = torch.tensor(values)
    return table.gather(1, torch.where(turns < 0, width, turns))
