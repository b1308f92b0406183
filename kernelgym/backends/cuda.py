"""The ``cuda`` backend, and what every GPU backend shares.

Holds:
    GpuBackend: base of the GPU backends (``cuda``, ``triton`` on a GPU, ``musa``):
        one worker pinned to each GPU, device-wide synchronization, NaN-poisoned
        allocator memory, and event timing with the L2 cache flushed before every run.
    CudaBackend: CUDA C++ through ``load_inline(cuda_sources=...)``, built by nvcc + ninja
        through the content-addressed build cache.
    EventTimer: times one call with device events on the current stream, L2 flushed first.
    peak_bandwidth_gbs: peak memory bandwidth of a GPU from its name (roofline check).
    l2_flush_bytes: size of the buffer written before every timed run.
    pinned_device: the device id a worker with a given index is pinned to.

Timing follows DESIGN.md stage 5: every timed call starts with a cold L2 (a
buffer of at least twice the L2 size is written first, outside the timed
region), start/end events are recorded on the current stream and the device is
synchronized after each call, so an asynchronous CUDA error surfaces in the
call that caused it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelgym.backends.base import Backend, BuildRecord, KernelTracker, register_backend
from kernelgym.backends.native import ensure_pch, intercept_load_inline
from kernelgym.backends.probe import cuda_home, nvml_gpu_count, torch_build
from kernelgym.backends.trusted_build import NativeToolchain

__all__ = [
    "CONTEXT_BYTES",
    "CudaBackend",
    "EventTimer",
    "GpuBackend",
    "LEAD_IN_MS",
    "free_blocks",
    "held_elsewhere",
    "l2_flush_bytes",
    "poison_block_bytes",
    "peak_bandwidth_gbs",
    "pinned_device",
]

MIN_FLUSH_BYTES = 256 * 1024**2
"""Smallest L2-flush buffer (twice the 128 MB L2 of the largest current GPUs)."""

MAX_POISON_BLOCK_BYTES = 2 * 1024**3
"""Largest block reserved for a new call signature's first allocations (see :func:`poison_block_bytes`)."""

_FALLBACK_CLOCK_KHZ = 2_000_000
"""Clock rate assumed where a device reports none (the lead-in then lasts about :data:`LEAD_IN_MS`)."""

FALLBACK_BANDWIDTH_GBS = 3000.0
"""Peak bandwidth assumed for a GPU missing from the table (an H100-class figure)."""

# Peak DRAM bandwidth in GB/s by device-name fragment; the first match wins, so
# specific names come before the families that contain them.
_BANDWIDTH_GBS = (
    ("GB200", 8000.0), ("B200", 8000.0), ("GH200", 4900.0), ("H200", 4800.0), ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0), ("H100", 3350.0), ("H800", 3350.0), ("H20", 4000.0), ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB", 2039.0), ("A100", 1555.0), ("A800", 2039.0), ("L40", 864.0), ("L4", 300.0),
    ("A10", 600.0), ("RTX 4090", 1008.0), ("RTX 3090", 936.0), ("V100", 900.0), ("T4", 320.0),
)

