"""Checks that need no help from the task file: derived shape variants, redrawn weights (through the real judge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.tasks import load_task_file
from kernelgym.verifier import Status, VerifierConfig

pytestmark = pytest.mark.slow

HACKS = Path(__file__).resolve().parents[1] / "hacks" / "cpp"


def built_ahead(suite: dict, _items: list) -> list:
    """The answer this module builds (``answers_built_ahead`` in ``tests/conftest.py``)."""
    return [(suite["level1/1_ReLU"], (HACKS / "p10_shape_specialization.py").read_text())]


def test_a_task_file_without_variants_still_catches_shape_specialization(cpu_suite, cache_dir: Path, tmp_path: Path):
    # The bundled task declares variants; the same program as a bare task file (as KernelBench ships them) does not.
    path = tmp_path / "relu_task.py"
    path.write_text(cpu_suite["level1/1_ReLU"].source)
    task = load_task_file(path)
    assert task.variants == ()
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=VerifierConfig(runs=3, warmup=1)) as verifier:
        result = verifier.evaluate(task, (HACKS / "p10_shape_specialization.py").read_text())
    assert result.status is Status.INCORRECT, result.feedback
    assert "[shape-variant-mismatch]" in result.feedback


def test_variants_that_keep_the_init_inputs_reuse_the_task_s_own_models():
    from types import SimpleNamespace

    from kernelgym.verifier.judge import _same_models_first, _same_values

    # init inputs of a GEMM task: (in_features, out_features); batch_size changes only the inputs
    harness = SimpleNamespace(init_inputs_for=lambda v: [v.get("in_features", 8192), v.get("out_features", 8192)])
    base = {"batch_size": 1024, "in_features": 8192, "out_features": 8192}
    shapes = [({}, True), ({"batch_size": 129, "in_features": 513, "out_features": 513}, False),
              ({"batch_size": 192, "in_features": 768, "out_features": 768}, False), ({"batch_size": 65}, False)]
    assert _same_models_first(harness, shapes, base) == [shapes[0], shapes[3], shapes[1], shapes[2]]
    assert _same_values([8, (1, 2), 0.5], [8, (1, 2), 0.5])
    assert not _same_values([8, (1, 2)], [8, [1, 2]]) and not _same_values([1], [True]) and not _same_values([float("nan")], [float("nan")])


RNN_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))  # sized by the module constant, as in KernelBench's RNN tasks
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.h2o(self.hidden)


batch_size = 8
input_size = 64
hidden_size = 32
output_size = 16


def get_inputs():
    return [torch.rand(batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
'''


def test_an_answer_that_sizes_its_state_from_a_module_constant_is_built_for_each_shape(cache_dir: Path, tmp_path: Path):
    # Derived variants change batch_size: one of them alone (the init inputs unchanged), the others with the sizes.
    # The reference program reads batch_size in __init__, and so does its own code as the answer: each shape's
    # constants reach the answer's program, and models built for another batch size are built again.
    from kernelgym.agents.identity_agent import identity_answer

    path = tmp_path / "33_rnn.py"
    path.write_text(RNN_TASK)
    task = load_task_file(path)
    config = VerifierConfig(rules="kernelbench", runs=3, warmup=1)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        result = verifier.evaluate(task, identity_answer(task.source))
    assert result.status is Status.OK, result.feedback
    assert "3 shape variant(s)" in result.feedback
