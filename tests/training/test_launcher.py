"""``kernelgym train``: the config file, the generated files and the main_ppo command line.

The trainer itself needs GPUs and is not run; the command's overrides are
checked against verl's own ``ppo_trainer`` config (composed and validated).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from kernelgym.errors import KernelGymError
from kernelgym.training.judge_placement import PLACEMENT_ENV_VAR, PLACEMENT_MODULE, JudgePlacement

yaml = pytest.importorskip("yaml")

from kernelgym.training.launcher import (  # noqa: E402
    DEFAULT_CONFIG,
    PLUGIN_MODULE,
    TrainConfig,
    add_train_arguments,
    plan_training,
    train_main,
)
from kernelgym.training.mirrorpop import TAU_ENV_VAR  # noqa: E402

CPU = {"suite": "cpu", "backend": "cpp"}
VERL_DOC = Path(__file__).resolve().parents[2] / "docs" / "verl.md"


@pytest.fixture(scope="module")
def config():
    return TrainConfig.load(DEFAULT_CONFIG)


def test_the_bundled_config_selects_every_kernelgym_piece(config):
    overrides = config.verl
    assert overrides["actor_rollout_ref.rollout.name"] == "vllm"
    assert overrides["algorithm.adv_estimator"] == "grpo"
    assert overrides["actor_rollout_ref.rollout.agent.default_agent_loop"] == "kernelgym"
    assert overrides["actor_rollout_ref.actor.policy_loss.loss_mode"] == "mirrorpop"
    assert overrides["trainer.v1.sampler.custom_sampler.name"] == "BufferedDynamicRetrySampler"
    assert overrides["data.custom_cls.name"] == "RetryDataset"
    assert {"actor_rollout_ref.model.path", "data.train_batch_size", "actor_rollout_ref.rollout.n"} <= set(overrides)


def test_options_and_raw_overrides_take_precedence(config, tmp_path):
    options = {**CPU, "model": "/models/tiny", "batch_size": 4, "group_size": 2, "gpus": 1, "tau": 0.5, "max_turns": 2}
    plan = plan_training(config, tmp_path, options, ["trainer.total_epochs=3", "data.train_batch_size=6"])
    assert plan.overrides["actor_rollout_ref.model.path"] == "/models/tiny"
    assert plan.overrides["actor_rollout_ref.rollout.n"] == 2 and plan.overrides["trainer.n_gpus_per_node"] == 1
    assert plan.overrides["trainer.total_epochs"] == "3" and plan.overrides["data.train_batch_size"] == "6"
    assert plan.overrides["data.train_files"] == str(tmp_path / "train.jsonl")
    assert plan.env[TAU_ENV_VAR] == "0.5"
    assert plan.env["VERL_USE_EXTERNAL_MODULES"] == f"{PLUGIN_MODULE},{PLACEMENT_MODULE}"
    assert JudgePlacement.from_env(plan.env[PLACEMENT_ENV_VAR]).mode == "local"
    assert plan.agent_loop[0]["max_turns"] == 2 and plan.agent_loop[0]["name"] == "kernelgym"
    command = plan.command("python")
    assert command[:3] == ["python", "-m", "verl.trainer.main_ppo"]
    assert command.count("data.train_batch_size=6") == 1 and "data.train_batch_size=4" not in command
    assert f"+ray_kwargs.ray_init.runtime_env.env_vars.{TAU_ENV_VAR}='0.5'" in command
    with pytest.raises(KernelGymError, match="key=value"):
        plan_training(config, tmp_path, CPU, ["no-equals-sign"])


def test_trloo_is_refused_on_verl_with_a_pointer_to_the_local_trainer(config, tmp_path):
    with pytest.raises(KernelGymError, match="--advantage trloo"):
        plan_training(config, tmp_path, CPU, ["algorithm.adv_estimator=trloo"])


def test_the_train_file_is_repeated_to_fill_a_batch(config, tmp_path):
    plan = plan_training(config, tmp_path, {**CPU, "batch_size": 50})
    tasks = len(plan.val_rows)
    assert len(plan.train_rows) == tasks * -(-50 // tasks) >= 50
    assert {row["extra_info"]["split"] for row in plan.train_rows} == {"train"}
    assert {row["extra_info"]["split"] for row in plan.val_rows} == {"val"}


def test_dry_run_writes_the_files_and_prints_the_command(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    args = parser.parse_args(["--dry-run", "--output-dir", str(tmp_path), "--suite", "cpu", "--backend", "cpp"])
    assert train_main(args) == 0
    printed = capsys.readouterr().out
    assert "verl.trainer.main_ppo" in printed and f"{TAU_ENV_VAR}=0.2" in printed
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert rows[0]["reward_model"]["ground_truth"] == rows[0]["extra_info"]["task_id"] == "level1/1_ReLU"
    loops = yaml.safe_load((tmp_path / "agent_loop.yaml").read_text())
    assert loops[0]["_target_"] == "kernelgym.training.agent_loop.KernelGymAgentLoop"


def test_bad_config_files_are_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kernelgym:\n  suite: cpu\n  turns: 3\n")
    with pytest.raises(KernelGymError, match="turns"):
        TrainConfig.load(path)
    with pytest.raises(KernelGymError, match="no train config"):
        TrainConfig.load(tmp_path / "missing.yaml")


def test_the_command_composes_into_a_valid_verl_config(config, tmp_path):
    pytest.importorskip("verl")
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from .tiny_lm import build_tiny_lm, compose_verl_config

    model = build_tiny_lm(tmp_path / "lm")
    plan = plan_training(config, tmp_path, {**CPU, "model": str(model)})
    composed = compose_verl_config(plan.command()[3:])
    validate_config(composed, use_reference_policy=need_reference_policy(composed), use_critic=need_critic(composed))
    assert composed.trainer.v1.sampler.sampler_kwargs.train_batch_size == composed.data.train_batch_size
    assert composed.ray_kwargs.ray_init.runtime_env.env_vars[TAU_ENV_VAR] == "0.2"
    assert omega_conf_to_dataclass(composed.actor_rollout_ref.actor).policy_loss.loss_mode == "mirrorpop"


def test_judges_of_a_gpu_backend_must_be_placed_off_the_training_gpus(config, tmp_path):
    with pytest.raises(KernelGymError, match="judge"):
        plan_training(config, tmp_path, {"suite": "gpu", "backend": "cuda", "judges": "local"})
    default = JudgePlacement.from_env(plan_training(config, tmp_path, {"suite": "gpu", "backend": "cuda"}).env[PLACEMENT_ENV_VAR])
    assert (default.mode, default.resource) == ("ray", "kernelgym_judge")  # the default works: off the training GPUs
    assert JudgePlacement.from_env(plan_training(config, tmp_path, CPU).env[PLACEMENT_ENV_VAR]).mode == "local"
    plan = plan_training(config, tmp_path, {"suite": "gpu", "backend": "cuda", "judges": "ray:kernelgym_judge:2"})
    placement = JudgePlacement.from_env(plan.env[PLACEMENT_ENV_VAR])
    assert (placement.mode, placement.resource, placement.num_workers) == ("ray", "kernelgym_judge", 2)
    key = "+ray_kwargs.ray_init.runtime_env.env_vars." + PLACEMENT_ENV_VAR
    assert plan.overrides[key] == plan.env[PLACEMENT_ENV_VAR]


def documented_launch_command() -> list[str]:
    """The first ``kernelgym train`` command of docs/verl.md's "Launch" section, continuation lines joined."""
    text = VERL_DOC.read_text(encoding="utf-8").split("## Launch", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    command = shlex.split(block.replace("\\\n", " ").splitlines()[0])
    assert command[:2] == ["kernelgym", "train"], command
    return command[2:]


def test_the_documented_launch_command_runs_as_written_with_dry_run(tmp_path, monkeypatch, capsys):
    # Read from the doc, so the doc and this test cannot drift apart.
    argv = documented_launch_command()
    assert "--gpus" in argv and "--dry-run" not in argv and "--judges" not in argv
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    assert train_main(parser.parse_args([*argv, "--dry-run"])) == 0
    printed = capsys.readouterr().out
    assert "verl.trainer.main_ppo" in printed and "trainer.n_gpus_per_node=8" in printed
    rows = [json.loads(line) for line in (tmp_path / "runs" / "grpo" / "train.jsonl").read_text().splitlines()]
    assert rows[0]["extra_info"]["backend"] == "cuda"
