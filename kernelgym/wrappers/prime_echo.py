"""PrimeEcho: a first-turn-anchored multi-turn reward.

Holds:
    PrimeEchoRewards: the per-turn rewards and the trajectory reward of one episode.
    prime_echo_rewards: the pure function that computes them from the per-turn scores.
    PrimeEcho: a wrapper that pays the PrimeEcho step rewards instead of the raw scores.

With per-turn scores ``s_1 .. s_T``, anchor weight ``alpha`` and discount ``gamma``,
``B_t = max_{k <= t} gamma**(k - 1) * s_k``; the step rewards are ``r_1 = s_1`` and
``r_t = (1 - alpha) * (B_t - B_{t-1})``, so the return telescopes to
``alpha * s_1 + (1 - alpha) * B_T``: the first attempt is always paid in full, later
repairs only for improvement, discounted by how late they came.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym

__all__ = ["PrimeEcho", "PrimeEchoRewards", "prime_echo_rewards"]


@dataclass(frozen=True)
class PrimeEchoRewards:
    """PrimeEcho rewards of one (possibly unfinished) episode.

    Attributes:
        step_rewards: ``r_1 .. r_T``, one per turn.
        best: the running discounted best ``B_1 .. B_T``.
        trajectory_reward: ``alpha * s_1 + (1 - alpha) * B_T`` (0.0 for no turns); equals ``sum(step_rewards)``.
    """

    step_rewards: tuple[float, ...]
    best: tuple[float, ...]
    trajectory_reward: float


def prime_echo_rewards(scores: Sequence[float], alpha: float = 0.5, gamma: float = 0.9) -> PrimeEchoRewards:
    """Compute the PrimeEcho step rewards and trajectory reward from per-turn scores.

    Trainers that score whole trajectories (GRPO-style) use ``trajectory_reward``;
    step-wise learners use ``step_rewards``.

    Args:
        scores: the verifier score of each turn, in turn order.
        alpha: anchor weight of the first attempt, in ``[0, 1]``.
        gamma: discount per turn of later improvements, in ``(0, 1]``.

    Returns:
        The step rewards, the running best and the trajectory reward.

    Raises:
        ValueError: ``alpha`` or ``gamma`` is out of range.

    Example:
        >>> r = prime_echo_rewards([0.1, 0.6], alpha=0.5, gamma=0.9)
        >>> [round(x, 3) for x in r.step_rewards], round(r.trajectory_reward, 3)
        ([0.1, 0.22], 0.32)
    """
    _check_parameters(alpha, gamma)
    step_rewards: list[float] = []
    best: list[float] = []
    for turn, score in enumerate(scores):
        echoed = gamma**turn * float(score)
        if turn == 0:
            best.append(echoed)
            step_rewards.append(float(score))
        else:
            best.append(max(best[-1], echoed))
            step_rewards.append((1.0 - alpha) * (best[-1] - best[-2]))
    trajectory = alpha * float(scores[0]) + (1.0 - alpha) * best[-1] if best else 0.0
    return PrimeEchoRewards(tuple(step_rewards), tuple(best), trajectory)


def _check_parameters(alpha: float, gamma: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"PrimeEcho alpha must be in [0, 1], got {alpha}")
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"PrimeEcho gamma must be in (0, 1], got {gamma}")


class PrimeEcho(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Pay PrimeEcho step rewards computed from the inner env's per-turn scores.

    The inner env's raw score is read from ``info["score"]`` and left there;
    ``info["prime_echo"]`` holds ``best`` (``B_t``) and ``trajectory_reward``
    (the return so far, ``alpha * s_1 + (1 - alpha) * B_t``).

    Args:
        env: an env whose ``info`` carries ``"score"`` after each step (e.g. ``KernelEnv``).
        alpha: anchor weight of the first attempt, in ``[0, 1]``; 1 pays the first attempt only.
        gamma: discount per turn of later improvements, in ``(0, 1]``.

    Example:
        >>> import gymnasium as gym, kernelgym
        >>> env = PrimeEcho(gym.make("kernelgym/CPU-v0", max_turns=2), alpha=0.5, gamma=0.9)
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step("I do not know.")
        >>> reward, info["score"], info["prime_echo"]["best"]
        (0.0, 0.0, 0.0)
        >>> env.close()
    """

    def __init__(self, env: gym.Env, alpha: float = 0.5, gamma: float = 0.9) -> None:
        _check_parameters(alpha, gamma)
        gym.utils.RecordConstructorArgs.__init__(self, alpha=alpha, gamma=gamma)
        gym.Wrapper.__init__(self, env)
        self.alpha = alpha
        self.gamma = gamma
        self._scores: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env and forget the episode's scores."""
        self._scores = []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env and replace its reward by the PrimeEcho step reward."""
        obs, _, terminated, truncated, info = self.env.step(action)
        self._scores.append(float(info["score"]))
        rewards = prime_echo_rewards(self._scores, self.alpha, self.gamma)
        info["prime_echo"] = {"best": rewards.best[-1], "trajectory_reward": rewards.trajectory_reward}
        return obs, rewards.step_rewards[-1], terminated, truncated, info
