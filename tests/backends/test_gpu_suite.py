"""The bundled ``gpu`` suite, checked without a GPU: its shape, its tasks and its reference answers.

The answers themselves are judged on a GPU in ``tests/gpu`` (and the Triton
ones under the interpreter in ``test_triton.py``); here every answer passes
the static rules of its backend and every task program runs on the CPU at
each of its shape variants.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelgym.tasks import Task, load_suite
from kernelgym.verifier.inspect import inspect_program

SUITE = load_suite("gpu")
ANSWERS = [(task.id, backend) for task in SUITE for backend in sorted(task.solutions)]


def run_reference(task: Task, overrides: dict[str, Any]) -> tuple[list[Any], Any]:
    """Execute the task program (trusted, bundled) with module-level overrides; return inputs and output."""
    namespace: dict[str, Any] = {}
    exec(compile(task.source, task.id, "exec"), namespace)  # noqa: S102 (our own bundled task files)
    namespace.update(overrides)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    inputs = namespace["get_inputs"]()
    with torch.no_grad():
        return inputs, model(*inputs)


def test_suite_has_enough_tasks_and_answers() -> None:
    assert len(SUITE) >= 15
    assert {task.level for task in SUITE} == {1, 2}
    assert sum("cuda" in task.solutions for task in SUITE) >= 10
    assert sum("triton" in task.solutions for task in SUITE) >= 5
    assert all(task.solutions for task in SUITE)


def test_relu_task_is_the_one_the_hack_corpus_targets() -> None:
    task = SUITE["level1/1_ReLU"]
    namespace: dict[str, Any] = {}
    exec(compile(task.source, task.id, "exec"), namespace)  # noqa: S102
    (x,) = namespace["get_inputs"]()
    assert x.shape == (4096, 4096) and x.dtype == torch.float32
    assert "torch.relu(x)" in task.source


@pytest.mark.parametrize(("task_id", "backend"), ANSWERS)
def test_reference_answer_passes_the_static_rules(task_id: str, backend: str) -> None:
    assert inspect_program(SUITE[task_id].solution(backend), backend) == ()


@pytest.mark.parametrize("task_id", SUITE.ids())
def test_task_runs_at_every_shape_variant(task_id: str) -> None:
    task = SUITE[task_id]
    assert len(task.variants) >= 2
    for variant in task.variants:
        inputs, output = run_reference(task, dict(variant))
        assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in inputs)
        assert isinstance(output, torch.Tensor) and output.numel() >= 1
        assert bool(torch.isfinite(output.double()).all())
