"""The ``musa`` backend: MUSA C++ kernels for Moore Threads GPUs through ``torch_musa``.

Holds:
    MusaBackend: the ``cuda`` contract on device ``musa``: kernels written in
        ``musa_sources`` and built by ``torch_musa.utils.musa_extension.load_inline``
        (mcc + ninja) through the content-addressed cache, one worker pinned to
        each GPU (``MUSA_VISIBLE_DEVICES``), ``torch.musa`` events for timing.

This backend has NOT been run on MUSA hardware: it follows torch_musa's
published API (``torch.musa`` mirrors ``torch.cuda``; its ``load_inline`` takes
``musa_sources``/``extra_musa_cflags``), and what can run without a MUSA GPU is
tested. Without ``torch_musa`` it reports itself unavailable with a clear reason.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelgym.backends.base import BuildRecord, KernelTracker, register_backend
from kernelgym.backends.cuda import GpuBackend, poison_block_bytes
from kernelgym.backends.native import BuildError, intercept_load_inline
from kernelgym.backends.trusted_build import NativeToolchain

__all__ = ["MusaBackend", "MUSA_BANDWIDTH_GBS"]

MUSA_BANDWIDTH_GBS = (("S5000", 1600.0), ("S4000", 768.0), ("S3000", 448.0), ("S80", 448.0))
"""Peak memory bandwidth (GB/s) of Moore Threads GPUs by name fragment (vendor figures)."""


@register_backend("musa")
class MusaBackend(GpuBackend):
    """MUSA C++ through ``torch_musa`` (device ``musa``); chosen with ``backend="musa"``.

    Example:
        >>> from kernelgym.backends import get_backend
        >>> backend = get_backend("musa")
        >>> backend.device_type, backend.visible_devices_env
        ('musa', 'MUSA_VISIBLE_DEVICES')
    """

    device_type = "musa"
    visible_devices_env = "MUSA_VISIBLE_DEVICES"
    arch_list_env = "TORCH_MUSA_ARCH_LIST"
    device_file_patterns = ("/dev/mtgpu*", "/dev/dri/*")
    bandwidth_table = MUSA_BANDWIDTH_GBS
    fallback_bandwidth_gbs = 1600.0
    language = (
        "MUSA C++ compiled with torch_musa.utils.musa_extension.load_inline(cpp_sources=..., musa_sources=..., "
        "functions=[...]) (import torch_musa first); __global__ kernels launched on the current MUSA stream; "
        "inputs are tensors on device 'musa'"
    )

    def api(self) -> ModuleType:
        """``torch.musa`` (registered by importing ``torch_musa``)."""
        import torch
        import torch_musa  # noqa: F401  (registers torch.musa and the 'musa' device)

        return torch.musa

    def device(self) -> Any:
        """``torch.device("musa")`` (the device type exists once torch_musa is imported)."""
        import torch

        self.api()
        return torch.device(self.device_type)

    def device_available(self) -> bool:
        """Whether torch_musa is installed and sees a MUSA GPU."""
        if importlib.util.find_spec("torch_musa") is None:
            return False
        return super().device_available()

    def unavailable_reason(self) -> str | None:
        """torch_musa, a MUSA GPU, the MUSA compiler (mcc) and ninja must all be there."""
        if importlib.util.find_spec("torch_musa") is None:
            return (
                "torch_musa is not installed: the musa backend needs Moore Threads' torch_musa "
                "(https://github.com/MooreThreads/torch_musa) and a MUSA GPU; on NVIDIA GPUs use backend='cuda'"
            )
        if not self.device_available():
            return "torch_musa is installed but no MUSA GPU is visible (check mthreads-gmi and MUSA_VISIBLE_DEVICES)"
        musa_home = os.environ.get("MUSA_HOME", "/usr/local/musa")
        if shutil.which("mcc", path=os.path.join(musa_home, "bin") + os.pathsep + os.environ.get("PATH", "")) is None:
            return "mcc (the MUSA toolkit) was not found; set MUSA_HOME or put mcc on PATH"
        if shutil.which("ninja") is None:
            return "'ninja' was not found on PATH (`pip install ninja`)"
        return None

    def poison_memory(self, signature: Hashable = None, fill: bool = True) -> None:
        """Return the free blocks to the driver, then poison one block as large as the memory in use.

        torch_musa offers no way to wrap a raw device address (``__cuda_array_interface__``),
        so the ``cuda`` backend's in-place poisoning is not available: the block
        (:func:`~kernelgym.backends.cuda.poison_block_bytes`) is allocated, every byte set
        to 0xFF, and freed, before every call (``fill=False``: only when ``signature`` changes).
        """
        import torch

        if not fill and signature == self.poisoned_for:
            return
        api = self.api()
        api.empty_cache()
        size = poison_block_bytes(int(api.memory_allocated()), int(api.mem_get_info()[0]))
        torch.full((size,), 0xFF, dtype=torch.uint8, device=self.device())
        self.poisoned_for = signature

    def arch_string(self, major: int, minor: int) -> str:
        """``TORCH_MUSA_ARCH_LIST`` writes capability 2.2 as ``22``."""
        return f"{major}{minor}"

    def native_toolchain(self) -> NativeToolchain:
        """g++ and mcc through torch_musa's loader, for this GPU's architecture."""
        return NativeToolchain(compilers=("c++", "mcc"), cuda=True, device_kwargs=("musa_sources", "extra_musa_cflags"),
                               key_extra=self._arch, loader="torch_musa.utils.musa_extension")

    @contextlib.contextmanager
    def build_hooks(self, build_root: Path, tracker: KernelTracker, log: list[BuildRecord],
                    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Iterator[None]:
        """Intercept torch_musa's ``load_inline``; refuse torch's CUDA loader, which cannot target MUSA."""
        from torch.utils import cpp_extension
        from torch_musa.utils import musa_extension

        real = cpp_extension.load_inline

        def refuse_cuda_loader(*_args: Any, **_kwargs: Any) -> None:
            raise BuildError(
                "torch.utils.cpp_extension.load_inline cannot build for MUSA; use "
                "torch_musa.utils.musa_extension.load_inline(cpp_sources=..., musa_sources=..., functions=[...])"
            )

        cpp_extension.load_inline = refuse_cuda_loader
        try:
            with intercept_load_inline(
                build_root, tracker, log, compilers=("c++", "mcc"), cuda=True, extension_module=musa_extension,
                device_kwargs=("musa_sources", "extra_musa_cflags"), key_extra=self._arch, request_build=request_build,
            ):
                yield
        finally:
            cpp_extension.load_inline = real
