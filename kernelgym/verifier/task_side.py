"""What a sandboxed process does with a task whose source is untrusted: run its program, hand back plain data.

Holds:
    TaskCommands: the commands a candidate process answers for a task's program (mixed into
        :class:`~kernelgym.verifier.candidate_side.CandidateSide`): load it, draw its init inputs and
        inputs, build its ``Model``, run its ``forward``, and copy what the last command kept into
        buffers the judge made.
    describe: the JSON description of plain values (tensors by dtype and shape, numbers, strings, tuples, lists).
    NotPlainValue: a value ``describe`` refuses.

A task sent to a served judge is a program like any answer: it runs in a process
made like the candidate's, confined the same way (:mod:`kernelgym.executor.candidate`),
never in the judge's. Its values never travel as pickles: a reply describes them
(:func:`describe`), the judge checks that description and makes sealed buffers of
the sizes it accepts, and the values are copied into those (``task_take``). What
the judge receives is data only, whatever the program's objects were
(:mod:`kernelgym.verifier.sandboxed_task`).
"""

from __future__ import annotations

from typing import Any

import torch

from kernelgym.verifier.candidate_objects import NotPlainOutput, plain_leaves

__all__ = ["NotPlainValue", "PLAIN_SCALARS", "TaskCommands", "describe"]

PLAIN_SCALARS = (bool, int, float, str, type(None))
"""The values besides tensors that cross from a task's process to the judge (inside tuples and lists too)."""

_TASK_NAMES = ("Model", "get_inputs", "get_init_inputs")


class NotPlainValue(TypeError):
    """A value of the task's program that is not plain data; the message names its type."""


def describe(values: list[Any], tensors: list[torch.Tensor]) -> list[Any]:
    """The JSON description of ``values``; their tensors are appended to ``tensors``, in the order described.

    A tensor is ``{"tensor": [dtype, shape]}``, a scalar ``{"value": v}``, a tuple or list
    ``{"tuple": [...]}`` or ``{"list": [...]}``. Only exact types are taken: a subclass could run code
    when it is read.

    Raises:
        NotPlainValue: a value of another type (or a tensor that is not a dense one).

    Example:
        >>> found = []
        >>> describe([torch.zeros(2, 3), (3, 3), 0.5], found)
        [{'tensor': ['torch.float32', [2, 3]]}, {'tuple': [{'value': 3}, {'value': 3}]}, {'value': 0.5}]
        >>> len(found)
        1
    """
    described = []
    for value in values:
        kind = type(value)
        if isinstance(value, torch.Tensor) and kind in (torch.Tensor, torch.nn.Parameter):
            if value.layout != torch.strided or value.device.type == "meta":
                raise NotPlainValue(f"a {value.layout} tensor on {value.device.type}")
            tensors.append(value.detach())
            described.append({"tensor": [str(value.dtype), list(value.shape)]})
        elif kind in PLAIN_SCALARS:
            described.append({"value": value})
        elif kind in (tuple, list):
            described.append({kind.__name__: describe(list(value), tensors)})
        else:
            raise NotPlainValue(f"a {kind.__module__}.{kind.__qualname__}")
    return described


def _failed(what: str, exc: BaseException) -> dict[str, Any]:
    from kernelgym.verifier.candidate_side import error_line

    return {"ok": False, "error": "task", "message": f"{what} raised {error_line(exc, 'task')}"}