def poison_block_bytes(allocated: int, free: int) -> int:
    """Size of the block reserved when a new call signature starts: as large as the memory in use,
    between 256 MB and 2 GB, and never more than half the free memory.

    Example:
        >>> GB = 1024**3
        >>> poison_block_bytes(allocated=7 * GB, free=40 * GB) // GB
        2
        >>> poison_block_bytes(allocated=0, free=40 * GB) // 1024**2
        256
        >>> poison_block_bytes(allocated=7 * GB, free=2 * GB) // GB
        1
    """
    return min(max(allocated, MIN_FLUSH_BYTES), MAX_POISON_BLOCK_BYTES, free // 2)


def free_blocks(segments: Sequence[dict[str, Any]], device_index: int) -> list[tuple[int, int]]:
    """``(address, bytes)`` of every free block PyTorch's caching allocator holds on one device.

    ``segments`` is ``torch.cuda.memory_snapshot()``. Expandable segments are left
    out: their free tail may be unmapped, and writing there would fault.

    Example:
        >>> free_blocks([{"device": 0, "is_expandable": False, "blocks": [
        ...     {"address": 4096, "size": 1024, "state": "active_allocated"},
        ...     {"address": 5120, "size": 512, "state": "inactive"}]}], device_index=0)
        [(5120, 512)]
    """
    return [
        (int(block["address"]), int(block["size"]))
        for segment in segments
        if segment["device"] == device_index and not segment.get("is_expandable", False)
        for block in segment["blocks"]
        if block["state"] == "inactive"
    ]


class _DeviceSpan:
    """A device address range seen as bytes, so :func:`torch.as_tensor` wraps it without allocating."""

    def __init__(self, address: int, size: int) -> None:
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (address, False), "version": 2}


def peak_bandwidth_gbs(
    device_name: str, table: Sequence[tuple[str, float]] = _BANDWIDTH_GBS, fallback: float = FALLBACK_BANDWIDTH_GBS
) -> float:
    """Peak memory bandwidth (GB/s) of the GPU called ``device_name``.

    Used as the roofline floor: no honest kernel moves its bytes faster than
    this, so an overestimate is the safe side.

    Args:
        device_name: as the driver reports it (``torch.cuda.get_device_name()``).
        table: (name fragment, GB/s) pairs; the first fragment found in the name wins.
        fallback: the figure for a GPU the table does not know.

    Example:
        >>> peak_bandwidth_gbs("NVIDIA H200")
        4800.0
        >>> peak_bandwidth_gbs("NVIDIA H100 80GB HBM3")
        3350.0
        >>> peak_bandwidth_gbs("Some Future GPU")
        3000.0
    """
    for fragment, gbs in table:
        if fragment.lower() in device_name.lower():
            return gbs
    return fallback


def l2_flush_bytes(l2_cache_bytes: int) -> int:
    """Bytes to write before each timed run so nothing of the last run stays in L2.

    Example:
        >>> l2_flush_bytes(50 * 1024**2) // 1024**2
        256
        >>> l2_flush_bytes(200 * 1024**2) // 1024**2
        400
    """
    return max(2 * l2_cache_bytes, MIN_FLUSH_BYTES)


def pinned_device(index: int, visible: str | None, count: int) -> str:
    """The device id (as ``CUDA_VISIBLE_DEVICES`` names it) for worker ``index``.

    Workers map onto the devices the caller sees, round-robin: with
    ``CUDA_VISIBLE_DEVICES=2,3`` worker 0 gets ``2`` and worker 1 gets ``3``.

    Args:
        index: the worker's index.
        visible: the caller's ``*_VISIBLE_DEVICES`` value (``None``: unset).
        count: devices the caller sees.

    Example:
        >>> pinned_device(1, "2,3", 2), pinned_device(2, None, 2)
        ('3', '0')
    """
    entries = _visible_entries(visible) or [str(i) for i in range(max(count, 1))]
    return entries[index % len(entries)]


def _visible_entries(visible: str | None) -> list[str]:
    """The device ids a ``*_VISIBLE_DEVICES`` value names (none when it is unset or empty).

    Example:
        >>> _visible_entries(" 2, 3,"), _visible_entries(None)
        (['2', '3'], [])
    """
    return [e.strip() for e in visible.split(",") if e.strip()] if visible else []


CONTEXT_BYTES = 1024**3
"""What one process's device context may hold beyond its allocator's memory (CUDA's context, cuBLAS's workspace)."""


