"""A task whose source is untrusted, judged without running any of it here (trusted side).

Holds:
    TaskFailure: the task's program failed: it raised, hung, crashed, or handed back what the judge refuses.
    SandboxedTask: the judge's hold on the process that runs one task's program (made like a candidate's).
    SandboxedProgram: stands in for the task's module in the judge: its module constants, and ``Model``,
        ``get_inputs``, ``get_init_inputs`` asked of that process.
    SandboxedModel: stands in for a built ``Model``: its parameters and buffers held here (the judge reads,
        redraws and shares them as a trusted task's), its forward run there.

A task sent to a served judge is untrusted code, as an answer is: it runs confined, in a
process made like the candidate's (:mod:`kernelgym.verifier.task_side`), and hands back plain
data only. Each reply describes its values in JSON; this side checks the description (exact
kinds, dtypes from a fixed list, shapes, bounds on items and nesting, and no more bytes of
tensors than the task's process may hold) before it makes sealed buffers of the accepted
sizes, into which the process copies the values; they are then copied out of the shared
memory. A reply that breaks any of this, a process that
crashes or does not answer within the stage's budget, ends the judgement with the task's
failure (``judge_error``: not the answer's), and the process with everything it started is
killed when the judgement ends. The judge keeps its own logic as for a trusted task (the
stand-ins have the module's and the model's shape); only what it asked the task's program
is computed there.
"""

from __future__ import annotations

import copy
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import torch

from kernelgym.verifier.channel import CandidateChannel, CandidateCrash, CandidateProtocolError, CandidateTimeout
from kernelgym.verifier.task_side import PLAIN_SCALARS
from kernelgym.verifier.trial_inputs import send_shared

__all__ = ["SandboxedModel", "SandboxedProgram", "SandboxedTask", "TaskFailure"]

