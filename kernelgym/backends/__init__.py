"""Kernel targets: how to build, launch, synchronize and time candidate kernels.

Holds the registry (``get_backend``, ``register_backend``, ``backend_names``, ``backend_language``) and
the ``Backend`` contract; one module per target: ``cpp``, ``cuda``, ``triton``, ``musa``.
"""

from __future__ import annotations

from kernelgym.backends.base import (
    Backend,
    BuildRecord,
    KernelTracker,
    backend_language,
    backend_names,
    get_backend,
    register_backend,
)

__all__ = ["Backend", "BuildRecord", "KernelTracker", "backend_language", "backend_names", "get_backend", "register_backend"]