def held_elsewhere(free: int, total: int, reserved: int, processes: int) -> int:
    """Device bytes held outside ``processes`` processes whose allocators reserve ``reserved`` in all (never negative).

    Example:
        >>> GiB = 1024**3
        >>> held_elsewhere(free=1 * GiB, total=80 * GiB, reserved=2 * GiB, processes=2) // GiB
        75
        >>> held_elsewhere(free=70 * GiB, total=80 * GiB, reserved=9 * GiB, processes=2)
        0
    """
    return max(0, total - free - reserved - processes * CONTEXT_BYTES)


LEAD_IN_MS = float(os.environ.get("KERNELGYM_LEAD_IN_MS", "1.0"))
"""Device work queued before each call's L2 flush, not waited for (see :class:`EventTimer`); ``KERNELGYM_LEAD_IN_MS``
sets it for a measurement (0: none, each call launched onto an idle device)."""


class EventTimer:
    """Times one call with device events on the current stream; ``flush`` evicts L2 first, outside the timed region.

    Before the flush, ``flush`` queues :data:`LEAD_IN_MS` of device work (a spin kernel) and does
    not wait for it: the call is launched while the device is still busy with it, as in a
    benchmark loop that runs calls back to back. A judged call follows a pause (the judge's
    requests, the reference's call, comparisons); on an H100, a call launched onto a device idle
    for a few milliseconds read 20-100 us more in its events than the same call in KernelBench's
    loop, for kernels of 0.05-0.4 ms (benchmarks/call_conditions.py, ``idle_gap``), and this
    lead-in gave back the loop's figures. What the judge credits is still bounded from outside:
    the timing audit compares the events with the wall time of the request.

    Args:
        api: the device module (``torch.cuda`` or ``torch.musa``).
        flush_buffer: a byte tensor of :func:`l2_flush_bytes` bytes, zeroed by ``flush``.
        lead_in_cycles: device clock cycles of the lead-in (0: none; a device module without
            ``_sleep`` has none).
    """

    def __init__(self, api: ModuleType, flush_buffer: Any, lead_in_cycles: int = 0) -> None:
        self.api = api
        self.flush_buffer = flush_buffer
        self.lead_in_cycles = lead_in_cycles if hasattr(api, "_sleep") else 0
        self.begin = api.Event(enable_timing=True)
        self.end = api.Event(enable_timing=True)

    def flush(self) -> None:
        """Queue the lead-in, then overwrite the flush buffer (evicts every line of L2); nothing is waited for."""
        if self.lead_in_cycles:
            self.api._sleep(self.lead_in_cycles)
        self.flush_buffer.zero_()

    def start(self) -> None:
        """Record the start event on the current stream."""
        self.begin.record(self.api.current_stream())

    def stop(self) -> None:
        """Record the end event on the current stream."""
        self.end.record(self.api.current_stream())

    def settle(self) -> float:
        """Wait for the end event, then for every stream; milliseconds the device stayed busy after the end event.

        An honest answer joins its side streams before it returns (the end event then waits for them), so
        waiting for the whole device afterwards costs only the synchronization itself.
        """
        self.end.synchronize()
        start = time.perf_counter()
        self.api.synchronize()
        return (time.perf_counter() - start) * 1e3

    def elapsed_ms(self) -> float:
        """Event-measured milliseconds of the call (the device must be synchronized)."""
        return float(self.begin.elapsed_time(self.end))


