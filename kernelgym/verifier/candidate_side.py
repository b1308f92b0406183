"""What runs in the candidate's own process: load ``ModelNew``, run it on shared buffers, report.

Holds:
    run_call: one forward, made the same way for every call (the judge times the reference through it too).
    CandidateSide: the command loop of a candidate process. It loads the
        candidate module under the backend's build hooks, builds ``ModelNew``,
        and answers each command of the trusted judge with a JSON reply.
    SharedTensor: how a buffer of the trusted side is named in a command
        (a file both processes map, for host tensors; CUDA tensors travel as IPC handles).

The candidate process never sees the reference, the expected outputs, the
comparison or the verdict. Everything it reports (outputs' metadata, the ATen
ops it saw, its kernel-call count, its per-call times) is an observation the
trusted side weighs: outputs are read back from the shared buffers and compared
there, and per-call times are checked against the trusted side's own clock.
Replies are JSON, never pickles, so nothing the candidate sends can run code
in the trusted process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.backends import Backend, BuildRecord, KernelTracker, native
from kernelgym.backends.native import BuildError, ForbiddenSymbolsError
from kernelgym.verifier.compare import flatten_outputs, leaf_meta
from kernelgym.verifier.guard import AtenGuard, GlobalState, compute_ops

BLOCKED_MODULES = ("numpy", "cupy", "jax", "scipy", "numba")
"""Host (and foreign) array libraries a candidate process cannot import: they would compute outputs outside the guards."""

__all__ = ["BLOCKED_MODULES", "CandidateSide", "call_signature", "load_module", "SharedTensor", "map_shared", "run_call", "error_line"]

_perf_counter = time.perf_counter


@dataclass(frozen=True)
class SharedTensor:
    """A host tensor that lives in a file both processes map (``torch.from_file(shared=True)``).

    Attributes:
        path: the file (in the candidate's directory).
        dtype: element type, as ``str(torch.dtype)``.
        size: shape.
        stride: strides in elements.
        span: elements the file holds (covers every strided element).
    """

    path: str
    dtype: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    span: int


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name.removeprefix("torch."))
    assert isinstance(value, torch.dtype)
    return value


def map_shared(spec: SharedTensor) -> torch.Tensor:
    """Map the file named by ``spec`` as a tensor (both sides call this)."""
    flat = torch.from_file(spec.path, shared=True, size=max(spec.span, 1), dtype=_dtype(spec.dtype))
    return flat.as_strided(spec.size, spec.stride)


def error_line(exc: BaseException) -> str:
    """``Type: message (candidate line N)``, trimmed, for feedback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "candidate_" in f.filename]
    where = f" (candidate line {frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text[:1500] + " ...") if len(text) > 1500 else text + where


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


