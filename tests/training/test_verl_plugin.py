"""The verl registrations: the ``mirrorpop`` policy loss on real tensors, and loading through ``verl.plugins``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, get_policy_loss_fn  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

import kernelgym.training.verl_plugin  # noqa: E402,F401  (registers the loss)
from kernelgym.training.mirrorpop import TAU_ENV_VAR, sequence_deviation  # noqa: E402

from .tiny_lm import compose_verl_config  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "kernelgym.training.verl_plugin"


@pytest.fixture(scope="module")
def actor_config():
    config = compose_verl_config(
        [
            "actor_rollout_ref.actor.policy_loss.loss_mode=mirrorpop",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        ]
    )
    return omega_conf_to_dataclass(config.actor_rollout_ref.actor)


def batch(offsets: list[float]):
    """old/new log-probs where sequence i's new log-probs sit ``offsets[i]`` away (alternating sign), and so on."""
    gen = torch.Generator().manual_seed(0)
    n, length = len(offsets), 6
    old = -torch.rand(n, length, generator=gen) - 0.1
    signs = torch.tensor([1.0, -1.0] * (length // 2))
    new = (old + torch.tensor(offsets).unsqueeze(1) * signs).requires_grad_(True)
    advantages = torch.randn(n, length, generator=gen)
    mask = torch.ones(n, length, dtype=torch.bool)
    mask[:, -1] = False
    return old, new, advantages, mask


def test_popped_sequences_get_no_gradient_and_metrics_are_reported(actor_config, monkeypatch):
    monkeypatch.setenv(TAU_ENV_VAR, "0.2")
    old, new, advantages, mask = batch([0.05, 0.5, 0.3, 0.1])
    loss, metrics = get_policy_loss_fn("mirrorpop")(
        old_log_prob=old, log_prob=new, advantages=advantages, response_mask=mask, loss_agg_mode="token-mean",
        config=actor_config,
    )
    loss.backward()

    popped = sequence_deviation(new, old, mask) > 0.2
    assert popped.tolist() == [False, True, True, False]
    assert torch.all(new.grad[popped] == 0)
    assert torch.all(new.grad[~popped][mask[~popped]] != 0)
    assert metrics["actor/mirrorpop/popped_fraction"] == 0.5
    assert metrics["actor/mirrorpop/d_max"] == pytest.approx(0.5)
    assert metrics["actor/mirrorpop/tau"] == 0.2
    assert "actor/pg_clipfrac" in metrics  # vanilla's metrics are kept

    keep = ~popped
    reference, _ = compute_policy_loss_vanilla(
        old_log_prob=old[keep], log_prob=new[keep].detach(), advantages=advantages[keep], response_mask=mask[keep],
        loss_agg_mode="token-mean", config=actor_config,
    )
    assert loss.item() == pytest.approx(reference.item())


def test_deviations_in_either_direction_pop_alike(actor_config, monkeypatch):
    monkeypatch.setenv(TAU_ENV_VAR, "0.2")
    old, new, advantages, mask = batch([0.3, 0.3])
    flipped = (2 * old - new).detach()  # the mirror image of new around old
    _, up = get_policy_loss_fn("mirrorpop")(old, new, advantages, mask, "token-mean", actor_config)
    _, down = get_policy_loss_fn("mirrorpop")(old, flipped, advantages, mask, "token-mean", actor_config)
    assert up["actor/mirrorpop/popped"] == down["actor/mirrorpop/popped"] == 2


def test_everything_popped_gives_a_finite_zero_loss(actor_config, monkeypatch):
    monkeypatch.setenv(TAU_ENV_VAR, "0")
    old, new, advantages, mask = batch([0.1, 0.2])
    loss, metrics = get_policy_loss_fn("mirrorpop")(old, new, advantages, mask, "token-mean", actor_config)
    loss.backward()
    assert loss.item() == 0.0 and torch.all(new.grad == 0)
    assert metrics["actor/mirrorpop/popped_fraction"] == 1.0


def registries_seen_by_a_fresh_interpreter(env: dict[str, str]) -> dict[str, object]:
    probe = (
        "import json, sys, verl\n"
        "from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
        f"print(json.dumps({{'loaded': {PLUGIN!r} in sys.modules, 'loss': 'mirrorpop' in POLICY_LOSS_REGISTRY,"
        " 'loop': _agent_loop_registry.get('kernelgym', {}).get('_target_')}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_MODULES", "VERL_USE_EXTERNAL_PLUGINS")}
    return {**env, **extra}


EXPECTED = {"loaded": True, "loss": True, "loop": "kernelgym.training.agent_loop.KernelGymAgentLoop"}


def test_a_verl_plugins_entry_point_registers_everything_on_import_verl(tmp_path):
    # The same declaration setup.py makes, in a distribution of its own on the path.
    dist = tmp_path / "kernelgym_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kernelgym-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[verl.plugins]\nkernelgym = {PLUGIN}\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    assert registries_seen_by_a_fresh_interpreter(env) == EXPECTED


def test_verl_use_external_modules_registers_everything():
    env = clean_env(PYTHONPATH=str(REPO), VERL_USE_EXTERNAL_MODULES=PLUGIN)
    assert registries_seen_by_a_fresh_interpreter(env) == EXPECTED


def test_the_installed_package_declares_the_entry_point():
    try:
        dist = metadata.distribution("kernelgym")
    except metadata.PackageNotFoundError:
        pytest.skip("kernelgym is not installed (pip install -e .)")
    declared = [ep for ep in dist.entry_points if ep.group == "verl.plugins"]
    assert [ep.value for ep in declared] == [PLUGIN]
    assert declared[0].load() is kernelgym.training.verl_plugin
