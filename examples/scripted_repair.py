"""The multi-turn loop: answer, read the verifier's feedback, repair, answer again.

A scripted stand-in for an LLM plays one episode on level1/1_ReLU of
kernelgym/CPU-v0. Its first answer names the class wrongly (``format_error``),
its second calls ``torch.relu`` in ``forward`` (``illegal``: a PyTorch fallback),
and its third, written after reading that feedback, is the bundled C++ kernel,
which builds, checks and is timed (the first build takes a few seconds; later
runs hit the build cache).

    python examples/scripted_repair.py
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

import kernelgym  # noqa: F401  (registers the environments)
from kernelgym.options import parse_options


@dataclass
class Args:
    task_id: str = "level1/1_ReLU"
    """the task to repair a kernel for"""
    max_turns: int = 4
    """attempts allowed"""
    success_speedup: float = 0.0
    """speedup that ends the episode (0: correct is enough)"""


FALLBACK_ANSWER = """```python
import torch
import torch.nn as nn


class {name}(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
```"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


def scripted_agent(status: str, native_solution: str) -> str:
    """Answer for the latest status: what an LLM reading the feedback would be expected to fix."""
    if status == "":  # first turn: a plausible but misnamed answer
        return FALLBACK_ANSWER.format(name="FastReLU")
    if status == "format_error":  # the feedback asks for class ModelNew
        return FALLBACK_ANSWER.format(name="ModelNew")
    return native_solution  # illegal (or anything else): write the computation in native code


if __name__ == "__main__":
    args = parse_args()
    env = gym.make("kernelgym/CPU-v0", max_turns=args.max_turns, success_speedup=args.success_speedup)
    obs, info = env.reset(seed=0, options={"task_id": args.task_id})
    native_solution = env.unwrapped.task.solution("cpp")
    print(f"task {info['task_id']}: prompt of {len(obs['prompt'])} characters")
    done = False
    while not done:
        answer = scripted_agent(info["status"], native_solution)
        obs, reward, terminated, truncated, info = env.step(answer)
        done = terminated or truncated
        print(f"\n--- turn {obs['turn']}: status={info['status']} reward={reward:.3f} "
              f"terminated={terminated} truncated={truncated}")
        print(obs["feedback"][:600])
    env.close()
