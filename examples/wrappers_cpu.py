"""PrimeEcho rewards and Buffered Dynamic Retry on the CPU suite, played by a scripted policy.

The env is ``gym.make("kernelgym/CPU-v0")`` wrapped in ``BufferedDynamicRetry`` (each task is
served to a group of episodes; a group that never succeeds comes back later as a repair task
whose prompt shows its best failed attempt and the verifier's feedback) and ``PrimeEcho``
(the first attempt is paid in full, later turns only for improvement, discounted).

The scripted policy stands in for an LLM. On a fresh task it first answers with a PyTorch
fallback (the verifier rejects it as illegal) and then, on its second turn, with the task's
bundled C++ solution; but on some tasks (``struggle``) it never gets past the fallback, so the
whole group fails. Shown a repair prompt, it answers with the bundled solution at once.

    python examples/wrappers_cpu.py --groups 4 --group-size 2
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

import kernelgym  # noqa: F401  (registers the environments)
from kernelgym.options import parse_options
from kernelgym.tasks import Task, load_suite
from kernelgym.wrappers import BufferedDynamicRetry, PrimeEcho
from kernelgym.wrappers.retry import PREVIOUS_ATTEMPT_HEADER

FALLBACK_ANSWER = """```python
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        return torch.relu(inputs[0])
```"""


@dataclass
class Args:
    seed: int = 0
    """seed of the env (task choice, repair mixing) and of the scripted policy"""
    groups: int = 4
    """task groups to play"""
    group_size: int = 2
    """episodes per task (the GRPO group size)"""
    max_turns: int = 2
    """attempts per episode"""
    num_tasks: int = 2
    """play only the first tasks of level 1 (each needs one C++ build, cached afterwards)"""
    mix_ratio: float = 0.5
    """probability that a group is a repair group when the buffer holds one"""
    max_retries: int = 2
    """re-bufferings of a failing repair task before it is dropped"""
    alpha: float = 0.5
    """PrimeEcho anchor weight of the first attempt"""
    gamma: float = 0.9
    """PrimeEcho discount per turn of later improvements"""
    struggle: float = 0.5
    """probability that the scripted policy cannot solve a fresh task (so its group fails)"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


def make_env(args: Args):
    def thunk() -> gym.Env:
        suite = load_suite("cpu").filter(level=1, limit=args.num_tasks)
        env = gym.make("kernelgym/CPU-v0", suite=suite, max_turns=args.max_turns)
        env = BufferedDynamicRetry(
            env, group_size=args.group_size, mix_ratio=args.mix_ratio, max_retries=args.max_retries
        )
        return PrimeEcho(env, alpha=args.alpha, gamma=args.gamma)

    return thunk


def scripted_answer(task: Task, obs: dict, struggling: bool) -> str:
    """The bundled solution on a repair prompt or a later turn; the PyTorch fallback otherwise."""
    if PREVIOUS_ATTEMPT_HEADER in obs["prompt"]:
        return task.solution("cpp")
    if struggling or obs["turn"] == 0:
        return FALLBACK_ANSWER
    return task.solution("cpp")


if __name__ == "__main__":
    args = parse_args()
    env = make_env(args)()
    suite = load_suite("cpu")
    rng = np.random.default_rng(args.seed)
    returns, start = [], time.time()

    for group in range(args.groups):
        for episode in range(args.group_size):
            obs, info = env.reset(seed=args.seed if group == episode == 0 else None)
            task, repair = suite[info["task_id"]], info["retry"]["repair"]
            if episode == 0:
                struggling = not repair and rng.random() < args.struggle
            statuses, rewards, done = [], [], False
            while not done:
                obs, reward, terminated, truncated, info = env.step(scripted_answer(task, obs, struggling))
                statuses.append(f"{info['status']}:{info['score']:.2f}")
                rewards.append(float(reward))
                done = terminated or truncated
            returns.append(sum(rewards))
            print(
                f"group {group} episode {episode} {'repair' if repair else 'fresh '} {task.id:<24} "
                f"attempts {' '.join(statuses):<34} PrimeEcho rewards {[round(r, 3) for r in rewards]} "
                f"return {returns[-1]:.3f}"
            )
        stats = info["retry"]
        print(
            f"  buffer: size {stats['size']} pushed {stats['pushed']} draws {stats['draws']} "
            f"recovered {stats['recovered']} retried {stats['retried']} dropped {stats['dropped']}"
        )

    print(f"episodes {len(returns)} mean return {np.mean(returns):.3f} wall {time.time() - start:.1f}s")
    env.close()
