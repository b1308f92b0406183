"""The rule preset's convolution precision reaches the judge's reference: under ``kernelbench`` cuDNN's TF32 (PyTorch's
default, kept in KernelBench's process), under ``native`` full fp32. A reference that reads the flag shows which."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.tasks import Task
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.presets import get_preset

pytestmark = pytest.mark.slow

REFERENCE = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * (1.0 if torch.backends.cudnn.allow_tf32 else 2.0)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""

ANSWER = """import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def test_the_presets_say_which_precision_convolutions_compute_in() -> None:
    assert get_preset("kernelbench").tf32_convolutions and not get_preset("native").tf32_convolutions


def test_under_the_kernelbench_preset_the_reference_computes_with_tf32_convolutions(cache_dir: Path) -> None:
    task = Task(id="level1/0_Precision", name="Precision", level=1, problem_id=0, source=REFERENCE, suite="test")
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir,
                  config=VerifierConfig(runs=3, warmup=1, rules="kernelbench")) as verifier:
        result = verifier.evaluate(task, ANSWER)
    assert result.status is Status.OK, result.feedback  # the reference multiplied by 1.0: it found TF32 on
