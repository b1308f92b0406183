"""A task judged sandboxed (its program run in a process of its own) is judged as the same task trusted is.

The description a task's process sends is checked here before any memory is made for it; weights
go to that process only when they changed here, and models no stand-in holds are dropped there;
the judgements compare a sandboxed task with the trusted one under the same seed.
"""

from __future__ import annotations

import copy
import dataclasses
import gc

import pytest
import torch

from kernelgym.tasks import load_suite
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier.sandboxed_task import SandboxedProgram, SandboxedTask, TaskFailure, _Reading
from kernelgym.verifier.task_side import NotPlainValue, describe

LIMIT = 16 * 1024**3  # bytes of tensors one reply may describe (the default memory limit of a task's process)


def built_ahead(suite: dict, _items: list) -> list:
    """The answer judged here, built before the first test (``answers_built_ahead``, ``tests/conftest.py``)."""
    return [(suite["level2/1_Linear_ReLU"], suite["level2/1_Linear_ReLU"].solution("cpp"))]


def test_plain_values_are_described_and_read_back() -> None:
    tensors: list[torch.Tensor] = []
    described = describe([torch.zeros(2, 3), (3, [4, "same"]), None, True, 0.5], tensors)
    reading = _Reading("get_inputs()", LIMIT)
    values = [reading.value(item) for item in described]
    assert values[1:] == [(3, [4, "same"]), None, True, 0.5]
    assert [(t.shape, t.dtype, t.device.type) for t in reading.tensors] == [(torch.Size([2, 3]), torch.float32, "meta")]


@pytest.mark.parametrize("value", [object(), torch.nn.Linear(2, 2), {"a": 1}, torch.zeros(2).to_sparse(), b"bytes"])
def test_the_task_s_process_refuses_to_describe_what_is_not_plain_data(value: object) -> None:
    with pytest.raises(NotPlainValue):
        describe([value], [])


def _nested(depth: int) -> dict[str, object]:
    item: dict[str, object] = {"value": 1}
    for _ in range(depth):
        item = {"list": [item]}
    return item


@pytest.mark.parametrize(("item", "why"), [
    ({"tensor": ["torch.float32", [2**40]]}, "GiB"),
    ({"tensor": ["torch.float32", [2**20, 2**20]]}, "GiB"),
    ({"tensor": ["torch.quint8", [2]]}, "dtype"),
    ({"tensor": ["__import__('os')", [2]]}, "dtype"),
    ({"tensor": ["torch.float32", [-1]]}, "shape"),
    ({"tensor": ["torch.float32", [1.5]]}, "shape"),
    ({"tensor": ["torch.float32", [1] * 17]}, "shape"),
    ({"value": 2**70}, "too large"),
    ({"value": "x" * 10_000}, "too large"),
    ({"value": {"nested": 1}}, "kind"),
    ({"object": "os.system"}, "kind"),
    ({"value": 1, "tensor": ["torch.float32", [1]]}, "malformed"),
    ("a string", "malformed"),
    (_nested(10), "nested"),
    ({"list": [{"value": 1}] * 20_000}, "more than"),
])
def test_a_description_the_judge_does_not_take_is_refused_before_any_memory_is_made(item: object, why: str) -> None:
    reading = _Reading("get_inputs()", LIMIT)
    with pytest.raises(TaskFailure, match=why) as refused:
        reading.value(item)
    assert not refused.value.process_lost and "\n" not in str(refused.value)
    assert sum(t.numel() * t.element_size() for t in reading.tensors) <= LIMIT


@pytest.mark.parametrize("weights", ["fixed", "seeded", "redrawn"])
def test_a_sandboxed_task_gets_the_verdict_and_the_values_of_the_trusted_one(cpu_verifier, weights: str) -> None:  # noqa: ANN001
    from kernelgym import Verifier

    task = load_suite("cpu")["level2/1_Linear_ReLU"]  # weights drawn from the seed, redrawn in one trial
    config = VerifierConfig(trials=3, timing=False, seed=1234, weights=weights)
    # One verifier each (its seeds are drawn from the config's in turn), over the session's executor, left open.
    trusted = Verifier(backend="cpp", executor=cpu_verifier.executor, config=config).evaluate(task, task.solution("cpp"))
    sandboxed = Verifier(backend="cpp", executor=cpu_verifier.executor, config=config).evaluate(
        dataclasses.replace(task, sandboxed=True), task.solution("cpp"))
    assert trusted.status.value == sandboxed.status.value == "ok", sandboxed.feedback + sandboxed.judge_reason
    assert sandboxed.seeds == trusted.seeds
    if weights != "redrawn":  # the same inputs and weights, so the same errors (a redraw's noise is drawn here, after
        # the inputs: from another generator state when they were drawn in the task's process)
        assert (sandboxed.max_abs_error, sandboxed.max_rel_error) == (trusted.max_abs_error, trusted.max_rel_error)


class _FakeTaskProcess:
    """A task's process that answers every command at once (a model of one weight ``w``, outputs of one tensor)."""

    def __init__(self) -> None:
        self.commands: list[tuple] = []
        self.builds = 0

    def request(self, command: tuple, timeout: float) -> dict[str, object]:
        self.commands.append(command)
        one = [{"tensor": ["torch.float32", [2]]}]
        if command[0] == "task_build":
            self.builds += 1
            return {"ok": True, "values": one, "names": ["w"], "model": self.builds - 1}
        if command[0] == "task_forward":
            return {"ok": True, "values": one, "single": True}
        return {"ok": True}

    def send_descriptors(self, fds: list[int]) -> None:
        pass


def test_weights_go_to_the_task_s_process_when_they_changed_and_models_let_go_are_dropped() -> None:
    process = _FakeTaskProcess()
    program = SandboxedProgram(SandboxedTask(process, lambda: 10.0, LIMIT), {"dim": 2})  # type: ignore[arg-type]
    model = program.Model()
    sent = []
    for change in (False, False, True, False):
        if change:
            model.state_dict()["w"].add_(1.0)  # a redraw, in place
        output = model(torch.zeros(2))
        assert isinstance(output, torch.Tensor) and output.shape == (2,)
        sent.append(process.commands[-2][5] is not None)  # task_forward's state (the command before its take)
    assert sent == [True, False, True, False]
    copied = copy.deepcopy(model)
    copied(torch.zeros(2))
    assert process.commands[-2][5] is not None  # a copy's weights are other tensors: sent
    del model, copied
    gc.collect()
    program.Model()
    assert process.commands[-2][0] == "task_build" and process.commands[-2][4] == [0]  # its models to drop


@pytest.mark.parametrize("name", ["Model", "get_inputs", "__task__", "__class__", "not_defined"])
def test_a_shape_variant_sets_only_the_task_s_module_constants(name: str) -> None:
    program = SandboxedProgram(SandboxedTask(_FakeTaskProcess(), lambda: 10.0, LIMIT), {"dim": 2})  # type: ignore[arg-type]
    program.dim = 3
    with pytest.raises(TaskFailure, match="none of the task's module constants"):
        setattr(program, name, 1)
    assert vars(program)["dim"] == 3 and callable(program.Model)
