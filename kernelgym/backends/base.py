"""The contract every backend fulfils, and the backend registry.

Holds:
    KernelTracker: counts native kernel entry-point calls/launches (decoy detection).
    Backend: base class of a target (how to build, launch, synchronize, time).
    register_backend: decorator adding a Backend subclass to the registry.
    get_backend: instantiate a registered backend by name.
    backend_names: names of the registered backends.

A backend is used in two places. In the caller's process only the cheap,
trusted parts run (``unavailable_reason``, the prompt text). Everything else
runs inside a sandboxed worker process: ``build_hooks`` intercepts the
candidate's build calls (``load_inline``, ``@triton.jit``) so builds go through
the content-addressed cache and every native entry point is counted;
``call_timer`` times one call with the right synchronization for the device.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from kernelgym.errors import BackendUnavailableError
from kernelgym.registry import Registry

__all__ = [
    "KernelTracker", "BuildRecord", "Backend", "HostTimer", "median_and_iqr", "paired_ratio", "register_backend", "get_backend", "backend_names",
    "backend_language",
]


class KernelTracker:
    """Counts calls of native kernels while it is armed.

    Backends wrap every native entry point they build (extension functions,
    Triton launches) so that each call does ``tracker.record(name)``. The
    verifier arms the tracker around ``ModelNew.forward``: a forward that ran no
    native code at all used a decoy kernel.
    """

    def __init__(self) -> None:
        self.armed = False
        self.calls = 0
        self.names: set[str] = set()

    def record(self, name: str) -> None:
        """Note one call of the native entry point ``name`` (ignored unless armed)."""
        if self.armed:
            self.calls += 1
            self.names.add(name)

    @contextlib.contextmanager
    def watching(self) -> Iterator[KernelTracker]:
        """Arm the tracker, counting from zero, for the duration of the block."""
        self.calls, self.names, self.armed = 0, set(), True
        try:
            yield self
        finally:
            self.armed = False


@dataclass(frozen=True)
class BuildRecord:
    """One native build a candidate asked for, as seen by the build hooks.

    Attributes:
        key: content address of the build (sources, flags, toolchain).
        seconds: wall time the build (or the cache lookup) took.
        cache_hit: served from the cache without compiling.
    """

    key: str
    seconds: float
    cache_hit: bool


_host_clock = time.perf_counter
"""``time.perf_counter`` as it was when this module was imported, before any candidate ran: a candidate that
rebinds ``time.perf_counter`` in its process (``type(time).__setattr__``, restored at its first use) does not
reach the timer."""


class HostTimer:
    """Times one call with ``time.perf_counter`` (host devices); GPU backends use device events."""

    def __init__(self) -> None:
        self.begin = self.end = 0.0

    def flush(self) -> None:
        """Nothing to evict on a host device."""

    def start(self) -> None:
        """Mark the start of the call."""
        self.begin = _host_clock()

    def stop(self) -> None:
        """Mark its end."""
        self.end = _host_clock()

    def settle(self) -> float:
        """Nothing is queued on a host device: no work can outlive the call here (threads are counted by the judge)."""
        return 0.0

    def elapsed_ms(self) -> float:
        """Milliseconds between start and stop (after the device is synchronized)."""
        return (self.end - self.begin) * 1e3


class Backend:
    """A kernel target. Subclasses set the class attributes and override what differs.

    Attributes:
        name: registry name (``"cpp"``, ``"cuda"``, ``"triton"``, ``"musa"``).
        device_type: torch device type the candidate runs on.
        language: how answers must be written, for prompts.
        default_bandwidth_gbs: peak memory bandwidth for the roofline check.
        default_runs: timed calls when the config leaves ``runs`` unset.
        poisoned_for: the signature of the calls ``poison_memory`` last prepared for
            (a GPU backend empties its allocator cache when it changes; reset per job).
    """

    poisoned_for: Hashable = None
    name: ClassVar[str] = ""
    device_type: ClassVar[str] = "cpu"
    language: ClassVar[str] = ""
    default_bandwidth_gbs: ClassVar[float] = 100.0
    default_runs: ClassVar[int] = 20

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here (``None`` when it can). Cheap; runs in the caller."""
        return None

    def require_available(self) -> None:
        """Raise :class:`BackendUnavailableError` with the reason when unavailable."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendUnavailableError(f"backend {self.name!r} cannot run here: {reason}")

    # --- worker side -------------------------------------------------------------

    def prepare_worker(self, build_root: Path) -> None:
        """One-time setup in a fresh worker, before it is confined (e.g. precompiled headers)."""

    def prepare_factory(self) -> None:
        """One-time setup in the process that forks candidates; every candidate inherits it.

        Runs before any candidate exists and must not create a device context (forked children
        could not create their own). Trusted runtime state that the backend would otherwise set up
        lazily, inside a candidate's first call, belongs here, so that the judge's baseline of the
        candidate's process already includes it.
        """

    def device_count(self) -> int:
        """Devices a worker can be pinned to (0: the backend is not bound to devices). Runs in the caller."""
        return 0

    def worker_environment(self, device_index: int | None = None) -> dict[str, str]:
        """Environment variables a worker needs (e.g. ``TRITON_INTERPRET``). Runs in the caller.

        Args:
            device_index: which of the :meth:`device_count` devices the worker is
                pinned to (``None``: not pinned).
        """
        return {}

    def build_worker_environment(self) -> dict[str, str] | None:
        """Environment of a worker that only builds, away from the devices (``None``: this backend
        builds where it runs, so the executor runs no separate build workers). Runs in the caller."""
        return None

    def writable_paths(self, build_root: Path) -> tuple[str, ...]:
        """Extra directories a confined worker must be able to write (beyond its own and the cache)."""
        return ()

    @property
    def address_space_limit_ok(self) -> bool:
        """Whether an address-space rlimit is safe (CUDA reserves huge virtual ranges)."""
        return self.device_type == "cpu"

    def build_hooks(self, build_root: Path, tracker: KernelTracker, log: list[BuildRecord],
                    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> contextlib.AbstractContextManager[None]:
        """Context in which candidate code runs, for the candidate process's whole life (its builds happen then).

        ``request_build`` sends a native build request to the trusted side and returns its reply
        (see :class:`~kernelgym.backends.trusted_build.StoreBuilder`); without it, builds run in this process.
        """
        return contextlib.nullcontext()

    def native_toolchain(self) -> Any:
        """How the trusted side builds this backend's ``load_inline`` extensions
        (a :class:`~kernelgym.backends.trusted_build.NativeToolchain`; ``None``: no native builds)."""
        return None

    @property
    def host_array_libraries_needed(self) -> bool:
        """Whether the backend's own runtime imports NumPy in the candidate's process (then it cannot be blocked)."""
        return False

    @property
    def timing_meaningful(self) -> bool:
        """Whether timings on this machine mean anything (``False`` under an interpreter)."""
        return True

    def device(self) -> Any:
        """The ``torch.device`` inputs are moved to."""
        import torch

        return torch.device(self.device_type)

    def device_name(self) -> str:
        """The device in words, for results and baseline cache keys."""
        import platform

        return platform.processor() or platform.machine()

    def synchronize(self) -> None:
        """Wait for all queued device work."""

    def poison_memory(self, signature: Hashable = None, fill: bool = True) -> None:
        """Fill freed allocator memory with NaN so stale results cannot pass.

        ``signature``: what the coming call is (input shapes and dtypes, training, grad);
        calls of one signature reuse the same cached memory. ``fill=False``: only prepare the
        allocator for the signature (the judge's own reference calls, whose outputs are trusted).
        """

    def call_timer(self) -> Any:
        """A timer for one call: ``flush()``, ``start()``, ``stop()``, ``settle()`` (synchronizes; returns the ms of work still
        queued after the end event), then ``elapsed_ms()``."""
        return HostTimer()


_REGISTRY: Registry[type[Backend]] = Registry("backend")


def register_backend(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator registering a backend under ``name``.

    Raises:
        DuplicateNameError: another backend is registered as ``name``.

    Example:
        >>> @register_backend("doc-example")
        ... class DocBackend(Backend):
        ...     language = "nothing"
        >>> get_backend("doc-example").name
        'doc-example'
    """

    def decorate(cls: type[Backend]) -> type[Backend]:
        cls.name = name
        return _REGISTRY.add(name, cls)

    return decorate


def _load_builtin_backends() -> None:
    # Importing the modules runs their @register_backend decorators.
    from kernelgym.backends import cpp, cuda, musa, triton  # noqa: F401


def backend_names() -> list[str]:
    """Registered backend names, sorted."""
    _load_builtin_backends()
    return _REGISTRY.names()


_INSTANCES: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The (per-process) instance of the backend registered as ``name``.

    Raises:
        BackendUnavailableError: no backend has that name.
    """
    _load_builtin_backends()
    try:
        if name not in _INSTANCES:
            _INSTANCES[name] = _REGISTRY[name]()
        return _INSTANCES[name]
    except KeyError:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; choose one of: {', '.join(_REGISTRY.names())}"
        ) from None


def backend_language(name: str) -> str:
    """How answers for backend ``name`` must be written (used in prompts).

    Example:
        >>> "C++" in backend_language("cpp")
        True
    """
    return get_backend(name).language


def median_and_iqr(values: Sequence[float]) -> tuple[float, float]:
    """Median and interquartile range of timing samples."""
    if len(values) < 4:
        return statistics.median(values), (max(values) - min(values))
    q = statistics.quantiles(values, n=4)
    return q[1], q[2] - q[0]


def paired_ratio(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The median over rounds of ``a / b``, for ``(a, b)`` timed back to back in each round (``None``: no round).

    Where the machine's pace drifts between rounds (a shared host), both times of a round see
    the same pace and their ratio does not move with it, while the ratio of the two medians can:
    when a share of calls near half runs slow, each median may fall on either side. A ``b`` of
    zero or less is left out.

    Example:
        >>> paired_ratio([(2.0, 1.0), (4.0, 2.0), (2.2, 1.0)])
        2.0
        >>> slow = [(2.0, 2.0)] * 3 + [(1.0, 1.0)] * 2 + [(2.0, 1.0)]  # one round at two paces
        >>> paired_ratio(slow), statistics.median(a for a, _ in slow) / statistics.median(b for _, b in slow)
        (1.0, 1.3333333333333333)
        >>> paired_ratio([(1.0, 0.0)]) is None
        True
    """
    ratios = [a / b for a, b in pairs if b > 0]
    return statistics.median(ratios) if ratios else None
