"""Everything kernelgym registers with verl; verl loads this module through the ``verl.plugins`` entry point.

Holds:
    compute_policy_loss_mirrorpop: the ``mirrorpop`` policy loss (vanilla PPO/GRPO loss with MirrorPop's mask).
    KernelGymAgentLoop: the ``kernelgym`` agent loop (registered by importing it here).
    BufferedDynamicRetrySampler, RetryDataset: the Buffered Dynamic Retry sampler and its dataset
        (verl selects them by path, ``pkg://kernelgym.training.sampler``).

verl imports every ``verl.plugins`` entry point on ``import verl``, in the
driver and in every Ray worker, and swallows import errors silently; with the
package not installed (e.g. run from a checkout), set
``VERL_USE_EXTERNAL_MODULES=kernelgym.training.verl_plugin`` instead, which fails
loudly. ``kernelgym train`` sets that variable either way.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, register_policy_loss

from kernelgym.training.agent_loop import KernelGymAgentLoop
from kernelgym.training.mirrorpop import mirrorpop_stats, tau_from_env
from kernelgym.training.sampler import BufferedDynamicRetrySampler, RetryDataset

__all__ = ["BufferedDynamicRetrySampler", "KernelGymAgentLoop", "RetryDataset", "compute_policy_loss_mirrorpop"]


@register_policy_loss("mirrorpop")
def compute_policy_loss_mirrorpop(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's vanilla PPO/GRPO loss over the sequences MirrorPop keeps.

    ``d_i`` is measured between ``log_prob`` (the policy being trained) and
    ``old_log_prob``: with ``algorithm.rollout_correction.bypass_mode=true``
    verl's v1 trainer puts the rollout policy's log-probs there, so sequences
    are popped against pi_rollout; otherwise against pi_old. The threshold is
    ``KERNELGYM_MIRRORPOP_TAU`` (see :func:`~kernelgym.training.mirrorpop.tau_from_env`).
    Popped sequences get a zero mask, so they add nothing to the loss or its
    gradient; the loss normaliser verl passes in ``config.global_batch_info`` is
    left as it is, as for verl's own rejection sampling in bypass mode.

    Metrics: verl's vanilla ones plus ``actor/mirrorpop/{popped_fraction, popped, d_mean, d_max, tau}``.
    """
    keep, stats = mirrorpop_stats(log_prob, old_log_prob, response_mask, tau_from_env())
    kept_mask = response_mask * keep.unsqueeze(-1).to(response_mask.dtype)
    loss, metrics = compute_policy_loss_vanilla(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=kept_mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
        rollout_is_weights=rollout_is_weights,
    )
    if not bool(kept_mask.any()):
        # Every sequence popped: a local token mean would divide by zero, so the loss is an explicit zero.
        loss = (log_prob * 0.0).sum()
    metrics.update(stats.as_metrics("actor/mirrorpop/"))
    return loss, metrics
