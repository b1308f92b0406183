"""The ``cpp`` backend: C++ kernels for the CPU through ``load_inline``.

Holds:
    CppBackend: builds with g++ + ninja (OpenMP allowed), runs on CPU tensors,
        times with ``time.perf_counter``.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernelgym.backends.base import Backend, BuildRecord, KernelTracker, register_backend
from kernelgym.backends.native import ensure_pch, intercept_load_inline
from kernelgym.backends.trusted_build import NativeToolchain

__all__ = ["CppBackend"]


@register_backend("cpp")
class CppBackend(Backend):
    """C++ on the CPU via ``torch.utils.cpp_extension.load_inline``.

    Example:
        >>> from kernelgym.backends import get_backend
        >>> get_backend("cpp").device_type
        'cpu'
    """

    device_type = "cpu"
    language = (
        "C++ for the CPU, compiled with torch.utils.cpp_extension.load_inline(cpp_sources=..., functions=[...]); "
        "loops over raw data pointers, OpenMP (#pragma omp parallel for) allowed; inputs are CPU tensors"
    )
    default_bandwidth_gbs = 200.0

    def __init__(self) -> None:
        self._pch: Path | None = None

    def unavailable_reason(self) -> str | None:
        """The C++ compiler and ninja must be on PATH."""
        for tool in ("c++", "ninja"):
            if shutil.which(tool) is None:
                return f"{tool!r} was not found on PATH (install a C++ compiler and `pip install ninja`)"
        return None

    def prepare_worker(self, build_root: Path) -> None:
        """Build the precompiled ``torch/extension.h`` once, before the worker is confined."""
        self._pch = ensure_pch(build_root)

    def native_toolchain(self) -> NativeToolchain:
        """g++ for the CPU, with the precompiled header of :meth:`prepare_worker`."""
        return NativeToolchain(compilers=("c++",), cuda=False, pch_dir=self._pch)

    @contextlib.contextmanager
    def build_hooks(self, build_root: Path, tracker: KernelTracker, log: list[BuildRecord],
                    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Iterator[None]:
        """Intercept ``load_inline`` so builds go through the trusted build step and entry points are counted."""
        with intercept_load_inline(build_root, tracker, log, compilers=("c++",), cuda=False, pch_dir=self._pch,
                                   request_build=request_build):
            yield
