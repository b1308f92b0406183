"""``kernelgym train``: GRPO training of an LLM on kernelgym tasks with verl, on a GPU cluster.

Holds:
    DEFAULT_CONFIG: the bundled config file (``kernelgym/training/configs/kernelgym_grpo.yaml``).
    PLUGIN_MODULE: the module verl must import in every process (``VERL_USE_EXTERNAL_MODULES``).
    TrainConfig: a config file: the kernelgym settings and the verl overrides.
    TrainPlan: everything a launch needs: the data rows, the agent loop entry, the command, the environment.
    task_rows: one verl dataset row per task of a suite.
    hydra_override: one ``key=value`` Hydra override.
    default_judges: the judge placement used when ``--judges`` is not given (``local`` on a CPU, ``ray`` on a GPU).
    plan_training: build a :class:`TrainPlan` from a config and the command-line options.
    add_train_arguments: the ``kernelgym train`` options.
    train_main: write the data files and run ``python -m verl.trainer.main_ppo`` (or print it with ``--dry-run``).

The full trainer needs GPUs, NCCL and vLLM: it is not run in CI (the documented launch
command is, with ``--dry-run``). What it runs is
plain data: the config's ``verl`` section plus the generated paths, as Hydra
overrides of verl's ``ppo_trainer`` config.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelgym.errors import KernelGymError, require_extra
from kernelgym.training.judge_placement import PLACEMENT_ENV_VAR, PLACEMENT_MODULE, JudgePlacement
from kernelgym.training.settings import DEFAULT_TAU, TAU_ENV_VAR

__all__ = [
    "DEFAULT_CONFIG",
    "PLUGIN_MODULE",
    "TrainConfig",
    "TrainPlan",
    "add_train_arguments",
    "default_judges",
    "hydra_override",
    "plan_training",
    "task_rows",
    "train_main",
]

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "kernelgym_grpo.yaml"
PLUGIN_MODULE = "kernelgym.training.verl_plugin"
AGENT_LOOP_NAME = "kernelgym"
AGENT_LOOP_TARGET = "kernelgym.training.agent_loop.KernelGymAgentLoop"
DATA_SOURCE_PREFIX = "kernelgym/"
_RUNTIME_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars."
_BARE_VALUE = re.compile(r"[\w./:@+\-${}]*")


@dataclass(frozen=True)
class TrainConfig:
    """A ``kernelgym train`` config file.

    Attributes:
        suite: the task suite (``"cpu"``, ``"gpu"``, ``"kernelbench:<dir-or-parquet>[:level]"``).
        backend: the backend answers are written for.
        repeat: rows per task in the train file (raised so that one batch fits).
        system_prompt: the system message of every row (``None``: ``kernelgym.envs.prompt.SYSTEM_PROMPT``).
        mirrorpop_tau: MirrorPop's threshold.
        agent_loop: keyword arguments of ``KernelGymAgentLoop``.
        verl: Hydra overrides of verl's ``ppo_trainer`` config, ``{"a.b.c": value}``.
    """

    suite: str = "gpu"
    backend: str = "cuda"
    repeat: int = 1
    system_prompt: str | None = None
    mirrorpop_tau: float = DEFAULT_TAU
    agent_loop: Mapping[str, Any] = field(default_factory=dict)
    verl: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """Read a YAML config file.

        Raises:
            KernelGymError: the file is missing or has unknown keys.
        """
        import yaml

        path = Path(path)
        if not path.is_file():
            raise KernelGymError(f"no train config at {path}")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise KernelGymError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise KernelGymError(f"{path} must be a YAML mapping with the keys `kernelgym` and `verl`")
        unknown = sorted(set(data) - {"kernelgym", "verl"})
        if unknown:
            raise KernelGymError(f"{path}: unknown top-level keys {unknown}; expected `kernelgym` and `verl`")
        settings = dict(data.get("kernelgym") or {})
        known = {"suite", "backend", "repeat", "system_prompt", "mirrorpop_tau", "agent_loop"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise KernelGymError(f"{path}: unknown `kernelgym` keys {unknown}; known: {sorted(known)}")
        return cls(**settings, verl=dict(data.get("verl") or {}))


def task_rows(
    suite: str, backend: str, split: str, repeat: int = 1, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """One verl ``RLHFDataset`` row per task (``repeat`` times), in suite order.

    ``prompt`` holds the chat messages (system prompt, then the task prompt a
    ``KernelEnv`` shows); ``extra_info`` names the task for the agent loop, the
    reward function and the retry dataset (``task_id``, ``suite``, ``backend``,
    ``split``, ``index``); ``reward_model.ground_truth`` is the task id.

    Example:
        >>> rows = task_rows("cpu", "cpp", "val")
        >>> rows[0]["extra_info"]["task_id"], [m["role"] for m in rows[0]["prompt"]]
        ('level1/1_ReLU', ['system', 'user'])
    """
    from kernelgym.envs.kernel_env import KernelEnv, resolve_suite
    from kernelgym.envs.prompt import SYSTEM_PROMPT, conversation

    tasks = resolve_suite(suite)
    env = KernelEnv(suite=tasks, backend=backend, max_turns=1)
    rows = []
    for task in tasks:
        obs, _ = env.reset(options={"task_id": task.id})
        messages = conversation(obs["prompt"], system_prompt=system_prompt or SYSTEM_PROMPT)
        for _ in range(repeat):
            rows.append(
                {
                    "data_source": DATA_SOURCE_PREFIX + tasks.name,
                    "prompt": messages,
                    "ability": "kernel",
                    "reward_model": {"style": "rule", "ground_truth": task.id},
                    "extra_info": {
                        "task_id": task.id, "suite": suite, "backend": backend, "split": split, "index": len(rows),
                    },
                }
            )
    env.close()
    return rows


def _parses_as_non_string(text: str) -> bool:
    # Hydra reads bare numbers, booleans and null as such; a string that looks like one must be quoted.
    if text.lower() in ("", "null", "true", "false", "nan", "inf", "-inf", "+inf"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Raw(str):
    """An override value given on the command line, passed to Hydra exactly as written."""


def hydra_value(value: Any) -> str:
    """A value in Hydra's override grammar (dicts and lists nested, odd strings quoted).

    Example:
        >>> hydra_value({"a": 1, "b": [True, None]}), hydra_value("x y"), hydra_value("0.2"), hydra_value("${data.n}")
        ('{a:1,b:[true,null]}', "'x y'", "'0.2'", '${data.n}')
    """
    if isinstance(value, _Raw):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{key}:{hydra_value(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    text = str(value)
    if _BARE_VALUE.fullmatch(text) and not _parses_as_non_string(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def hydra_override(key: str, value: Any) -> str:
    """``key=value`` for ``python -m verl.trainer.main_ppo``.

    Example:
        >>> hydra_override("trainer.logger", ["console"])
        'trainer.logger=[console]'
    """
    return f"{key}={hydra_value(value)}"


@dataclass(frozen=True)
class TrainPlan:
    """Everything one launch needs.

    Attributes:
        output_dir: where the data files, the agent loop config and the checkpoints go.
        train_rows: rows of the train file.
        val_rows: rows of the validation file.
        agent_loop: the ``agent_loop_config_path`` file's content (one entry).
        overrides: Hydra overrides, ``{key: value}``, in the order they are passed.
        env: variables to add to the environment of the trainer.
    """

    output_dir: Path
    train_rows: tuple[dict[str, Any], ...]
    val_rows: tuple[dict[str, Any], ...]
    agent_loop: tuple[dict[str, Any], ...]
    overrides: Mapping[str, Any]
    env: Mapping[str, str]

    @property
    def train_file(self) -> Path:
        """The train data file."""
        return self.output_dir / "train.jsonl"

    @property
    def val_file(self) -> Path:
        """The validation data file."""
        return self.output_dir / "val.jsonl"

    @property
    def agent_loop_file(self) -> Path:
        """The ``agent_loop_config_path`` file."""
        return self.output_dir / "agent_loop.yaml"

    def command(self, python: str = sys.executable) -> list[str]:
        """``python -m verl.trainer.main_ppo`` with every override."""
        return [python, "-m", "verl.trainer.main_ppo", *(hydra_override(k, v) for k, v in self.overrides.items())]

    def write_files(self) -> None:
        """Write the data files (JSON lines) and the agent loop config (YAML)."""
        import yaml

        self.output_dir.mkdir(parents=True, exist_ok=True)
        for path, rows in ((self.train_file, self.train_rows), (self.val_file, self.val_rows)):
            path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        self.agent_loop_file.write_text(yaml.safe_dump(list(self.agent_loop), sort_keys=False))


def _merge(overrides: dict[str, Any], key: str, value: Any) -> None:
    # A later value for the same key (with or without Hydra's `+`) replaces the earlier one in place.
    bare = key.lstrip("+")
    for existing in list(overrides):
        if existing.lstrip("+") == bare:
            overrides[existing] = value
            return
    overrides[key] = value


def default_judges(backend: str) -> str:
    """The ``--judges`` placement used when none is given: one that works for ``backend`` as documented.

    A CPU backend judges where the agent loop runs (``local``). A GPU backend's judges go to the Ray nodes
    started with the ``kernelgym_judge`` resource (``ray``): ``local`` would put them on the training GPUs,
    which :class:`~kernelgym.training.judge_placement.JudgePlacement` refuses; a cluster without such nodes
    fails at the first judged answer with a sentence saying how to start one.

    Example:
        >>> default_judges("cpp"), default_judges("cuda")
        ('local', 'ray')
    """
    from kernelgym.backends import get_backend

    return "local" if get_backend(backend).device_type == "cpu" else "ray"


def plan_training(
    config: TrainConfig,
    output_dir: str | Path,
    options: Mapping[str, Any] | None = None,
    extra_overrides: Sequence[str] = (),
) -> TrainPlan:
    """Combine a config, the command-line options and raw overrides into a :class:`TrainPlan`.

    Options (``None`` values are ignored): ``suite``, ``backend``, ``model``,
    ``batch_size``, ``group_size``, ``gpus``, ``nodes``, ``max_turns``, ``tau``,
    ``judges`` (where the verifier's judge workers run: :class:`~kernelgym.training.judge_placement.JudgePlacement`;
    by default :func:`default_judges`: ``local`` for a CPU backend, ``ray`` for a GPU backend).
    Precedence, lowest first: the config's ``verl`` section, the generated paths,
    the options, ``extra_overrides`` (``key=value`` strings).

    Raises:
        KernelGymError: an override is not ``key=value``, a setting is out of range, or the advantage
            estimator is ``trloo``, which verl's trainer cannot feed (see :mod:`kernelgym.training.advantage`).
    """
    opts = {key: value for key, value in (options or {}).items() if value is not None}
    config = replace(config, **{key: opts[key] for key in ("suite", "backend") if key in opts})
    tau = float(opts.get("tau", config.mirrorpop_tau))
    if not tau >= 0:
        raise KernelGymError(f"MirrorPop tau must be >= 0, got {tau}")
    loop_settings = {**config.agent_loop, **({"max_turns": opts["max_turns"]} if "max_turns" in opts else {})}
    output_dir = Path(output_dir).expanduser().resolve()
    placement = JudgePlacement.from_spec(str(opts.get("judges", default_judges(config.backend))), config.backend)
    modules = f"{PLUGIN_MODULE},{PLACEMENT_MODULE}"

    overrides: dict[str, Any] = {}
    for key, value in config.verl.items():
        _merge(overrides, key, value)
    generated = {
        "data.train_files": str(output_dir / "train.jsonl"),
        "data.val_files": str(output_dir / "val.jsonl"),
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(output_dir / "agent_loop.yaml"),
        "trainer.default_local_dir": str(output_dir / "checkpoints"),
        _RUNTIME_ENV + TAU_ENV_VAR: str(tau),
        _RUNTIME_ENV + PLACEMENT_ENV_VAR: placement.to_env(),
        _RUNTIME_ENV + "VERL_USE_EXTERNAL_MODULES": modules,
    }
    option_keys = {
        "model": "actor_rollout_ref.model.path",
        "batch_size": "data.train_batch_size",
        "group_size": "actor_rollout_ref.rollout.n",
        "gpus": "trainer.n_gpus_per_node",
        "nodes": "trainer.nnodes",
    }
    generated.update({key: opts[name] for name, key in option_keys.items() if name in opts})
    for key, value in generated.items():
        _merge(overrides, key, value)
    for raw in extra_overrides:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise KernelGymError(f"override {raw!r} is not key=value")
        _merge(overrides, key, _Raw(value))
    estimator = next((str(v) for k, v in overrides.items() if k.lstrip("+") == "algorithm.adv_estimator"), "")
    if estimator == "trloo":
        raise KernelGymError(
            "algorithm.adv_estimator=trloo: verl's trainer hands an advantage estimator the token rewards, the "
            "response mask and the group only, not the per-turn rewards TRLOO needs; use grpo here, or train with "
            "TRLOO on one machine: python examples/grpo_local.py --advantage trloo (docs/local_training.md)"
        )

    rows = task_rows(config.suite, config.backend, "val", 1, config.system_prompt)
    batch_size = str(overrides.get("data.train_batch_size", 1))
    repeat = config.repeat
    if batch_size.isdigit() and int(batch_size) > len(rows) * repeat:
        repeat = math.ceil(int(batch_size) / len(rows))
    return TrainPlan(
        output_dir=output_dir,
        train_rows=tuple(task_rows(config.suite, config.backend, "train", repeat, config.system_prompt)),
        val_rows=tuple(rows),
        agent_loop=({"name": AGENT_LOOP_NAME, "_target_": AGENT_LOOP_TARGET, **loop_settings},),
        overrides=overrides,
        env={TAU_ENV_VAR: str(tau), PLACEMENT_ENV_VAR: placement.to_env(), "VERL_USE_EXTERNAL_MODULES": modules},
    )


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``kernelgym train`` options to ``parser``."""
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="train config YAML (default: the bundled one)")
    parser.add_argument(
        "--output-dir", default="runs/kernelgym-train", help="data files, agent loop config, checkpoints"
    )
    parser.add_argument("--model", default=None, help="model path or hub id (actor_rollout_ref.model.path)")
    parser.add_argument("--suite", default=None, help="task suite (cpu, gpu, kernelbench:<path>[:level])")
    parser.add_argument("--backend", default=None, help="backend answers are written for (cuda, triton, cpp, musa)")
    parser.add_argument("--batch-size", type=int, default=None, help="prompts per step (data.train_batch_size)")
    parser.add_argument("--group-size", type=int, default=None, help="rollouts per prompt, the GRPO group (rollout.n)")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs per node (trainer.n_gpus_per_node)")
    parser.add_argument("--nodes", type=int, default=None, help="nodes (trainer.nnodes)")
    parser.add_argument("--max-turns", type=int, default=None, help="attempts per episode")
    parser.add_argument("--tau", type=float, default=None, help="MirrorPop threshold")
    parser.add_argument("--judges", default=None,
                        help="where judge workers run: ray[:RESOURCE[:N]] (Ray actors needing a custom resource), "
                        "local (CPU backends only) or colocated (on the training GPUs, explicitly) "
                        "(default: local for a CPU backend, ray for a GPU backend)")
    parser.add_argument("--dry-run", action="store_true", help="write the files and print the command, do not run it")
    parser.add_argument("overrides", nargs="*", help="more Hydra overrides for verl, key=value")


