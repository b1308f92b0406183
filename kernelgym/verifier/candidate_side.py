"""What runs in the candidate's own process: load ``ModelNew``, run it on shared buffers, report.

Holds:
    run_call: one forward, made the same way for every call (the judge times the reference through it too).
    CandidateSide: the command loop of a candidate process. It loads the
        candidate module under the backend's build hooks, builds ``ModelNew``,
        and answers each command of the trusted judge with a JSON reply.
    SharedTensor: how a buffer of the trusted side is named in a command
        (a place in a sealed memfd both processes map, for host tensors; CUDA tensors travel as IPC handles).
    map_descriptor / map_shared: map such a memfd, and a tensor inside it.

The candidate process never sees the reference, the expected outputs, the
comparison or the verdict. Everything it reports (outputs' metadata, the ATen
ops the Python guard saw, its kernel-call count, its per-call times) is an
observation the trusted side weighs: outputs are read back from the shared
buffers and compared there, per-call times are checked against the trusted
side's own clock, and what the native observer saw reaches the trusted side in
the record the observer writes itself, not in a reply.
Replies are JSON, never pickles, so nothing the candidate sends can run code
in the trusted process.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import mmap
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.backends import Backend, BuildRecord, KernelTracker
from kernelgym.backends.native import BuildError, ForbiddenSymbolsError
from kernelgym.verifier.candidate_objects import NotPlainOutput, detach, inert, plain_leaves, set_mode
from kernelgym.verifier.compare import leaf_meta
from kernelgym.verifier.guard import AtenGuard, GlobalState
from kernelgym.verifier.kernelbench_calls import kernelbench_calls
from kernelgym.verifier.placement import declared_constants, transfer_state
from kernelgym.verifier.task_side import TaskCommands

BLOCKED_MODULES = ("numpy", "cupy", "jax", "scipy", "numba")
"""Host (and foreign) array libraries a candidate process cannot import: they would compute outputs outside the guards."""

__all__ = ["BLOCKED_MODULES", "CandidateSide", "call_signature", "load_module", "SharedTensor", "map_descriptor",
           "map_shared", "run_call", "take_outputs", "error_line"]

_perf_counter = time.perf_counter


@dataclass(frozen=True)
class SharedTensor:
    """A host tensor that lives in the sealed memfd of a ``bind``, which both processes map.

    The memfd travels by descriptor beside the ``bind`` command; no path names it.

    Attributes:
        offset: where its elements start in the memfd, in bytes (aligned for every dtype).
        dtype: element type, as ``str(torch.dtype)``.
        size: shape.
        stride: strides in elements.
        span: elements it covers (every strided element).
    """

    offset: int
    dtype: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    span: int


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name.removeprefix("torch."))
    assert isinstance(value, torch.dtype)
    return value


def map_descriptor(fd: int) -> torch.Tensor:
    """The whole of a shared memfd, mapped as bytes (its size is sealed: no side can shrink it under the other)."""
    memory = mmap.mmap(fd, os.fstat(fd).st_size)
    return torch.frombuffer(memory, dtype=torch.uint8)  # the tensor holds the mapping


def map_shared(spec: SharedTensor, memory: torch.Tensor) -> torch.Tensor:
    """The tensor ``spec`` names inside ``memory`` (a :func:`map_descriptor` mapping; both sides call this)."""
    dtype = _dtype(spec.dtype)
    size = max(spec.span, 1) * dtype.itemsize
    return memory[spec.offset:spec.offset + size].view(dtype).as_strided(spec.size, spec.stride)


def error_line(exc: BaseException, program: str = "candidate") -> str:
    """``Type: message (candidate line N)``, trimmed, for feedback (``program``: the module name's prefix, see :func:`load_module`)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f"{program}_" in f.filename]
    where = f" ({program} line {frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text[:1500] + " ...") if len(text) > 1500 else text + where


def _as_if_device_present() -> None:
    """In a build-ahead worker's candidate (no GPU is visible there), ``torch.cuda.is_available()`` says what the
    judged process will see: an answer that builds only where CUDA is available asks for its build here too.
    What then needs the device fails; a build-ahead construction keeps only what was built."""
    if not torch.cuda.is_available():
        torch.cuda.is_available = lambda: True


def load_module(name: str, source: str, directory: Path) -> ModuleType:
    """Import ``source`` from a file named after its hash in ``directory`` (so ``inspect.getsource`` works)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = directory / f"{name}_{digest}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"{name}_{digest}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _unwrap(value: Any, memory: torch.Tensor | None) -> Any:
    if isinstance(value, SharedTensor):
        if memory is None:
            raise ValueError("a shared tensor came without the descriptor of its memory")
        return map_shared(value, memory)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, memory) for v in value)
    return value


def _memory(descriptors: list[int] | None) -> torch.Tensor | None:
    """The memfd that arrived with a command (at most one), mapped; every descriptor closed."""
    descriptors = descriptors or []
    try:
        return map_descriptor(descriptors[0]) if descriptors else None
    finally:
        for fd in descriptors:
            os.close(fd)


def _mapped_state(state: dict[str, Any], descriptors: list[int] | None) -> dict[str, Any]:
    """``state`` with its :class:`SharedTensor` places mapped from the memfd in ``descriptors`` (each then closed)."""
    memory = _memory(descriptors)
    return {name: _unwrap(value, memory) for name, value in state.items()}


def _forward_failure(exc: Exception) -> dict[str, Any]:
    """The reply to a command whose forward of ``ModelNew`` raised ``exc``."""
    if isinstance(exc, NotPlainOutput):
        return _not_plain(exc)
    if isinstance(exc, ForbiddenSymbolsError):
        return _forbidden(exc)
    if isinstance(exc, BuildError):  # JIT backends (Triton) compile at the first launch
        return {"ok": False, "error": "build", "message": str(exc), "log": exc.log}
    return {"ok": False, "error": "runtime", "message": f"ModelNew.forward raised {error_line(exc)}"}


def _not_plain(exc: NotPlainOutput) -> dict[str, Any]:
    return {"ok": False, "error": "illegal", "rule": exc.rule, "detail": f"the output is {exc.detail}",
            "message": "ModelNew.forward must return plain torch.Tensors, alone or in plain tuples or lists."}


def _forbidden(exc: ForbiddenSymbolsError) -> dict[str, Any]:
    return {"ok": False, "error": "illegal", "rule": exc.rule, "detail": str(exc),
            "message": "Your compiled extension links against functions a native kernel must not use."}


def call_signature(values: list[Any]) -> tuple:
    """Shapes, dtypes and devices of the tensors among ``values`` (the type name of the others).

    Example:
        >>> call_signature([torch.zeros(2, 3), 4])
        (((2, 3), torch.float32, device(type='cpu')), 'int')
    """
    return tuple((tuple(v.shape), v.dtype, v.device) if isinstance(v, torch.Tensor) else type(v).__name__ for v in values)


def run_call(model: torch.nn.Module, inputs: list[Any], backend: Backend, tracker: KernelTracker, training: bool | None, grad: bool,
             observer: Any = None, python_guard: bool = True, take: list[Any] | None = None,
             poison: bool = True, release: list[Any] | None = None, flush: bool = True) -> tuple[list[Any], dict[str, Any]]:
    """One forward as every call is made: poison memory, flush caches, guard, time, settle, take the outputs.

    Nothing of ``model``'s runs outside the watched region but its forward: its mode is set
    without calling it (:func:`set_mode`), its outputs are read without calling them
    (:func:`plain_leaves`: an output that is not plain is refused unread), and what an earlier
    call returned (``release``, emptied here) is let go once the observer is armed, so what its
    finalizers do is watched and falls inside the request the judge measures.

    Memory is poisoned in place, keyed by the call's signature (input shapes and dtypes,
    training, grad): from the second call of a signature on, the output's allocation is
    a cache hit and no driver allocation lands in the timed region or around it (on an
    H100 a 6.4 GB one cost from 1 to 20 ms, varying from call to call). ``poison=False``
    (the judge's own reference calls, whose outputs are trusted) keeps that allocator
    preparation and skips the filling. ``flush=False`` leaves out the cache flush before the call (a
    profiled call, whose kernels must be the forward's alone).

    What is timed is the forward alone, as KernelBench times it (device events around
    the call, or the host clock). Two guards can watch it: ``observer``, the native ATen
    observer below Python (a global ``RecordFunction`` callback, cheap, which also sees
    operators run with the Python key excluded), and, when ``python_guard``, the Python
    dispatch mode (:class:`AtenGuard`), which costs microseconds per operator: the judge
    turns it on only for calls whose time it does not credit.

    After the timer stops, the device is settled: the timed stream first, then every
    stream; ``pending_ms`` is how long work queued by the call kept the device busy after
    its end event (work left on a side stream). Then the outputs are taken: copied into
    ``take`` (the judge's buffers, where shape and dtype match) at once, so the values
    verified are those present when the call returned, whatever the candidate's threads
    do afterwards.

    Raises:
        NotPlainOutput: the forward returned something :func:`plain_leaves` refuses.
    """
    if training is not None:  # None: the modes the model's modules hold (KernelBench's contract calls no train())
        set_mode(model, training)
    guard = AtenGuard() if python_guard else None
    timer = backend.call_timer()
    if observer is not None:
        observer.arm(every=python_guard)
    try:
        if release is not None:
            release.clear()  # before the poisoning: the memory it frees is poisoned too
        backend.poison_memory((call_signature(inputs), training, grad), fill=poison)
        if flush:
            timer.flush()
        with torch.set_grad_enabled(grad), tracker.watching(), (guard if guard is not None else contextlib.nullcontext()):
            timer.start()
            output = model(*inputs)
            timer.stop()
        pending_ms = timer.settle()
        try:
            leaves = plain_leaves(output)
        finally:
            del output  # an output refused goes here, still watched
        if take is not None:
            take_outputs(leaves, take)
            backend.synchronize()
    finally:
        if observer is not None:
            observer.disarm()  # what it saw goes to the judge from C++, in its record (kernelgym.backends.aten_observer)
    storages = {v.untyped_storage().data_ptr() for v in inputs if isinstance(v, torch.Tensor) and v.numel()}
    return leaves, {
        "ok": True,
        "ms": timer.elapsed_ms(),
        "pending_ms": pending_ms,
        "leaves": [leaf_meta(leaf, storages) for leaf in leaves],
        "ops": sorted(guard.compute_ops) if guard is not None else [],  # the Python guard's; the observer's are in its record
        "kernel_calls": tracker.calls,
    }


def take_outputs(leaves: list[Any], buffers: list[Any]) -> None:
    """Copy each output leaf into its buffer (only plain tensors of exact shape and dtype; the others are judged on their metadata).

    The leaves are :func:`plain_leaves`' (read through ``torch.Tensor``'s own slots: nothing of the candidate's runs).
    """
    with torch.no_grad():
        for leaf, buffer in zip(leaves, buffers, strict=False):
            if buffer is not None and type(leaf) is torch.Tensor and leaf.shape == buffer.shape and leaf.dtype == buffer.dtype:
                buffer.copy_(detach(leaf))


class _Allocator(torch.nn.Module):
    """A forward that does nothing but allocate outputs like ``like`` (the judge's probe of the harness's cost)."""

    def __init__(self, like: list[Any]) -> None:
        super().__init__()
        self.like = [t for t in like if isinstance(t, torch.Tensor)]

    def forward(self, *_inputs: Any) -> list[torch.Tensor]:
        return [torch.empty_like(t) for t in self.like]


class CandidateSide(TaskCommands):
    """The candidate process's side of the judge protocol (and, in a process of its own, a task's: :class:`TaskCommands`).

    Args:
        backend: the target backend (its build hooks, device, synchronization).
        work_dir: the candidate's private directory (module files go here).
        build_root: the content-addressed build cache.
        observer: the ATen observer below Python (:mod:`kernelgym.backends.aten_observer`), if it could be built.
        watch_state: snapshot the process's global state before the answer loads, and report what it changed
            (``False`` only in a build-ahead worker's candidates, which are never judged).
    """

    def __init__(self, backend: Backend, work_dir: Path, build_root: Path, observer: Any = None, watch_state: bool = True) -> None:
        super().__init__()
        self.backend = backend
        self.observer = observer
        self.work_dir = work_dir
        self.build_root = build_root
        self.tracker = KernelTracker()
        self.builds: list[BuildRecord] = []
        self.device = backend.device()
        self.state = GlobalState.capture() if watch_state else None
        if not watch_state and backend.device_type == "cuda":
            _as_if_device_present()
        self.module: ModuleType | None = None
        self.model: torch.nn.Module | None = None
        self.inputs: list[Any] = []
        self.outputs: list[torch.Tensor | None] = []
        self.kept: list[Any] = []  # what the last call or probe returned (a fetch reads it again)
        self.held: list[Any] = []  # what earlier calls returned, let go in the next call (see run_call's ``release``)
        self.working: list[Any] = []
        self.working_for: list[Any] | None = None

    # --- commands -------------------------------------------------------------------------

    def handle(self, command: tuple) -> dict[str, Any]:
        """Run one command of the trusted side; the reply is JSON-serialisable."""
        name, args = command[0], command[1:]
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            return {"ok": False, "error": "protocol", "message": f"unknown command {name!r}"}
        return handler(*args)

    def cmd_ping(self) -> dict[str, Any]:
        return {"ok": True}

    def cmd_reuse(self) -> dict[str, Any]:
        """From now on, on a host, torch's freed memory is handed out again most recently freed first, per size.

        Said to both processes of a host's timed calls (the candidate's and the reference's twin) just before
        them. glibc hands out the free chunks of a size oldest first: a process whose history left several free
        chunks of a call's buffer size moves each call's temporaries and outputs through all of them in turn, and
        ran the same forward 25-45% slower than one that reused one chunk (``benchmarks/results/calibration.md``).
        Reused most recently freed first, every call of both processes works in the same few blocks, whatever
        either process did before.
        """
        if self.device.type != "cpu" or self.observer is None:
            return {"ok": True, "reusing": False}
        return {"ok": True, "reusing": self.observer.reuse_host_blocks(True)}

    def cmd_load(self, code: str, tf32_convolutions: bool | None = None) -> dict[str, Any]:
        """Import the answer (the build hooks of :meth:`serve` route its builds to the trusted side), first setting the
        judge's convolution precision (``None``: this process's), which then counts as the state the answer found."""
        if tf32_convolutions is not None and self.module is None:
            torch.backends.cudnn.allow_tf32 = bool(tf32_convolutions)
            if self.state is not None:
                self.state = GlobalState.capture()
        try:
            self.module = load_module("candidate", code, self.work_dir)
        except ForbiddenSymbolsError as exc:
            return self._with_builds(_forbidden(exc))
        except BuildError as exc:
            return self._with_builds({"ok": False, "error": "build", "message": str(exc), "log": exc.log})
        except ModuleNotFoundError as exc:
            if exc.name in BLOCKED_MODULES:
                return self._with_builds({"ok": False, "error": "illegal", "rule": "host-array-library", "detail": exc.name,
                                          "message": f"Your program imports {exc.name}, a host array library."})
            return self._with_builds({"ok": False, "error": "load", "message": f"Loading your program raised {error_line(exc)}"})
        except Exception as exc:
            return self._with_builds({"ok": False, "error": "load", "message": f"Loading your program raised {error_line(exc)}"})
        model_new = getattr(self.module, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            return self._with_builds({"ok": False, "error": "format", "message": "`ModelNew` must be a subclass of torch.nn.Module."})
        bases = [cls.__name__ for cls in model_new.__mro__]
        return self._with_builds({"ok": True, "mro": bases, "state": self._state_changes()})

    def cmd_construct(self, seed: int, init_inputs: list[Any], state: dict[str, Any],
                      constants: dict[str, Any] | None = None, descriptors: list[int] | None = None) -> dict[str, Any]:
        """Build ``ModelNew(*init_inputs)`` from ``seed``, after setting the shape's module ``constants`` the program defines.

        ``state`` and ``descriptors`` are as :meth:`cmd_state` takes them.
        """
        assert self.module is not None
        state = _mapped_state(state, descriptors)
        for name, value in (constants or {}).items():
            if hasattr(self.module, name) and isinstance(value, (bool, int, float, str, tuple)):
                setattr(self.module, name, value)
        torch.manual_seed(seed)
        try:
            self.model = self.module.ModelNew(*init_inputs)
        except ForbiddenSymbolsError as exc:
            return _forbidden(exc)
        except BuildError as exc:  # a load_inline in __init__
            return {"ok": False, "error": "build", "message": str(exc), "log": exc.log}
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew(*get_init_inputs()) raised {error_line(exc)}"}
        return self.cmd_state(state, compare=True)

    def cmd_state(self, state: dict[str, Any], descriptors: list[int] | None = None, compare: bool = False) -> dict[str, Any]:
        """Load the reference's parameters and buffers (see :func:`~kernelgym.verifier.placement.transfer_state`), then move to the device.

        ``state`` holds tensors, or :class:`SharedTensor` places in the memfd whose descriptor (at most one)
        arrived with the command. The reply's ``unplaced`` names the reference tensors that found no place
        in ``ModelNew``, its ``unfilled`` the tensors of ``ModelNew`` that received none, its ``constant``
        the entries of ``ModelNew.constant_weights`` (:func:`~kernelgym.verifier.placement.declared_constants`);
        with ``compare`` (at construction), its ``differed`` the reference tensors whose value differed from what
        ``ModelNew``'s own ``__init__`` had put there.
        """
        assert self.model is not None
        state = _mapped_state(state, descriptors)
        try:
            constant = declared_constants(self.model)
        except TypeError as exc:
            return {"ok": False, "error": "format", "message": str(exc)}
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"reading ModelNew.constant_weights raised {error_line(exc)}"}
        differed: list[str] = []
        try:
            unplaced, unfilled = transfer_state(self.model, state, differed if compare else None)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"loading the reference's weights into ModelNew raised {error_line(exc)}"}
        try:
            self.model.to(self.device)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew.to({self.device}) raised {error_line(exc)}"}
        return {"ok": True, "state": self._state_changes(), "unplaced": unplaced, "unfilled": unfilled, "constant": constant,
                "differed": differed}

    def cmd_place(self, seed: int) -> dict[str, Any]:
        """KernelBench's move before each of its trials: seeded, ``ModelNew.to(device, dtype=torch.float32)``.

        The move is not idle for every model: an RNN flattens its weights into new memory, so a CUDA graph
        captured over the old weights reads freed memory afterwards (``level3/35_LSTM`` of CUDA-L1's answers).
        """
        assert self.model is not None
        torch.manual_seed(seed)
        try:
            self.model.to(device=self.device, dtype=torch.float32)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew.to({self.device}, torch.float32) raised {error_line(exc)}"}
        return {"ok": True, "state": self._state_changes()}

    def cmd_bind(self, inputs: list[Any], outputs: list[Any], descriptors: list[int] | None = None) -> dict[str, Any]:
        """Take the trusted side's input buffers and the buffers outputs are copied into on ``fetch``.

        ``descriptors`` (at most one: the memfd of the host buffers) arrived with the command;
        each is mapped, then closed.
        """
        memory = _memory(descriptors)
        self.inputs = [_unwrap(v, memory) for v in inputs]
        self.outputs = [_unwrap(v, memory) for v in outputs]
        self.held, self.kept = [*self.held, *self.kept], []
        return {"ok": True}

    def cmd_call(self, training: bool | None, grad: bool, python_guard: bool = True) -> dict[str, Any]:
        """One forward, always the same way (see :func:`run_call`); its outputs are taken into the judge's buffers at return.

        ``python_guard=False`` is honoured only where the native observer watches the call.
        """
        assert self.model is not None
        release, self.held, self.kept = [*self.held, *self.kept], [], []
        if inert(release):  # plain tensors: let go here, as the reference's twin does, outside the measured call
            release = None
        try:
            leaves, reply = self._made_call(self.model, self.tracker, training, grad, python_guard, release)
        except Exception as exc:
            return _forward_failure(exc)
        self.kept = leaves
        reply["state"] = self._state_changes()
        return reply

    def _made_call(self, model: torch.nn.Module, tracker: KernelTracker, training: bool | None, grad: bool,
                   python_guard: bool, release: list[Any] | None = None) -> tuple[list[Any], dict[str, Any]]:
        """:func:`run_call` on the working inputs, whatever ``forward`` did to them copied back where the judge looks."""
        inputs = self._working_inputs()
        leaves, reply = run_call(model, inputs, self.backend, tracker, training, grad, self.observer,
                                 python_guard or self.observer is None, self.outputs, release=release)
        for shared, working in zip(self.inputs, inputs, strict=True):
            if working is not shared:
                shared.copy_(working)
        return leaves, reply

    def _working_inputs(self) -> list[Any]:
        """The inputs a call is made on: on a host, private copies of the shared buffers, refreshed before each call.

        The reference reads inputs from its own process's memory, freshly written; a forward reading the judge's
        shared mapping instead (4 KiB pages) ran slower after every switch between the two processes (the bundled
        ReLU's identity answer: about 0.70x with the shared mapping, 0.77x with private copies, on 2 cores).
        Inputs whose strides overlap (expanded views) are used where they are.
        """
        if self.device.type != "cpu":
            return self.inputs
        if self.working_for is not self.inputs:
            self.working = [torch.empty_strided(v.size(), v.stride(), dtype=v.dtype) if isinstance(v, torch.Tensor) else v
                            for v in self.inputs]
            self.working_for = self.inputs
        try:
            for working, shared in zip(self.working, self.inputs, strict=True):
                if isinstance(shared, torch.Tensor):
                    working.copy_(shared)
        except RuntimeError:  # an overlapping layout cannot be written element by element
            return self.inputs
        return self.working

    def cmd_probe(self, training: bool | None, grad: bool) -> dict[str, Any]:
        """A call made exactly as :meth:`cmd_call` makes one, of a judge's module that only allocates the outputs.

        The judge measures it from outside to know what the harness costs around a forward in this process,
        so nothing of the candidate's may run in it: the last call's outputs are let go here only when that
        runs none of its code (:func:`_inert`), else in the next call. Its outputs are kept until the next
        request, as a call's are: the next call then frees and poisons as much memory after a probe as after
        a call. (With a call's outputs still held, a probe poisoned one output's worth less than a call does,
        and that fill, about 1.2 ms for a 4 GB output on an H200, was taken for the answer's own time when
        the audit compared the two.)
        """
        if not inert(self.kept):
            self.held += self.kept
        self.kept = []
        leaves, reply = self._made_call(_Allocator(self.outputs), KernelTracker(), training, grad, False)
        self.kept = leaves
        reply["state"] = self._state_changes()
        return reply

    def cmd_profile(self, calls: int) -> dict[str, Any]:
        """``calls`` watched forwards (eval mode, no gradients) under PyTorch's profiler: each kernel's device time, in us.

        Each is made as :meth:`cmd_call` makes a call, without what the harness adds on the device around it (the
        cache flush, the memory's poisoning, the outputs' copy into the judge's buffers), so that every kernel the
        profile holds is one the forwards launched (:mod:`kernelgym.verifier.kernel_share`). Their outputs are
        let go, unread, before the reply.
        """
        assert self.model is not None
        from torch.profiler import ProfilerActivity, profile

        kernels: dict[str, float] = {}
        reply: dict[str, Any] = {"ok": True}
        ops: set[str] = set()
        if self.observer is not None:
            self.observer.arm(every=True)  # once for the whole request: the judge reads one record per request
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as profiler:
                for _ in range(calls):
                    release, self.held, self.kept = [*self.held, *self.kept], [], []
                    self.kept, reply = run_call(self.model, self._working_inputs(), self.backend, self.tracker, False, False,
                                                None, True, None, poison=False, release=release, flush=False)
                    ops.update(reply["ops"])
                self.backend.synchronize()
            for event in profiler.events():
                if event.device_type != torch.autograd.DeviceType.CPU:
                    name = str(event.name)[:300]
                    kernels[name] = kernels.get(name, 0.0) + float(event.time_range.elapsed_us())
        except NotPlainOutput as exc:
            return _not_plain(exc)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"the profiled forward raised {error_line(exc)}"}
        finally:
            if self.observer is not None:
                self.observer.disarm()
        longest = sorted(kernels.items(), key=lambda item: -item[1])[:200]
        reply["kernels"] = [[name, us] for name, us in longest]
        reply["ops"] = sorted(ops)
        reply["state"] = self._state_changes()
        return reply

    def cmd_kernelbench_time(self, trials: int, keep_call: int) -> dict[str, Any]:
        """``trials`` calls of ``ModelNew`` timed as KernelBench times them (:func:`kernelbench_calls`) on the bound
        inputs, the native observer sampling them as it samples credited calls; the outputs of call ``keep_call`` are
        taken into the judge's buffers. Asked of a process that has done nothing since ``ModelNew`` was built."""
        assert self.model is not None
        kept: list[Any] = []
        if self.observer is not None:
            self.observer.arm(every=False)
        try:
            times, pending = kernelbench_calls(self.model, self._working_inputs(), self.backend, trials, keep_call, kept.append)
            leaves = plain_leaves(kept[0])
            take_outputs(leaves, self.outputs)
            self.backend.synchronize()
        except Exception as exc:
            return _forward_failure(exc)
        finally:
            if self.observer is not None:
                self.observer.disarm()
        storages = {v.untyped_storage().data_ptr() for v in self.inputs if isinstance(v, torch.Tensor) and v.numel()}
        return {"ok": True, "ms": times, "pending_ms": pending, "leaves": [leaf_meta(leaf, storages) for leaf in leaves],
                "state": self._state_changes()}

    def cmd_fetch(self) -> dict[str, Any]:
        """Copy what the kept outputs hold now over the judge's buffers (the judge compares it with what was taken at return)."""
        try:
            self.backend.synchronize()
            take_outputs(self.kept, self.outputs)
            self.backend.synchronize()
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"reading your output raised {error_line(exc)}"}
        return {"ok": True}

    # --- helpers ----------------------------------------------------------------------------

    def _with_builds(self, reply: dict[str, Any]) -> dict[str, Any]:
        reply["builds"] = [[b.key, b.seconds, b.cache_hit] for b in self.builds]
        return reply

    def _state_changes(self) -> list[str]:
        return GlobalState.capture().changes_since(self.state) if self.state is not None else []

    def serve(self, receive: Any, send_bytes: Any) -> None:
        """Answer commands ``(name, nonce, *args)`` until ``exit`` or a closed channel; replies echo the nonce.

        The backend's build hooks stay installed for the process's whole life, so a ``load_inline`` called
        in ``__init__`` or ``forward`` goes where one called at import goes: to the trusted side, asked on
        this channel under the nonce of the command that is running (see :mod:`kernelgym.verifier.channel`).
        """
        running = [""]

        def request_build(request: dict[str, Any]) -> dict[str, Any]:
            send_bytes(json.dumps({"build": request, "nonce": running[0]}).encode())
            answer = receive()
            if not (isinstance(answer, tuple) and len(answer) == 3 and answer[:2] == ("built", running[0])):
                raise BuildError("the judge did not answer the build request")
            return answer[2]

        with self.backend.build_hooks(self.build_root, self.tracker, self.builds, request_build):
            while True:
                try:
                    name, nonce, *args = receive()
                except (EOFError, OSError):
                    return
                if name == "exit":
                    return
                running[0] = nonce
                try:
                    reply = self.handle((name, *args))
                except MemoryError:
                    reply = {"ok": False, "error": "runtime", "message": "The candidate ran out of memory (the sandbox's memory limit was hit)."}
                reply["nonce"] = nonce
                send_bytes(json.dumps(reply, default=repr).encode())