_DTYPES = {str(dtype): dtype for dtype in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
_MAX_ITEMS = 10_000
_MAX_DEPTH = 8
_MAX_DIMS = 16
_MAX_TEXT = 4096


def _line(text: str, limit: int = 400) -> str:
    """``text`` on one line, trimmed (what a task's process says is shown, never trusted)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


class TaskFailure(Exception):
    """The task's program failed, or its process broke the judge's protocol; the message is one line.

    Attributes:
        process_lost: its process was killed (it crashed, hung or broke the protocol): nothing more can be asked of it.
    """

    def __init__(self, message: str, process_lost: bool = False) -> None:
        super().__init__(_line(message))
        self.process_lost = process_lost


class _Slot:
    """Where the n-th tensor of a reply goes once it is copied here."""

    def __init__(self, index: int) -> None:
        self.index = index


class _Reading:
    """A reply's description of values, checked item by item; its tensors as meta tensors (no memory) until taken."""

    def __init__(self, what: str, limit_bytes: int) -> None:
        self.what = what
        self.limit_bytes = limit_bytes
        self.items = 0
        self.bytes = 0
        self.tensors: list[torch.Tensor] = []

    def refuse(self, why: str) -> TaskFailure:
        return TaskFailure(f"{self.what} handed back {why}", process_lost=False)

    def value(self, item: Any, depth: int = 0) -> Any:
        self.items += 1
        if self.items > _MAX_ITEMS or depth > _MAX_DEPTH:
            raise self.refuse(f"more than {_MAX_ITEMS} values or values nested deeper than {_MAX_DEPTH}")
        if not isinstance(item, dict) or len(item) != 1:
            raise self.refuse("a malformed description of its values")
        ((kind, body),) = item.items()
        if kind == "value" and type(body) in PLAIN_SCALARS:
            if type(body) is int and not -(2**63) <= body < 2**63 or type(body) is str and len(body) > _MAX_TEXT:
                raise self.refuse("a number or string too large")
            return body
        if kind in ("tuple", "list") and type(body) is list:
            items = [self.value(element, depth + 1) for element in body]
            return tuple(items) if kind == "tuple" else items
        if kind == "tensor" and isinstance(body, list) and len(body) == 2:
            return self.tensor(*body)
        raise self.refuse(f"a value of a kind the judge does not take ({str(kind)[:40]!r})")

    def tensor(self, dtype_name: Any, shape: Any) -> _Slot:
        dtype = _DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
        if dtype is None:
            raise self.refuse(f"a tensor of dtype {str(dtype_name)[:40]!r}")
        if not isinstance(shape, list) or len(shape) > _MAX_DIMS or not all(type(n) is int and 0 <= n < 2**48 for n in shape):
            raise self.refuse("a tensor with a malformed shape")
        elements = 1
        for extent in shape:
            elements *= extent
        self.bytes += elements * dtype.itemsize
        if self.bytes > self.limit_bytes:
            raise self.refuse(f"tensors of more than {self.limit_bytes / 1024**3:.3g} GiB (a tensor of shape {tuple(shape)})")
        self.tensors.append(torch.empty(shape, dtype=dtype, device="meta"))
        return _Slot(len(self.tensors) - 1)


def _filled(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, _Slot):
        return tensors[value.index]
    if isinstance(value, (tuple, list)):
        return type(value)(_filled(v, tensors) for v in value)
    return value


class SandboxedTask:
    """The judge's hold on a process (made like the candidate's) that runs one task's program.

    Args:
        process: a fresh process, ready (the judge's factory of candidate processes made it).
        seconds_left: how long the next request may take (the running stage's budget).
        limit_bytes: the most bytes of tensors one reply may describe (its inputs, outputs or weights).
    """

    def __init__(self, process: CandidateChannel, seconds_left: Callable[[], float], limit_bytes: int) -> None:
        self.process: CandidateChannel | None = process
        self.seconds_left = seconds_left
        self.limit_bytes = limit_bytes
        self.loaded: dict[int, list[tuple[torch.Tensor, int]]] = {}  # the weights each model of the process holds now
        self.holders: Counter[int] = Counter()  # stand-ins alive here for each model of the process
        self.unheld: list[int] = []  # models no stand-in holds any more, dropped there with the next build

    def hold(self, model: SandboxedModel) -> None:
        """Count ``model`` as a holder of its model in the process until it is collected (copies hold it too)."""
        self.holders[model.index] += 1
        weakref.finalize(model, self._let_go, model.index)

    def _let_go(self, index: int) -> None:
        self.holders[index] -= 1
        if self.holders[index] <= 0:
            del self.holders[index]
            self.loaded.pop(index, None)
            self.unheld.append(index)

    @classmethod
    def start(cls, process: CandidateChannel, seconds_left: Callable[[], float], limit_bytes: int, source: str,
              tf32_convolutions: bool | None = None) -> SandboxedProgram:
        """Load ``source`` in ``process``, with the judge's convolution precision; the program's stand-in (the arguments
        as the class takes them).

        Raises:
            TaskFailure: the program did not load (or define ``Model``, ``get_inputs``, ``get_init_inputs``).
        """
        task = cls(process, seconds_left, limit_bytes)
        reply = task.ask("loading the task's program", "task_load", source, tf32_convolutions)
        reading = _Reading("loading the task's program", task.limit_bytes)
        described = reply.get("constants")
        if not isinstance(described, dict):
            raise reading.refuse("a malformed description of its constants")
        constants = {str(name): reading.value(value) for name, value in described.items() if not str(name).startswith("__")}
        if reading.tensors:
            raise reading.refuse("tensors among its constants")
        return SandboxedProgram(task, constants)

    def ask(self, what: str, *command: Any) -> dict[str, Any]:
        """One request within ``seconds_left()``; its reply if it succeeded.

        Raises:
            TaskFailure: the program failed (said in its reply), or its process did not answer in time,
                ended, or broke the protocol (then it is killed).
        """
        if self.process is None:
            raise TaskFailure(f"{what}: the task's process is gone after an earlier failure", process_lost=True)
        seconds = max(self.seconds_left(), 1.0)
        try:
            reply = self.process.request(command, seconds)
        except CandidateTimeout:
            self.close()
            raise TaskFailure(f"{what} did not finish within {seconds:.0f} s; the task's process was killed", process_lost=True) from None
        except CandidateCrash as exc:
            self.close()
            reason = str(exc).split("; last output:")[0]  # how it ended; what it printed is the program's
            raise TaskFailure(f"the task's process ended while {what}: {reason}", process_lost=True) from None
        except CandidateProtocolError as exc:
            self.close()
            raise TaskFailure(f"the task's process wrote on the judge's channel while {what}: {exc}", process_lost=True) from None
        if reply.get("ok") is not True:
            raise TaskFailure(str(reply.get("message") or f"{what} failed"))
        return reply

    def values(self, what: str, *command: Any) -> tuple[list[Any], dict[str, Any]]:
        """The values a command hands back (checked, then copied here), and its reply."""
        reply = self.ask(what, *command)
        reading = _Reading(what, self.limit_bytes)
        described = reply.get("values")
        if not isinstance(described, list):
            raise reading.refuse("a malformed description of its values")
        values = [reading.value(item) for item in described]
        tensors: list[torch.Tensor] = []
        if reading.tensors:
            assert self.process is not None
            shared = send_shared(self.process, reading.tensors, on_host=True)
            self.ask(what, "task_take", shared.remote)
            tensors = [buffer.clone() for buffer in shared.local]  # out of the memory the process can still write
        return [_filled(value, tensors) for value in values], reply

    def forward(self, model: SandboxedModel, inputs: list[Any]) -> Any:
        """``model``'s forward on ``inputs`` in the task's process (its weights sent first when they changed here)."""
        # The weights sent last are held (so no other tensor takes their identity) with their version counters,
        # which every in-place change bumps: the same tensors at the same versions are what the process holds.
        mark = [(v, v._version) for v in model.weights.values()]
        sent = self.loaded.get(model.index, [])
        same = len(sent) == len(mark) and all(a is b and x == y for (a, x), (b, y) in zip(sent, mark, strict=True))
        state = None if same else list(model.weights.values())
        if self.process is None:
            raise TaskFailure("running Model.forward: the task's process is gone after an earlier failure", process_lost=True)
        tensors = [v.detach() for v in inputs if isinstance(v, torch.Tensor)] + (state or [])
        remote = iter(send_shared(self.process, tensors, on_host=True, fill=True).remote if tensors else [])
        sent_inputs = [next(remote) if isinstance(v, torch.Tensor) else v for v in inputs]
        sent_state = [next(remote) for _ in state] if state is not None else None
        training = model.training if model.mode_given else None  # None: as built (KernelBench's contract)
        values, reply = self.values("running Model.forward", "task_forward", model.index, training,
                                    torch.is_grad_enabled(), sent_inputs, sent_state)
        self.loaded[model.index] = mark
        if model.device is not None:
            values = [v.to(model.device) if isinstance(v, torch.Tensor) else v for v in values]
        return values[0] if reply.get("single") is True and len(values) == 1 else tuple(values)

    def close(self) -> None:
        """Kill its process and everything it started."""
        process, self.process = self.process, None
        close = getattr(process, "close", None)
        if close is not None:
            close()


def _constants(program: SandboxedProgram) -> dict[str, Any]:
    """The program's module constants as the judge has set them (a shape variant's values included)."""
    return {name: value for name, value in vars(program).items() if not name.startswith("__")}


class SandboxedProgram:
    """The task's module as the judge sees it: its plain module constants as attributes (set by shape variants), and
    its three functions, run in the task's process.

    The judge seeds torch's generator right before it builds the reference or asks for inputs
    (``torch.manual_seed`` in :class:`~kernelgym.verifier.reference_builds.ReferenceBuilds` and
    :func:`~kernelgym.verifier.trial_inputs.draw_inputs`); that seed, ``torch.initial_seed()``, is the
    one the task's process draws from, so a sandboxed task gets the init inputs, inputs and weights a
    trusted one would.
    """

    def __init__(self, task: SandboxedTask, constants: dict[str, Any]) -> None:
        object.__setattr__(self, "__task__", task)
        self.__dict__.update(constants)

    def __setattr__(self, name: str, value: Any) -> None:
        # A shape variant (the request's own, for a sent task) sets module constants: never the stand-in's functions.
        if name.startswith("__") or name not in vars(self):
            raise TaskFailure(f"a shape variant sets {name[:60]!r}, which is none of the task's module constants")
        object.__setattr__(self, name, value)

    def Model(self, *init_inputs: Any) -> SandboxedModel:  # noqa: N802 (the task program's name)
        """``Model(*init_inputs)``, built in the task's process from the current seed."""
        task = self.__task__
        # Models no stand-in holds are dropped in the process first: a task whose weights the judge does not keep
        # (beyond ReferenceBuilds' allowance) is built once per request for its initial weights.
        dropped, task.unheld = task.unheld, []
        values, reply = task.values("building Model", "task_build", torch.initial_seed(), list(init_inputs), _constants(self), dropped)
        names, index = reply.get("names"), reply.get("model")
        if not isinstance(names, list) or len(names) != len(values) or len(set(map(str, names))) != len(names) \
                or not all(isinstance(v, torch.Tensor) for v in values) or type(index) is not int:
            raise TaskFailure("building Model handed back a malformed description of its weights")
        return SandboxedModel(task, index, OrderedDict(zip(map(str, names), values, strict=True)))

    def get_init_inputs(self) -> list[Any]:
        """``get_init_inputs()`` in the task's process, from the current seed."""
        return self.__task__.values("get_init_inputs()", "task_init_inputs", torch.initial_seed(), _constants(self))[0]

    def get_inputs(self) -> list[Any]:
        """``get_inputs()`` in the task's process, from the current seed (host tensors; the judge moves them)."""
        return self.__task__.values("get_inputs()", "task_inputs", torch.initial_seed(), _constants(self))[0]


class SandboxedModel(torch.nn.Module):
    """A ``Model`` built in the task's process: its weights held here, its forward run there on them.

    ``state_dict()`` returns the weights themselves, so what the judge changes in place (a redraw)
    is what the next forward runs with.
    """

    def __init__(self, task: SandboxedTask, index: int, weights: OrderedDict[str, torch.Tensor],
                 device: torch.device | None = None) -> None:
        super().__init__()
        self.task = task
        self.index = index
        self.weights = weights
        self.device = device
        self.mode_given = False  # no train()/eval() yet: its forward runs the task's modules in the modes they were built in
        task.hold(self)

    def train(self, mode: bool = True) -> SandboxedModel:
        """Set the mode its forward runs the task's model in (``eval()`` calls this too)."""
        self.mode_given = True
        return super().train(mode)

    def state_dict(self, *args: Any, **kwargs: Any) -> OrderedDict[str, torch.Tensor]:  # type: ignore[override]
        """Its parameters and buffers (the tensors held here, not copies)."""
        return OrderedDict(self.weights)

    def to(self, *args: Any, **kwargs: Any) -> SandboxedModel:  # type: ignore[override]
        """Move its weights, and the outputs of its forward, to a device (the one argument the judge passes)."""
        device = kwargs.get("device", args[0] if args else None)
        if device is not None:
            self.device = torch.device(device)
            self.weights = OrderedDict((name, value.to(self.device)) for name, value in self.weights.items())
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SandboxedModel:
        made = SandboxedModel(self.task, self.index, copy.deepcopy(self.weights, memo), self.device)
        made.training, made.mode_given = self.training, self.mode_given
        return made

    def forward(self, *inputs: Any) -> Any:
        """The task's forward on ``inputs``, in its process."""
        return self.task.forward(self, list(inputs))
