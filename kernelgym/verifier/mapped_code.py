"""What the judge trusts among the files mapped into a candidate's process: the installed runtime and its own code.

Holds:
    runtime_roots: where the installed runtime lives (Python and its packages, system libraries, CUDA).
    Places: the judge-made places one library check compares against.
    installed: whether a mapped file is part of the installed runtime or the judge's own code.
    RUNTIME_FILES: mapped paths found installed, known for the worker's life.

Store entries are checked apart, against the judge's records (:class:`~kernelgym.backends.store.ExtensionStore`).
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import site
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Places", "RUNTIME_FILES", "installed", "runtime_roots"]


@functools.lru_cache(maxsize=1)
def runtime_roots() -> tuple[str, ...]:
    """Where the installed runtime lives: Python and its packages (torch among them), system libraries, CUDA.

    Read once per worker, at its start (``torch.utils.cpp_extension``'s import: about 0.5 s).
    """
    from torch.utils import cpp_extension

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages(), "/usr", "/lib", "/lib32", "/lib64", "/opt"}
    if cpp_extension.CUDA_HOME:
        roots.add(cpp_extension.CUDA_HOME)
    return tuple(sorted({os.path.realpath(root) for root in roots}))


@functools.lru_cache(maxsize=1)
def _import_roots() -> tuple[str, ...]:
    """Where this judge's own packages were imported from (``PYTHONPATH`` entries too, e.g. wheels unpacked under
    ``/tmp``): the judge runs their code itself, and candidates can write none of them (Landlock)."""
    roots = {os.path.realpath(entry) for entry in sys.path if entry and os.path.isabs(entry) and os.path.isdir(entry)}
    return tuple(sorted(root for root in roots if root not in ("/", os.path.realpath(tempfile.gettempdir()))))


@functools.lru_cache(maxsize=1)
def _temp_roots() -> tuple[str, ...]:
    """The temporary directories (real paths): anyone may write there."""
    return tuple(sorted({os.path.realpath(place) for place in (tempfile.gettempdir(), "/tmp", "/dev/shm", "/var/tmp")}))


def _within(path: str, root: str) -> bool:
    """Whether the real ``path`` lies under the real ``root``."""
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Places:
    """The judge-made places one library check compares against, as real paths, resolved once per check.

    The Triton cache is the candidate's directory's real path with ``.triton/cache`` appended as it is,
    never resolved: a link the candidate planted there leads nowhere trusted.
    """

    observer: str
    triton_cache: str
    denied: tuple[str, ...]

    @classmethod
    def of(cls, build_root: Path, candidate_dir: Path) -> Places:
        candidate = os.path.realpath(candidate_dir)
        return cls(os.path.realpath(build_root / "aten_observer"), os.path.join(candidate, ".triton", "cache"),
                   (candidate, os.path.realpath(build_root.parent)))


def installed(mapped: str, places: Places, backend: str) -> bool:
    """Whether ``mapped`` (a path from ``/proc/<pid>/maps``) is part of the installed runtime or the judge's own code.

    A deleted or replaced file (``(deleted)``), a memfd, and anything under the candidate's directory,
    the cache or a temporary directory is not, except the judge's observer (built before any candidate)
    and, for Triton on a GPU, the launchers Triton compiles into the candidate's own cache.
    """
    if mapped.endswith(" (deleted)") or not os.path.isfile(mapped):
        return False
    path = os.path.realpath(mapped)
    if _within(path, places.observer):
        return True
    if backend == "triton" and _within(path, places.triton_cache) and _triton_module(Path(path).name):
        return True
    if any(_within(path, place) for place in places.denied):
        return False
    judges_own = any(_within(path, root) for root in _import_roots())
    in_runtime = not any(_within(path, place) for place in _temp_roots()) and any(_within(path, root) for root in runtime_roots())
    if not (judges_own or in_runtime):
        return False
    RUNTIME_FILES.add(mapped)
    return True


RUNTIME_FILES: set[str] = set()
"""Mapped paths :func:`installed` found in the installed runtime or the judge's own packages, known for the
worker's life: no candidate can write those places (Landlock), and a path in ``/proc/<pid>/maps`` is already
resolved, so it never names a file in a later candidate's directory."""


_TRITON_MODULES = ("__triton_launcher", "cuda_utils", "hip_utils")
"""The extension modules Triton's GPU drivers compile into its cache: each kernel's launcher, the driver's utilities."""


def _triton_module(name: str) -> bool:
    """Whether a file name is one of :data:`_TRITON_MODULES` with an extension suffix of this Python (``.cpython-312-x86_64-linux-gnu.so``).

    Example:
        >>> _triton_module("__triton_launcher.so"), _triton_module("cuda_utils" + importlib.machinery.EXTENSION_SUFFIXES[0])
        (True, True)
        >>> _triton_module("__triton_launcher.so.evil"), _triton_module("mine.so")
        (False, False)
    """
    return any(name == module + suffix for module in _TRITON_MODULES for suffix in importlib.machinery.EXTENSION_SUFFIXES)
