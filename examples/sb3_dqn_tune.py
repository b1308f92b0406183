"""DQN (stable-baselines3) tunes a templated C++ kernel, with every configuration numbered as one Discrete action.

DQN needs a ``Discrete`` action space; ``MultiDiscreteToDiscrete`` numbers the template's grid
(``Discrete(prod(nvec))``). The grid is built once up front, then DQN explores it; at the end the
greedy configuration and its mean reward are printed next to a uniform random policy's.

    python examples/sb3_dqn_tune.py --total-timesteps 256
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from kernelgym.envs.tune_env import MultiDiscreteToDiscrete, mean_step_reward, register_tune_envs
from kernelgym.errors import require_extra
from kernelgym.options import parse_options
from kernelgym.verifier import VerifierConfig


@dataclass
class Args:
    env_id: str = "kernelgym/Tune-CPU-v0"
    """the environment id"""
    task_id: str = "level1/14_Small_Matmul"
    """the task whose template is tuned"""
    total_timesteps: int = 256
    """DQN training steps (each one a checked and timed kernel)"""
    max_steps: int = 8
    """tuning steps per episode"""
    repeats: int = 1
    """independent evaluations per step (median speedup)"""
    warmup: int = 2
    """untimed calls before timing, per evaluation"""
    runs: int = 10
    """timed calls per evaluation (the verifier takes their median)"""
    learning_starts: int = 32
    """steps of random exploration before DQN learns"""
    exploration_fraction: float = 0.5
    """fraction of training over which epsilon falls to its final value"""
    learning_rate: float = 1e-3
    """DQN learning rate"""
    eval_episodes: int = 2
    """episodes for the random baseline and for the greedy policy, on the same seeds"""
    num_workers: int = 2
    """verifier worker processes (the prebuild compiles in parallel)"""
    seed: int = 0
    """seed of DQN, of the random policy and of the evaluation episodes"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


def make_env(args: Args) -> gym.Env:
    register_tune_envs()
    config = VerifierConfig(warmup=args.warmup, runs=args.runs)
    env = gym.make(args.env_id, task_id=args.task_id, max_steps=args.max_steps, repeats=args.repeats,
                   verifier_config=config, num_workers=args.num_workers)
    return MultiDiscreteToDiscrete(env)


if __name__ == "__main__":
    args = parse_args()
    sb3 = require_extra("stable_baselines3", "sb3")
    env = make_env(args)
    tune = env.unwrapped
    failed = [r for r in tune.prebuild() if not r.ok]
    print(f"prebuilt {tune.template.size} configurations of {args.task_id} ({len(failed)} failed)")

    env.action_space.seed(args.seed)
    random_mean = mean_step_reward(env, lambda _obs: env.action_space.sample(), args.eval_episodes, args.seed)

    model = sb3.DQN("MultiInputPolicy", env, learning_starts=args.learning_starts, learning_rate=args.learning_rate,
                    exploration_fraction=args.exploration_fraction, train_freq=1, batch_size=32,
                    target_update_interval=32, seed=args.seed, verbose=0)
    model.learn(total_timesteps=args.total_timesteps)

    def greedy(obs):
        return int(model.predict(obs, deterministic=True)[0])

    dqn_mean = mean_step_reward(env, greedy, args.eval_episodes, args.seed)
    choice = greedy(env.reset(seed=args.seed)[0])
    print(f"greedy configuration: #{choice} = {tune.template.config(env.action(choice))}")
    print(f"dqn_mean_reward={dqn_mean:.4f} random_mean_reward={random_mean:.4f}")
    env.close()