class GpuBackend(Backend):
    """What the GPU backends share; subclasses name the device module and the loader.

    Attributes:
        visible_devices_env: the variable that pins a process to devices.
        arch_list_env: the variable naming the architectures extension builds target.
        device_file_patterns: device files a confined worker must be able to open for writing.
        bandwidth_table: (name fragment, peak GB/s) pairs for :func:`peak_bandwidth_gbs`.
        fallback_bandwidth_gbs: peak GB/s of a GPU missing from the table.
    """

    device_type = "cuda"
    default_runs = 100
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    arch_list_env = "TORCH_CUDA_ARCH_LIST"
    device_file_patterns: tuple[str, ...] = ("/dev/nvidia*", "/dev/nvidia-caps/*")
    bandwidth_table: tuple[tuple[str, float], ...] = _BANDWIDTH_GBS
    fallback_bandwidth_gbs = FALLBACK_BANDWIDTH_GBS

    def __init__(self) -> None:
        self._name: str | None = None
        self._flush: Any = None
        self._lead_in_cycles: int | None = None
        self._arch = ""

    def api(self) -> ModuleType:
        """The torch device module (``torch.cuda``)."""
        import torch

        return getattr(torch, self.device_type)

    def device_available(self) -> bool:
        """Whether PyTorch sees a device of this type (cheap, no context is created)."""
        try:
            return bool(self.api().is_available())
        except (ImportError, AttributeError, RuntimeError):
            return False

    def device_count(self) -> int:
        """Visible GPUs; the local executor pins one worker to each."""
        return int(self.api().device_count()) if self.device_available() else 0

    def worker_environment(self, device_index: int | None = None) -> dict[str, str]:
        """Pin the worker to one GPU through the visible-devices variable.

        ``torch.compile`` (the compile baseline) then compiles inside the worker
        instead of starting a pool of compile processes in every worker.
        """
        env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
        if device_index is not None:
            visible = os.environ.get(self.visible_devices_env)
            # Devices named (as Ray names an actor's) need no count: counting imports torch, seconds before the worker starts.
            count = 0 if _visible_entries(visible) else self.device_count()
            env[self.visible_devices_env] = pinned_device(device_index, visible, count)
        return env

    def writable_paths(self, build_root: Path) -> tuple[str, ...]:
        """The GPU device files (drivers open them for writing, also after confinement) and ``/dev/shm``.

        Device buffers shared between the judge and the candidate (CUDA IPC) carry a
        reference count in a shared-memory file that both processes write.
        """
        files = {p for pattern in self.device_file_patterns for p in glob.glob(pattern)}
        return tuple(sorted(files | ({"/dev/shm"} if os.path.isdir("/dev/shm") else set())))

    @property
    def address_space_limit_ok(self) -> bool:
        """No: the GPU runtime reserves terabytes of virtual address space."""
        return False

    @property
    def default_bandwidth_gbs(self) -> float:  # type: ignore[override]
        """Peak memory bandwidth of this worker's GPU (read from its name)."""
        if not self.device_available():
            return self.fallback_bandwidth_gbs
        return peak_bandwidth_gbs(self.device_name(), self.bandwidth_table, self.fallback_bandwidth_gbs)

    def arch_string(self, major: int, minor: int) -> str:
        """How the arch-list variable writes a compute capability (``9.0`` for CUDA)."""
        return f"{major}.{minor}"

    def prepare_worker(self, build_root: Path) -> None:
        """Create the device context, the L2-flush buffer and the build's target arch before confinement."""
        import torch

        if not self.device_available():
            # A build-only worker without a GPU (the Ray executor's build actors) targets the
            # architectures named in the environment, so its builds share cache keys with the GPU workers.
            self._arch = os.environ.get(self.arch_list_env, "")
            return
        api = self.api()
        torch.empty(1, device=self.device())  # creates the context while every device file may still be opened
        self._name = str(api.get_device_name())
        properties = api.get_device_properties(api.current_device())
        l2_bytes = int(getattr(properties, "L2_cache_size", 0) or getattr(properties, "l2_cache_size", 0) or 0)
        self._flush = torch.empty(l2_flush_bytes(l2_bytes), dtype=torch.uint8, device=self.device())
        major, minor = api.get_device_capability()
        # Builds target this GPU only; the arch enters the build cache key, so GPUs of other kinds never share a build.
        self._arch = os.environ.get(self.arch_list_env) or self.arch_string(major, minor)
        os.environ[self.arch_list_env] = self._arch

    def memory_held_elsewhere(self, processes: int = 2, settle_seconds: float = 2.0) -> tuple[int, int]:
        """(bytes of this GPU held by processes other than this one and ``processes - 1`` others of its own, total bytes).

        What is not free, less this process's allocator and :data:`CONTEXT_BYTES` for each of ``processes`` device
        contexts (this worker's and the candidates it forked ahead). The least of readings over ``settle_seconds``:
        a process just killed gives its memory back with a lag.
        """
        api = self.api()
        deadline, least, total = time.monotonic() + settle_seconds, None, 0
        while True:
            api.empty_cache()
            free, total = (int(v) for v in api.mem_get_info())
            held = held_elsewhere(free, total, int(api.memory_reserved()), processes)
            least = held if least is None else min(least, held)
            if least == 0 or time.monotonic() >= deadline:
                return least, total
            time.sleep(0.2)

    def device_name(self) -> str:
        """The GPU's name (read once; a device in an error state cannot be asked again)."""
        if self._name is None:
            self._name = str(self.api().get_device_name()) if self.device_available() else "no GPU"
        return self._name

    def synchronize(self) -> None:
        """Wait for all work on the device (raises a pending kernel error)."""
        self.api().synchronize()

    def poison_memory(self, signature: Hashable = None, fill: bool = True) -> None:
        """Fill every free block of the caching allocator with NaN, where it lies.

        Every byte is set to 0xFF: NaN in every floating format (float32, float16,
        bfloat16, float64), -1 in the integer ones. The next allocations are carved
        out of these blocks: a kernel that skips writing part of its output returns
        NaN instead of a stale earlier result.

        Nothing goes back to the driver between calls of one signature, so from the
        second call on the output's allocation is a cache hit and no driver call,
        whose cost an H100 showed varying from 1 to 20 ms for a 6.4 GB block, lands
        in a call or around it. When ``signature`` changes (other shapes, or
        training), the cache is emptied first, so neither process carries blocks of
        other shapes into the calls that are timed, and one block as large as the
        memory in use (:func:`poison_block_bytes`) is reserved and poisoned for the
        first call's allocations. ``fill=False`` does only that (for the judge's own reference
        calls: their outputs are trusted, and reading the allocator's blocks and filling them
        cost 0.5-5 ms per call on an H100).
        """
        import torch

        api = self.api()
        if signature != self.poisoned_for:
            api.empty_cache()
            self.poisoned_for = signature
            size = poison_block_bytes(int(api.memory_allocated()), int(api.mem_get_info()[0]))
            torch.empty((size,), dtype=torch.uint8, device=self.device())  # freed at once, cached, poisoned below
        if not fill:
            return
        device = torch.device(self.device())
        index = device.index if device.index is not None else api.current_device()
        for address, size in free_blocks(api.memory_snapshot(), index):
            self.device_span(address, size).fill_(0xFF)
        self.synchronize()

    def device_span(self, address: int, size: int) -> Any:
        """A uint8 tensor over ``size`` bytes of device memory at ``address``, allocating nothing."""
        import torch

        return torch.as_tensor(_DeviceSpan(address, size), device=self.device())

    def call_timer(self) -> Any:
        """Device events around one call, after a lead-in of device work and an L2 flush (:class:`EventTimer`)."""
        import torch

        if self._flush is None:
            self._flush = torch.empty(MIN_FLUSH_BYTES, dtype=torch.uint8, device=self.device())
        if self._lead_in_cycles is None:
            clock_khz = getattr(self.api().get_device_properties(self.device()), "clock_rate", 0) or _FALLBACK_CLOCK_KHZ
            self._lead_in_cycles = int(clock_khz * LEAD_IN_MS)  # kHz: cycles per millisecond
        return EventTimer(self.api(), self._flush, self._lead_in_cycles)


