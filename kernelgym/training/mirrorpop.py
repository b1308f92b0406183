"""MirrorPop: a sequence-level off-policy filter for policy-gradient losses (pure torch).

Holds:
    DEFAULT_TAU: the default threshold on the mean absolute log-ratio.
    TAU_ENV_VAR: the environment variable the verl policy loss reads its threshold from.
    sequence_deviation: d_i, the mean over response tokens of ``|log_prob - ref_log_prob|``.
    mirrorpop_mask: which sequences are kept (``d_i <= tau``).
    MirrorPopStats: popped fraction and the distribution of d over a batch.
    mirrorpop_stats: compute the stats of one batch.
    tau_from_env: the threshold configured for this process.

For each response sequence i with response tokens t,
``d_i = mean_t | log pi_train(y_t) - log pi_ref(y_t) |``; sequences with
``d_i > tau`` are popped from the loss. Deviations in both directions count alike
("mirror"), unlike a signed mean of log-ratios where over- and under-estimates
cancel. The verl policy loss ``mirrorpop`` (``kernelgym.training.verl_plugin``)
applies this mask on top of verl's vanilla PPO/GRPO loss; this module imports
nothing from verl.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from kernelgym.training.settings import DEFAULT_TAU, TAU_ENV_VAR

__all__ = [
    "DEFAULT_TAU",
    "TAU_ENV_VAR",
    "MirrorPopStats",
    "mirrorpop_mask",
    "mirrorpop_stats",
    "sequence_deviation",
    "tau_from_env",
]



def sequence_deviation(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Mean absolute log-ratio per sequence over its response tokens.

    Args:
        log_prob: ``[batch, length]`` log-probabilities under the policy being trained.
        ref_log_prob: ``[batch, length]`` log-probabilities under the reference policy
            (the rollout policy, or the old policy).
        response_mask: ``[batch, length]``, nonzero on the tokens that count.

    Returns:
        ``float[batch]``; 0 for a sequence without any counted token.

    Example:
        >>> lp = torch.tensor([[-1.0, -1.0], [-1.0, -2.0]])
        >>> ref = torch.tensor([[-1.5, -0.5], [-1.0, -9.0]])
        >>> sequence_deviation(lp, ref, torch.tensor([[1, 1], [1, 0]])).tolist()
        [0.5, 0.0]
    """
    if log_prob.shape != ref_log_prob.shape or log_prob.shape != response_mask.shape:
        raise ValueError(
            f"log_prob {tuple(log_prob.shape)}, ref_log_prob {tuple(ref_log_prob.shape)} and "
            f"response_mask {tuple(response_mask.shape)} must have the same [batch, length] shape"
        )
    mask = response_mask.to(dtype=torch.float32)
    gap = (log_prob.detach().float() - ref_log_prob.detach().float()).abs() * mask
    return gap.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)


def mirrorpop_mask(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, response_mask: torch.Tensor, tau: float
) -> torch.Tensor:
    """Keep the sequences whose mean absolute log-ratio is at most ``tau``.

    Args:
        log_prob: ``[batch, length]`` log-probabilities under the policy being trained.
        ref_log_prob: ``[batch, length]`` log-probabilities under the reference policy.
        response_mask: ``[batch, length]``, nonzero on the tokens that count.
        tau: the threshold (``>= 0``); ``d_i > tau`` pops sequence i.

    Returns:
        ``bool[batch]``, ``True`` for a kept sequence.

    Example:
        >>> lp = torch.zeros(3, 2)
        >>> ref = torch.tensor([[0.1, -0.1], [0.5, -0.5], [0.0, 0.0]])
        >>> mirrorpop_mask(lp, ref, torch.ones(3, 2), tau=0.2).tolist()
        [True, False, True]
    """
    if not tau >= 0:
        raise ValueError(f"MirrorPop tau must be >= 0, got {tau}")
    return sequence_deviation(log_prob, ref_log_prob, response_mask) <= tau


@dataclass(frozen=True)
class MirrorPopStats:
    """What MirrorPop did to one batch.

    Attributes:
        sequences: sequences in the batch that have at least one counted token.
        popped: how many of them were popped.
        popped_fraction: ``popped / sequences`` (0 for an empty batch).
        d_mean: mean of d over those sequences.
        d_max: largest d.
        tau: the threshold used.
    """

    sequences: int
    popped: int
    popped_fraction: float
    d_mean: float
    d_max: float
    tau: float

    def as_metrics(self, prefix: str = "mirrorpop/") -> dict[str, float]:
        """The stats as a flat ``{name: float}`` dict for a logger.

        Example:
            >>> MirrorPopStats(4, 1, 0.25, 0.1, 0.3, 0.2).as_metrics()["mirrorpop/popped_fraction"]
            0.25
        """
        return {
            f"{prefix}popped_fraction": self.popped_fraction,
            f"{prefix}popped": float(self.popped),
            f"{prefix}d_mean": self.d_mean,
            f"{prefix}d_max": self.d_max,
            f"{prefix}tau": self.tau,
        }


def mirrorpop_stats(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, response_mask: torch.Tensor, tau: float
) -> tuple[torch.Tensor, MirrorPopStats]:
    """The keep-mask and its stats; sequences without counted tokens are kept and left out of the stats.

    Example:
        >>> keep, stats = mirrorpop_stats(torch.zeros(2, 1), torch.tensor([[0.0], [1.0]]), torch.ones(2, 1), 0.5)
        >>> keep.tolist(), stats.popped, stats.d_max
        ([True, False], 1, 1.0)
    """
    deviation = sequence_deviation(log_prob, ref_log_prob, response_mask)
    keep = mirrorpop_mask(log_prob, ref_log_prob, response_mask, tau)
    counted = response_mask.to(dtype=torch.bool).any(dim=-1)
    sequences = int(counted.sum().item())
    popped = int((counted & ~keep).sum().item())
    d = deviation[counted]
    stats = MirrorPopStats(
        sequences=sequences,
        popped=popped,
        popped_fraction=popped / sequences if sequences else 0.0,
        d_mean=float(d.mean().item()) if sequences else 0.0,
        d_max=float(d.max().item()) if sequences else 0.0,
        tau=float(tau),
    )
    return keep, stats


def tau_from_env(default: float = DEFAULT_TAU) -> float:
    """The threshold set in ``KERNELGYM_MIRRORPOP_TAU`` (``default`` when unset).

    verl's ``PolicyLossConfig`` rejects unknown keys, so the threshold travels to
    the training workers in the environment (``kernelgym train`` sets it).

    Raises:
        ValueError: the variable is not a finite number ``>= 0``.
    """
    raw = os.environ.get(TAU_ENV_VAR, "").strip()
    if not raw:
        return default
    try:
        tau = float(raw)
    except ValueError:
        raise ValueError(f"{TAU_ENV_VAR}={raw!r} is not a number") from None
    if not math.isfinite(tau) or tau < 0:
        raise ValueError(f"{TAU_ENV_VAR}={raw!r} must be a finite number >= 0")
    return tau