def _unwrap(value: Any) -> Any:
    if isinstance(value, SharedTensor):
        return map_shared(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


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


def run_call(model: torch.nn.Module, inputs: list[Any], backend: Backend, tracker: KernelTracker, training: bool, grad: bool,
             observer: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """One forward as every call is made: poison memory, flush caches, guard, time, synchronize, describe the outputs.

    Memory is poisoned in place, keyed by the call's signature (input shapes and dtypes,
    training, grad): from the second call of a signature on, the output's allocation is
    a cache hit and no driver allocation lands in the timed region or around it (on an
    H100 a 6.4 GB one cost from 1 to 20 ms, varying from call to call).

    Two guards watch every call: the Python dispatch mode (:class:`AtenGuard`) and,
    when given, ``observer``, a global ``RecordFunction`` callback that also sees
    operators run with the Python key excluded or Python modes disabled. The judge
    runs the reference through this very function when it times it, so the harness
    costs the same on both sides and drops out of the comparison.
    """
    model.train(training)
    backend.poison_memory((call_signature(inputs), training, grad))
    guard = AtenGuard()
    timer = backend.call_timer()
    timer.flush()
    if observer is not None:
        observer.arm()
    try:
        with torch.set_grad_enabled(grad), tracker.watching(), guard:
            timer.start()
            output = model(*inputs)
            timer.stop()
        backend.synchronize()
    finally:
        seen = observer.disarm() if observer is not None else []
    leaves = flatten_outputs(output)
    storages = {v.untyped_storage().data_ptr() for v in inputs if isinstance(v, torch.Tensor) and v.numel()}
    return leaves, {
        "ok": True,
        "ms": timer.elapsed_ms(),
        "leaves": [leaf_meta(leaf, storages) for leaf in leaves],
        "ops": sorted(set(guard.compute_ops) | set(compute_ops([name for name in seen if name.startswith("aten::")]))),
        "kernel_calls": tracker.calls,
    }


class CandidateSide:
    """The candidate process's side of the judge protocol.

    Args:
        backend: the target backend (its build hooks, device, synchronization).
        work_dir: the candidate's private directory (module files go here).
        build_root: the content-addressed build cache.
        observer: the ATen observer below Python (:mod:`kernelgym.backends.aten_observer`), if it could be built.
    """

    def __init__(self, backend: Backend, work_dir: Path, build_root: Path, observer: Any = None) -> None:
        self.backend = backend
        self.observer = observer
        self.work_dir = work_dir
        self.build_root = build_root
        self.tracker = KernelTracker()
        self.builds: list[BuildRecord] = []
        self.device = backend.device()
        self.state = GlobalState.capture()
        self.module: ModuleType | None = None
        self.model: torch.nn.Module | None = None
        self.inputs: list[Any] = []
        self.outputs: list[torch.Tensor | None] = []
        self.kept: list[Any] = []

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

    def cmd_load(self, code: str, admitted_concerns: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
        native.ADMITTED_CONCERNS.update(admitted_concerns)
        try:
            with self.backend.build_hooks(self.build_root, self.tracker, self.builds):
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

    def cmd_construct(self, seed: int, init_inputs: list[Any], state: dict[str, torch.Tensor]) -> dict[str, Any]:
        assert self.module is not None
        torch.manual_seed(seed)
        try:
            self.model = self.module.ModelNew(*init_inputs)
        except ForbiddenSymbolsError as exc:
            return _forbidden(exc)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew(*get_init_inputs()) raised {error_line(exc)}"}
        return self.cmd_state(state)

    def cmd_state(self, state: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Load the reference's parameters and buffers where names and shapes match, then move to the device."""
        assert self.model is not None
        own = self.model.state_dict()
        with torch.no_grad():
            for key, value in state.items():
                if key in own and own[key].shape == value.shape:
                    own[key].copy_(value)
        try:
            self.model.to(self.device)
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew.to({self.device}) raised {error_line(exc)}"}
        return {"ok": True, "state": self._state_changes()}

    def cmd_bind(self, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
        """Take the trusted side's input buffers and the buffers outputs are copied into on ``fetch``."""
        self.inputs = [_unwrap(v) for v in inputs]
        self.outputs = [_unwrap(v) for v in outputs]
        self.kept = []
        return {"ok": True}

    def cmd_call(self, training: bool, grad: bool) -> dict[str, Any]:
        """One forward, always the same way (see :func:`run_call`); outputs kept for ``fetch``."""
        assert self.model is not None
        self.kept = []
        try:
            leaves, reply = run_call(self.model, self.inputs, self.backend, self.tracker, training, grad, self.observer)
        except ForbiddenSymbolsError as exc:
            return _forbidden(exc)
        except BuildError as exc:  # JIT backends (Triton) compile at the first launch
            return {"ok": False, "error": "build", "message": str(exc), "log": exc.log}
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"ModelNew.forward raised {error_line(exc)}"}
        self.kept = leaves
        reply["state"] = self._state_changes()
        return reply

    def cmd_fetch(self) -> dict[str, Any]:
        """Copy the kept outputs into the trusted side's buffers (only exact shape and dtype matches)."""
        try:
            for leaf, buffer in zip(self.kept, self.outputs, strict=False):
                if buffer is not None and isinstance(leaf, torch.Tensor) and leaf.shape == buffer.shape and leaf.dtype == buffer.dtype:
                    buffer.copy_(leaf.detach())
            self.backend.synchronize()
        except Exception as exc:
            return {"ok": False, "error": "runtime", "message": f"reading your output raised {error_line(exc)}"}
        return {"ok": True}

    # --- helpers ----------------------------------------------------------------------------

    def _with_builds(self, reply: dict[str, Any]) -> dict[str, Any]:
        reply["builds"] = [[b.key, b.seconds, b.cache_hit] for b in self.builds]
        return reply

    def _state_changes(self) -> list[str]:
        return GlobalState.capture().changes_since(self.state)

    def serve(self, receive: Any, send_bytes: Any) -> None:
        """Answer commands ``(name, nonce, *args)`` until ``exit`` or a closed channel; replies echo the nonce."""
        while True:
            try:
                name, nonce, *args = receive()
            except (EOFError, OSError):
                return
            if name == "exit":
                return
            try:
                reply = self.handle((name, *args))
            except MemoryError:
                reply = {"ok": False, "error": "runtime", "message": "The candidate ran out of memory (the sandbox's memory limit was hit)."}
            reply["nonce"] = nonce
            send_bytes(json.dumps(reply, default=repr).encode())
