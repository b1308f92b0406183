"""Exceptions a user can cause, each with a sentence that says what to do.

Holds:
    KernelGymError: the base class of every error kernelgym raises on purpose.
    TaskError: a task file or suite is unusable.
    BackendUnavailableError: the chosen backend cannot run on this machine.
    MissingExtraError: an optional dependency is not installed.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["KernelGymError", "TaskError", "BackendUnavailableError", "MissingExtraError", "require_extra"]


class KernelGymError(Exception):
    """Base class of the errors kernelgym raises for problems the user can fix."""


class TaskError(KernelGymError):
    """A task file, suite name or dataset path cannot be used as a task."""


class BackendUnavailableError(KernelGymError):
    """The backend was asked for on a machine that cannot run it (no GPU, no compiler, ...)."""


class MissingExtraError(KernelGymError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install kernelgym[extra]``.

    Example:
        >>> require_extra("json", "core").__name__
        'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{module!r} is not installed; install it with: pip install 'kernelgym[{extra}]'"
        ) from exc
