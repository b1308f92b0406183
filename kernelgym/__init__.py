"""kernelgym: Gymnasium environments and a strict judge for GPU-kernel generation.

Importing ``kernelgym`` registers the environments (``kernelgym/CPU-v0``,
``kernelgym/KernelBench-v0``, ...) with Gymnasium: at once if Gymnasium is
already imported, otherwise as Gymnasium's own import finishes, so any
``gymnasium.make`` after ``import kernelgym`` finds them, and a process that
never uses Gymnasium (``kernelgym eval --server``, a judge worker) never pays
for importing it. ``kernelgym.Verifier`` is imported on first use. Subpackages,
in layer order (each imports only those before it): ``tasks`` and ``backends``,
``verifier``, ``executor``, ``envs``, ``wrappers``, then ``agents``, ``bench``
and ``training``, then ``cli``.

Holds:
    Verifier: the judge's front door (``kernelgym.executor.front.Verifier``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

__all__ = ["Verifier", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Verifier":
        from kernelgym.executor import Verifier  # also registers the local and ray executors

        return Verifier
    raise AttributeError(f"module 'kernelgym' has no attribute {name!r}")


def _register_envs() -> None:
    from kernelgym.envs.registration import register_envs

    register_envs()


class _RegisterAfterGymnasium(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``gymnasium`` with the finders after it and registers the environments once Gymnasium has loaded."""

    def __init__(self) -> None:
        self._loader: importlib.abc.Loader | None = None

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "gymnasium":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                self._loader, spec.loader = spec.loader, self
                return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        assert self._loader is not None
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        assert self._loader is not None
        module.__spec__.loader = module.__loader__ = self._loader
        self._loader.exec_module(module)
        _register_envs()


if "gymnasium" in sys.modules:
    _register_envs()
elif not any(isinstance(finder, _RegisterAfterGymnasium) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterGymnasium())
