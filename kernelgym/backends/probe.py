"""What a caller can learn about the GPU toolchain without importing torch (seconds on a cold start).

Holds:
    torch_build: the installed torch's version and the CUDA it was built with, read from its ``version.py``.
    nvml_gpu_count: how many GPUs a CUDA program here would see, asked of the driver through NVML
        (no CUDA context; ``None`` when NVML cannot say).
    visible_count: how many of them ``CUDA_VISIBLE_DEVICES`` leaves.
    cuda_home: where the CUDA toolkit is, found the way torch's extension loader finds it.

The judge's caller (``kernelgym eval``, a ``Verifier``) checks that a GPU backend can run and counts the
GPUs before it starts any worker; through torch that took 3-5 s of a new process's first verdict on an
H100 host. The workers still ask torch itself.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil

__all__ = ["cuda_home", "nvml_gpu_count", "torch_build", "visible_count"]


def torch_build() -> tuple[str, str | None] | None:
    """``(torch.__version__, torch.version.cuda)`` of the installed torch, or ``None`` when it is not installed.

    Example:
        >>> torch_build()[0] == __import__("torch").__version__
        True
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    version_spec = importlib.util.spec_from_file_location("_kernelgym_torch_version", path)
    if version_spec is None or version_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(version_spec)
    try:
        version_spec.loader.exec_module(module)
    except (OSError, SyntaxError):
        return None
    return str(module.__version__), getattr(module, "cuda", None)


def nvml_gpu_count(visible: str | None) -> int | None:
    """GPUs visible under ``CUDA_VISIBLE_DEVICES=visible`` (``None``: unset), from NVML.

    ``None`` when NVML is missing or fails, or when ``visible`` names devices other than by index
    (UUIDs, MIG instances): then only the CUDA runtime can say (see :func:`visible_count`).
    """
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None
    if nvml.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        present = int(count.value)
    finally:
        nvml.nvmlShutdown()
    return visible_count(visible, present)


def visible_count(visible: str | None, present: int) -> int | None:
    """How many of ``present`` GPUs ``CUDA_VISIBLE_DEVICES=visible`` leaves (``None``: not said by index).

    Indices count as torch counts them through NVML: up to the first that is not a device here, and
    none at all if one repeats.

    Example:
        >>> visible_count(None, 4), visible_count("2,3", 4), visible_count("1,7,2", 4), visible_count("", 4)
        (4, 2, 1, 0)
        >>> visible_count("0,0", 4), visible_count("GPU-5e9c", 4)
        (0, None)
    """
    if visible is None:
        return present
    if visible.startswith(("GPU-", "MIG-")):
        return None
    chosen: list[int] = []
    for entry in visible.split(","):
        number = re.match(r"[+-]?\d+", entry.strip())
        index = int(number.group()) if number else -1
        if index in chosen:
            return 0
        if index < 0:
            break
        chosen.append(index)
    return next((i for i, index in enumerate(chosen) if index >= present), len(chosen))


def cuda_home() -> str | None:
    """The CUDA toolkit's root: ``CUDA_HOME`` or ``CUDA_PATH``, else above ``nvcc`` on ``PATH``, else ``/usr/local/cuda``
    (as ``torch.utils.cpp_extension`` finds it on Linux); ``None`` when there is none."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        if nvcc is not None:
            home = os.path.dirname(os.path.dirname(nvcc))
        elif os.path.exists("/usr/local/cuda"):
            home = "/usr/local/cuda"
    return home