class TaskCommands:
    """The commands of a process that runs a task's program for the judge (``task_*``; see the module docstring).

    The program is loaded once; its module constants are set from each command's ``constants`` (a shape
    variant's); values a command returns are kept until ``task_take`` copies them into the judge's buffers.
    """

    device: torch.device
    work_dir: Any

    def __init__(self) -> None:
        self.task_program: Any = None
        self.task_models: list[torch.nn.Module | None] = []
        self.task_kept: list[torch.Tensor] = []

    def _reply(self, what: str, values: list[Any], **extra: Any) -> dict[str, Any]:
        tensors: list[torch.Tensor] = []
        try:
            described = describe(values, tensors)
        except NotPlainValue as exc:
            return {"ok": False, "error": "task",
                    "message": f"{what} returned {exc}, not plain data (tensors, numbers, strings, tuples and lists of them)"}
        self.task_kept = tensors
        return {"ok": True, "values": described, **extra}

    def _program(self, constants: dict[str, Any]) -> Any:
        program = self.task_program
        for name, value in constants.items():
            setattr(program, name, value)
        return program

    def cmd_task_load(self, source: str, tf32_convolutions: bool | None = None) -> dict[str, Any]:
        """Import the task's program, with the judge's convolution precision (``None``: this process's); reply with its
        module constants that are plain scalars or tuples of them."""
        from kernelgym.verifier.candidate_side import load_module

        if tf32_convolutions is not None:
            torch.backends.cudnn.allow_tf32 = bool(tf32_convolutions)
        try:
            program = load_module("task", source, self.work_dir)
        except BaseException as exc:  # noqa: BLE001 (SystemExit included: the program's failure, said in the reply)
            return _failed("loading the task's program", exc)
        missing = [name for name in _TASK_NAMES if not callable(getattr(program, name, None))]
        if missing:
            return {"ok": False, "error": "task", "message": f"the task's program does not define {', '.join(missing)}"}
        self.task_program = program
        constants = {}
        for name, value in vars(program).items():
            tensors: list[torch.Tensor] = []
            try:
                described = describe([value], tensors)[0]
            except NotPlainValue:
                continue
            if not name.startswith("__") and not tensors:
                constants[name] = described
        return {"ok": True, "constants": constants}

    def cmd_task_init_inputs(self, seed: int, constants: dict[str, Any]) -> dict[str, Any]:
        """``get_init_inputs()`` from ``seed``."""
        program = self._program(constants)
        torch.manual_seed(seed)
        try:
            values = list(program.get_init_inputs())
        except BaseException as exc:  # noqa: BLE001
            return _failed("get_init_inputs()", exc)
        return self._reply("get_init_inputs()", values)

    def cmd_task_inputs(self, seed: int, constants: dict[str, Any]) -> dict[str, Any]:
        """``get_inputs()`` from ``seed``, drawn on the device where the task can (as the judge draws a trusted task's)."""
        program = self._program(constants)
        try:
            torch.manual_seed(seed)
            try:
                with torch.device(self.device):
                    values = list(program.get_inputs())
            except Exception:  # a task that only works on the host
                torch.manual_seed(seed)
                values = list(program.get_inputs())
        except BaseException as exc:  # noqa: BLE001
            return _failed("get_inputs()", exc)
        return self._reply("get_inputs()", values)

    def cmd_task_build(self, seed: int, init_inputs: list[Any], constants: dict[str, Any], dropped: list[int]) -> dict[str, Any]:
        """``Model(*init_inputs)`` from ``seed`` (its weights drawn on the host, then moved to the device), once the
        models ``dropped`` are let go; the reply names it and describes its parameters and buffers (``names``, in
        ``state_dict`` order)."""
        for index in dropped:
            self.task_models[index] = None
        program = self._program(constants)
        torch.manual_seed(seed)
        try:
            model = program.Model(*init_inputs)
            if not isinstance(model, torch.nn.Module):
                return {"ok": False, "error": "task", "message": f"Model(...) returned a {type(model).__qualname__}, not an nn.Module"}
            model.to(self.device)
            state = model.state_dict()
        except BaseException as exc:  # noqa: BLE001
            return _failed("Model(*get_init_inputs())", exc)
        self.task_models.append(model)
        return self._reply("Model.state_dict()", list(state.values()), model=len(self.task_models) - 1, names=[str(name) for name in state])

    def cmd_task_forward(self, model: int, training: bool | None, grad: bool, inputs: list[Any], state: list[Any] | None,
                         descriptors: list[int] | None = None) -> dict[str, Any]:
        """The forward of the model ``model`` (with ``state`` loaded first, in ``state_dict`` order, when given) on ``inputs``.

        ``inputs`` and ``state`` hold :class:`~kernelgym.verifier.candidate_side.SharedTensor` places in the memfd
        that arrived with the command; this process reads them and keeps copies of its own. The reply describes the
        output's leaves (``single``: it was one tensor, not a tuple or list).
        """
        from kernelgym.verifier.candidate_side import _memory, _unwrap

        memory = _memory(descriptors)
        module = self.task_models[model]
        if module is None:
            return {"ok": False, "error": "task", "message": f"the judge asked for model {model}, which it let go"}
        try:
            with torch.no_grad():
                if state is not None:
                    for target, value in zip(module.state_dict().values(), state, strict=True):
                        target.copy_(_unwrap(value, memory))
                values = [v.to(self.device, copy=True) if isinstance(v, torch.Tensor) else v for v in _unwrap(inputs, memory)]
            del memory
            if training is not None:  # None: as built
                module.train(training)
            with torch.set_grad_enabled(grad):
                output = module(*values)
            leaves = plain_leaves(output)
        except NotPlainOutput as exc:
            return {"ok": False, "error": "task", "message": f"Model.forward returned {exc.detail}, not plain tensors"}
        except BaseException as exc:  # noqa: BLE001
            return _failed("Model.forward", exc)
        return self._reply("Model.forward", leaves, single=type(output) is torch.Tensor)

    def cmd_task_take(self, places: list[Any], descriptors: list[int] | None = None) -> dict[str, Any]:
        """Copy the tensors the last command kept into the judge's buffers (``places`` in the memfd that came with it)."""
        from kernelgym.verifier.candidate_side import _memory, map_shared

        memory = _memory(descriptors)
        kept, self.task_kept = self.task_kept, []
        if memory is None and places:
            return {"ok": False, "error": "task", "message": "the judge's buffers did not arrive"}
        try:
            with torch.no_grad():
                for place, value in zip(places, kept, strict=True):
                    map_shared(place, memory).copy_(value.to("cpu"))
        except Exception as exc:  # a value changed since it was described
            return _failed("handing its values to the judge", exc)
        return {"ok": True}
