"""The ``triton`` backend: ``@triton.jit`` kernels, on a GPU or in Triton's interpreter.

Holds:
    TritonBackend: runs candidates on the GPU when PyTorch sees one; otherwise
        under Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors, so a
        machine without a GPU (CI) still checks Triton candidates for real.
        Interpreter timings are marked not meaningful and never reported as speedups.
    interpreter_requested: whether ``TRITON_INTERPRET`` asks for the interpreter.

Kernel launches are counted by wrapping ``run`` of Triton's kernel classes
(``JITFunction`` and the interpreter's ``InterpretedFunction``): ``kernel[grid](...)``
and autotuned kernels all go through it, so a forward that launches nothing is
caught as a decoy. The wrapper stays for the worker's lifetime (launches happen
after the candidate module is loaded) and reports to the tracker of the job
being judged; a worker judges one job at a time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

from kernelgym.backends.base import Backend, BuildRecord, KernelTracker, register_backend
from kernelgym.backends.cuda import GpuBackend
from kernelgym.backends.native import BuildError

__all__ = ["TritonBackend", "interpreter_requested"]


def interpreter_requested() -> bool:
    """Whether ``TRITON_INTERPRET`` is set to a true value in this process.

    Example:
        >>> import os
        >>> os.environ.get("TRITON_INTERPRET") in (None, "0") or interpreter_requested()
        True
    """
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


class _LaunchCounter:
    """Where wrapped Triton launches report: the tracker of the job in progress."""

    tracker: KernelTracker | None = None
    installed = False


def _counting(run: Callable[..., Any]) -> Callable[..., Any]:
    from triton.compiler.errors import CompilationError

    @functools.wraps(run)
    def counted_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("warmup", False) and _LaunchCounter.tracker is not None:
            _LaunchCounter.tracker.record(getattr(getattr(self, "fn", None), "__name__", "triton_kernel"))
        try:
            return run(self, *args, **kwargs)
        except CompilationError as exc:
            raise BuildError(f"Triton could not compile the kernel: {exc}", log=str(exc)) from None

    return counted_run


def _unbenchmarked(self: Any, *args: Any, config: Any, **meta: Any) -> list[float]:
    # Equal timings: the autotuner keeps its first config.
    return [0.0, 0.0, 0.0]


def _install_launch_counter(interpreted: bool) -> None:
    """Wrap ``run`` of Triton's kernel classes once per process.

    Under the interpreter without a GPU there is no device to benchmark
    autotuning configs on (Triton raises "0 active drivers"), and their timings
    would mean nothing: the autotuner then takes its first config.
    """
    if _LaunchCounter.installed:
        return
    from triton.runtime import autotuner, interpreter, jit

    for cls in (jit.JITFunction, interpreter.InterpretedFunction):
        cls.run = _counting(cls.run)
    if interpreted:
        autotuner.Autotuner._bench = _unbenchmarked
    _LaunchCounter.installed = True


@register_backend("triton")
class TritonBackend(GpuBackend):
    """``@triton.jit`` kernels launched from ``ModelNew.forward``.

    On a machine without a GPU the worker runs Triton's interpreter on CPU
    tensors: correctness is checked for real, timing is skipped and flagged
    ``timing-not-meaningful``.

    Example:
        >>> from kernelgym.backends import get_backend
        >>> backend = get_backend("triton")
        >>> backend.device().type in ("cuda", "cpu")
        True
    """

    language = (
        "Triton: @triton.jit kernels (import triton, triton.language as tl) launched as kernel[grid](...) from "
        "ModelNew.forward; forward may only allocate outputs (torch.empty_like) and launch kernels; inputs are "
        "CUDA tensors (CPU tensors under Triton's interpreter)"
    )

    def unavailable_reason(self) -> str | None:
        """Triton must be importable (on a machine without a GPU its interpreter is used)."""
        if importlib.util.find_spec("triton") is None:
            return "Triton is not installed (`pip install 'kernelgym[triton]'`, or `pip install triton`)"
        return None

    @property
    def interpreted(self) -> bool:
        """Whether kernels run in Triton's interpreter (no GPU, or ``TRITON_INTERPRET=1``)."""
        return interpreter_requested() or not self.device_available()

    @property
    def host_array_libraries_needed(self) -> bool:
        """Yes: Triton's interpreter and parts of its runtime import NumPy, so a Triton candidate may too
        (the static rules still refuse NumPy compute in ``forward``)."""
        return True

    @property
    def timing_meaningful(self) -> bool:
        """Interpreter timings measure Python, not the kernel: not meaningful."""
        return not self.interpreted

    @property
    def address_space_limit_ok(self) -> bool:
        """Only without a GPU (the CUDA runtime reserves huge virtual ranges)."""
        return not self.device_available()

    def worker_environment(self, device_index: int | None = None) -> dict[str, str]:
        """Pin the worker to its GPU; without a GPU, turn the interpreter on before Triton is imported.

        A worker given a device index has a GPU (an executor pins workers only to devices it has, a Ray actor to the
        one Ray gave it): torch is not asked, which would import it in the caller first.
        """
        if device_index is None and not self.device_available():
            return {"TRITON_INTERPRET": "1"}
        return super().worker_environment(device_index)

    def writable_paths(self, build_root: Path) -> tuple[str, ...]:
        """The GPU device files, when there is a GPU."""
        return super().writable_paths(build_root) if self.device_available() else ()

    def device(self) -> Any:
        """The GPU, or the CPU under the interpreter without a GPU."""
        import torch

        return torch.device("cuda" if self.device_available() else "cpu")

    def device_name(self) -> str:
        """The GPU's name, or the CPU's with a note that the interpreter ran."""
        if self.device_available():
            return super().device_name()
        return f"{Backend.device_name(self)} (Triton interpreter)"

    def prepare_worker(self, build_root: Path) -> None:
        """Set up the GPU (when there is one) and count launches from now on."""
        super().prepare_worker(build_root)
        _install_launch_counter(self.interpreted and not self.device_available())

    def prepare_factory(self) -> None:
        """Let Triton's compiler install its process-wide signal handlers now, before any candidate is forked.

        The first MLIR pass manager run in a process registers LLVM's crash handlers (SIGHUP, SIGQUIT,
        SIGUSR1/2, SIGTERM, SIGXCPU, SIGXFSZ, SIGSYS). Left to a candidate's first kernel launch, that
        would read to the judge as the candidate changing its signal handlers (``process-state-changed``).
        Run once here on an empty module (milliseconds, no device), the handlers are inherited by every
        candidate and part of the baseline; a handler the candidate installs still shows.
        """
        if self.interpreted:
            return  # the interpreter never runs the compiler
        try:
            from triton._C import libtriton

            context = libtriton.ir.context()
            libtriton.ir.load_dialects(context)
            module = libtriton.ir.builder(context).create_module()
            manager = libtriton.ir.pass_manager(context)
            try:
                manager.run(module, "kernelgym-warmup")
            except TypeError:  # Triton before 3.6: run(module)
                manager.run(module)
        except Exception as exc:  # noqa: BLE001 (a Triton without these bindings: the first compile installs them)
            print(f"kernelgym: Triton's compiler could not be warmed before forking ({type(exc).__name__}: {exc}); "
                  "a Triton answer may be reported as changing its signal handlers", flush=True)

    def synchronize(self) -> None:
        """Wait for the GPU (nothing to wait for under the interpreter on the CPU)."""
        if self.device_available():
            super().synchronize()

    def poison_memory(self, signature: Hashable = None, fill: bool = True) -> None:
        """Poison the GPU allocator's free blocks (the CPU allocator returns fresh pages)."""
        if self.device_available():
            super().poison_memory(signature, fill)

    def call_timer(self) -> Any:
        """Device events on the GPU; the host clock (not meaningful) under the interpreter."""
        return super().call_timer() if self.device_available() else Backend.call_timer(self)

    @contextlib.contextmanager
    def build_hooks(self, build_root: Path, tracker: KernelTracker, log: list[BuildRecord],
                    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Iterator[None]:
        """Send launches to this job's tracker (Triton compiles lazily, at the first launch), and keep
        Triton's compiled kernels in a cache of this process's own.

        Triton's JIT cache holds code it loads without checking it: shared between answers, one answer
        could plant kernels for the next. In a candidate's process ``HOME`` is its own directory.
        """
        _install_launch_counter(self.interpreted and not self.device_available())
        _LaunchCounter.tracker = tracker
        shared = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = str(Path.home() / ".triton" / "cache")
        try:
            yield
        finally:
            if shared is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = shared