@register_backend("cuda")
class CudaBackend(GpuBackend):
    """CUDA C++ kernels through ``torch.utils.cpp_extension.load_inline(cuda_sources=...)``.

    Builds run nvcc + ninja inside the worker through the content-addressed
    cache (keyed also by the GPU architecture); the worker that builds is the
    one pinned to its GPU, and several workers build in parallel.

    Example:
        >>> from kernelgym.backends import get_backend
        >>> backend = get_backend("cuda")
        >>> backend.device_type, backend.address_space_limit_ok
        ('cuda', False)
    """

    language = (
        "CUDA C++ compiled with torch.utils.cpp_extension.load_inline(cpp_sources=..., cuda_sources=..., "
        "functions=[...]); __global__ kernels launched on at::cuda::getCurrentCUDAStream(); inputs are CUDA tensors"
    )

    def unavailable_reason(self) -> str | None:
        """A GPU, PyTorch built with CUDA, nvcc and ninja must all be there (asked without importing torch where
        the driver's NVML answers: :mod:`kernelgym.backends.probe`)."""
        build = torch_build()
        if build is None:
            return "PyTorch is not installed (`pip install torch`, a CUDA build)"
        version, cuda = build
        if cuda is None:
            return (
                f"PyTorch {version} was built without CUDA; install a CUDA build of torch, "
                "or use backend='cpp' (C++ on the CPU) or backend='triton' (Triton's interpreter) here"
            )
        if self.device_count() == 0:
            return "no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
        home = cuda_home()
        if home is None or shutil.which("nvcc", path=os.path.join(home, "bin") + os.pathsep + os.environ.get("PATH", "")) is None:
            return "nvcc (the CUDA toolkit) was not found; set CUDA_HOME or put nvcc on PATH"
        if shutil.which("ninja") is None:
            return "'ninja' was not found on PATH (`pip install ninja`)"
        return None

    def device_count(self) -> int:
        """Visible GPUs: the driver's count through NVML (no torch import, no CUDA context), else torch's."""
        count = nvml_gpu_count(os.environ.get(self.visible_devices_env))
        return super().device_count() if count is None else count

    def __init__(self) -> None:
        super().__init__()
        self._pch: Path | None = None

    def prepare_worker(self, build_root: Path) -> None:
        """Set up the device, then precompile ``torch/extension.h`` for the binding unit of every build."""
        super().prepare_worker(build_root)
        self._pch = ensure_pch(build_root, cuda=True)

    def build_worker_environment(self) -> dict[str, str] | None:
        """No GPU, and the GPU's architecture named, so builds made ahead share cache keys with the judges'.

        The architecture comes from ``nvidia-smi`` (no device context is created in the caller);
        without it, or with GPUs of several kinds, there are no separate build workers.
        """
        if os.environ.get(self.arch_list_env):
            arch = os.environ[self.arch_list_env]
        else:
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                     capture_output=True, text=True, timeout=30, check=True).stdout.split()
            except (OSError, subprocess.SubprocessError):
                return None
            if len(set(out)) != 1:
                return None
            arch = out[0]
        return {self.visible_devices_env: "", self.arch_list_env: arch}

    def native_toolchain(self) -> NativeToolchain:
        """g++ and nvcc for this GPU's architecture, with the binding unit's precompiled header and the device unit
        compiled with a lighter prelude first where it compiles so
        (:func:`~kernelgym.backends.trusted_build.light_device_sources`, else
        :func:`~kernelgym.backends.trusted_build.slim_device_sources`)."""
        return NativeToolchain(compilers=("c++", "nvcc"), cuda=True, pch_dir=self._pch, key_extra=self._arch, slim_device_unit=True)

    @contextlib.contextmanager
    def build_hooks(self, build_root: Path, tracker: KernelTracker, log: list[BuildRecord],
                    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Iterator[None]:
        """Intercept ``load_inline`` so builds go through the trusted build step (keyed per GPU architecture)
        and entry points are counted."""
        with intercept_load_inline(
            build_root, tracker, log, compilers=("c++", "nvcc"), cuda=True, key_extra=self._arch,
            pch_dir=self._pch, request_build=request_build,
        ):
            yield
