"""A random agent on kernelgym/CPU-v0: random text as answers, to show the loop and what the verifier says.

Random text never contains a ``ModelNew`` program, so every attempt is a fast
``format_error`` with reward 0 and each episode is truncated after ``max_turns``.

    python examples/random_agent.py --episodes 2 --max-turns 3
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

import kernelgym  # noqa: F401  (registers the environments)
from kernelgym.options import parse_options


@dataclass
class Args:
    env_id: str = "kernelgym/CPU-v0"
    """the environment id"""
    episodes: int = 2
    """episodes to play"""
    max_turns: int = 3
    """attempts per episode"""
    answer_chars: int = 200
    """length of each random answer"""
    seed: int = 0
    """seed of the task draw and of the random answers"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


if __name__ == "__main__":
    args = parse_args()
    env = gym.make(args.env_id, max_turns=args.max_turns)
    env.action_space.seed(args.seed)
    for episode in range(args.episodes):
        obs, info = env.reset(seed=args.seed + episode)
        print(f"episode {episode}: task {info['task_id']} ({len(obs['prompt'])} prompt chars)")
        episode_return, done = 0.0, False
        while not done:
            answer = env.action_space.sample(mask=(args.answer_chars, None))
            obs, reward, terminated, truncated, info = env.step(answer)
            episode_return += reward
            done = terminated or truncated
            first_line = obs["feedback"].splitlines()[0] if obs["feedback"] else ""
            print(f"  turn {obs['turn']}: status={info['status']} reward={reward:.3f} | {first_line}")
        print(f"  return {episode_return:.3f} terminated={terminated} truncated={truncated}")
    env.close()
