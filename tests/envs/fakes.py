"""Small real stand-ins for the envs tests: a toy suite (the fake verifier is ``tests/fakes.py``'s).

Holds:
    FakeVerifier: re-exported from ``tests.fakes``.
    toy_suite: three tiny KernelBench-format tasks.
"""

from __future__ import annotations

from kernelgym.tasks.task import Task, TaskSuite

from ..fakes import FakeVerifier

__all__ = ["FakeVerifier", "toy_suite"]

_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.{op}(x)


def get_inputs():
    return [torch.randn(16, 4096)]


def get_init_inputs():
    return []
'''


def toy_suite() -> TaskSuite:
    """Three single-op tasks (ReLU, Sigmoid, Tanh) in KernelBench format."""
    ops = ("relu", "sigmoid", "tanh")
    names = ("ReLU", "Sigmoid", "Tanh")
    tasks = tuple(
        Task(id=f"level1/{i}_{name}", name=name, level=1, problem_id=i, source=_SOURCE.format(op=op), suite="toy")
        for i, (name, op) in enumerate(zip(names, ops, strict=True), start=1)
    )
    return TaskSuite("toy", tasks)
