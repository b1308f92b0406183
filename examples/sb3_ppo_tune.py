"""PPO (stable-baselines3) tunes a templated C++ kernel on kernelgym/Tune-CPU-v0 and plots its learning curve.

Every configuration of the task's template is built once up front (``prebuild``), so training
steps are build-cache hits plus correctness checks and timing. A uniform random policy is run on
the same seeds before training, the trained policy (greedy) after it; the script prints both
means and writes a learning-curve plot and a Markdown summary to ``--out-dir``.

    python examples/sb3_ppo_tune.py --total-timesteps 512
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np

from kernelgym.envs.tune_env import mean_step_reward, register_tune_envs, tune_reward
from kernelgym.errors import require_extra
from kernelgym.options import parse_options
from kernelgym.verifier import VerifierConfig


@dataclass
class Args:
    env_id: str = "kernelgym/Tune-CPU-v0"
    """the environment id"""
    task_id: str = "level1/14_Small_Matmul"
    """the task whose template is tuned"""
    total_timesteps: int = 512
    """PPO training steps (each one a checked and timed kernel)"""
    max_steps: int = 8
    """tuning steps per episode"""
    repeats: int = 1
    """independent evaluations per step (median speedup)"""
    warmup: int = 2
    """untimed calls before timing, per evaluation"""
    runs: int = 10
    """timed calls per evaluation (the verifier takes their median)"""
    n_steps: int = 32
    """PPO rollout length"""
    batch_size: int = 32
    """PPO minibatch size"""
    learning_rate: float = 3e-3
    """PPO learning rate"""
    gamma: float = 0.5
    """discount: the reward depends only on the configuration chosen, so a short horizon learns faster"""
    eval_episodes: int = 4
    """episodes for the random baseline and for the trained policy, on the same seeds"""
    num_workers: int = 2
    """verifier worker processes (the prebuild compiles in parallel)"""
    seed: int = 0
    """seed of PPO, of the random policy and of the evaluation episodes"""
    out_dir: str = "runs/tune-ppo"
    """where the plot and the summary go (the committed record is benchmarks/results/tune-ppo-learning-curve.md)"""
    out_name: str = "tune-ppo-learning-curve"
    """file name of the plot (.png) and the summary (.md), without suffix"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


def make_env(args: Args) -> gym.Env:
    from stable_baselines3.common.monitor import Monitor

    register_tune_envs()
    config = VerifierConfig(warmup=args.warmup, runs=args.runs)
    env = gym.make(args.env_id, task_id=args.task_id, max_steps=args.max_steps, repeats=args.repeats,
                   verifier_config=config, num_workers=args.num_workers)
    return Monitor(env)


def cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def git_commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    args = parse_args()
    sb3 = require_extra("stable_baselines3", "sb3")
    env = make_env(args)
    tune = env.unwrapped
    start = time.perf_counter()

    grid = tune.prebuild()
    grid_rewards = []
    prebuild_seconds = time.perf_counter() - start
    print(f"grid of {tune.template.size} configurations for {args.task_id} (prebuild {prebuild_seconds:.0f} s):")
    for indices, result in zip(tune.template.grid(), grid, strict=True):
        reward = tune_reward([result], tune.reward_clip, tune.failure_penalty)[0]
        grid_rewards.append(reward)
        speedup = "n/a" if result.speedup is None else f"{result.speedup:.3f}x"
        print(f"  {tune.template.config(indices)}: {result.status.value} speedup {speedup} reward {reward:.3f}")

    env.action_space.seed(args.seed)
    random_mean = mean_step_reward(env, lambda _obs: env.action_space.sample(), args.eval_episodes, args.seed)
    print(f"random policy: mean reward per step {random_mean:.3f}")

    model = sb3.PPO("MultiInputPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size,
                    learning_rate=args.learning_rate, gamma=args.gamma, seed=args.seed, verbose=0)
    train_start = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    train_seconds = time.perf_counter() - train_start
    # Monitor's episode records are cumulative: keep only the training episodes (after the random baseline).
    returns = env.get_episode_rewards()[args.eval_episodes:]
    lengths = env.get_episode_lengths()[args.eval_episodes:]

    chosen: Counter[str] = Counter()

    def greedy_policy(obs):
        action = model.predict(obs, deterministic=True)[0]
        chosen[str(tune.template.config(action))] += 1
        return action

    ppo_mean = mean_step_reward(env, greedy_policy, args.eval_episodes, args.seed)
    greedy = ", ".join(f"{config} x{count}" for config, count in chosen.most_common())
    best = int(np.argmax(grid_rewards))
    best_config = tune.template.config(list(tune.template.grid())[best])
    print(f"ppo policy: mean reward per step {ppo_mean:.3f}; greedy choices: {greedy}")
    print(f"best configuration in the prebuild: {best_config} (reward {grid_rewards[best]:.3f})")
    print(f"ppo_mean_reward={ppo_mean:.4f} random_mean_reward={random_mean:.4f}")

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps = np.cumsum(lengths)
    per_step = np.asarray(returns) / np.maximum(np.asarray(lengths), 1)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, per_step, marker="o", ms=3, alpha=0.5, label="PPO training episodes")
    window = min(5, len(per_step))
    if window:
        smooth = np.convolve(per_step, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], smooth, color="tab:blue", lw=2, label=f"running mean of {window} episodes")
    ax.axhline(random_mean, color="gray", ls="--", label=f"uniform random ({random_mean:.2f})")
    ax.axhline(ppo_mean, color="tab:green", ls=":", label=f"PPO greedy after training ({ppo_mean:.2f})")
    ax.axhline(grid_rewards[best], color="tab:red", ls="-.", lw=1,
               label=f"best configuration, one prebuild timing ({grid_rewards[best]:.2f})")
    ax.set_xlabel("environment steps (checked and timed kernels)")
    ax.set_ylabel("mean reward per step (clipped log speedup)")
    ax.set_title(f"PPO on {args.env_id}, {args.task_id}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{args.out_name}.png", dpi=120)

    lines = [
        "# PPO on KernelTuneEnv: learning curve",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; commit {git_commit()}",
        f"- machine: {cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
        f"kernels ran on: {grid[0].device or 'n/a'}",
        f"- env: `{args.env_id}`, task `{args.task_id}`, {args.max_steps} steps per episode, repeats {args.repeats}, "
        f"verifier warmup {args.warmup}, runs {args.runs} (median)",
        f"- PPO: {args.total_timesteps} steps, n_steps {args.n_steps}, batch {args.batch_size}, "
        f"learning rate {args.learning_rate}, gamma {args.gamma}, seed {args.seed}; "
        f"prebuild took {prebuild_seconds:.0f} s, training {train_seconds:.0f} s",
        "",
        "| policy | mean reward per step |",
        "| --- | --- |",
        f"| uniform random ({args.eval_episodes} episodes) | {random_mean:.3f} |",
        f"| PPO greedy after training ({args.eval_episodes} episodes, same seeds) | {ppo_mean:.3f} |",
        f"| best configuration of the prebuild, {best_config} | {grid_rewards[best]:.3f} |",
        "",
        f"Configurations the trained policy chose (greedy, evaluation episodes): {greedy}.",
        "",
        "Prebuild (one evaluation per configuration):",
        "",
        "| configuration | status | speedup | reward |",
        "| --- | --- | --- | --- |",
    ]
    for indices, result, reward in zip(tune.template.grid(), grid, grid_rewards, strict=True):
        speedup = "n/a" if result.speedup is None else f"{result.speedup:.3f}x"
        lines.append(f"| {tune.template.config(indices)} | {result.status.value} | {speedup} | {reward:.3f} |")
    (out / f"{args.out_name}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / args.out_name}.png and .md")
    env.close()