def train_main(args: argparse.Namespace) -> int:
    """Write the data files and the agent loop config, then run verl's trainer; returns its exit code.

    ``--dry-run`` needs no verl: it writes the files and prints the command only.

    Raises:
        MissingExtraError: verl is not installed (without ``--dry-run``).
    """
    config = TrainConfig.load(args.config)
    options = {
        "suite": args.suite, "backend": args.backend, "model": args.model, "batch_size": args.batch_size,
        "group_size": args.group_size, "gpus": args.gpus, "nodes": args.nodes, "max_turns": args.max_turns,
        "tau": args.tau, "judges": args.judges,
    }
    plan = plan_training(config, args.output_dir, options, args.overrides)
    plan.write_files()
    command = plan.command()
    env_text = " ".join(f"{key}={shlex.quote(value)}" for key, value in plan.env.items())
    print(f"{env_text} {shlex.join(command)}", flush=True)
    if args.dry_run:
        return 0
    require_extra("verl", "verl")
    env = {**os.environ, **plan.env}
    if os.environ.get("VERL_USE_EXTERNAL_MODULES"):
        env["VERL_USE_EXTERNAL_MODULES"] = f"{os.environ['VERL_USE_EXTERNAL_MODULES']},{plan.env['VERL_USE_EXTERNAL_MODULES']}"
    return subprocess.run(command, env=env, check=False).returncode
