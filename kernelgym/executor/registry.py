"""The executor contract and registry: where the worker stages of many jobs run.

Holds:
    PoolSettings: what every executor is built from (backend, workers, cache, worker limits).
    Executor: the protocol (``run_many(jobs) -> results``, ``close()``).
    register_executor: class decorator adding an executor factory under a name.
    executor_names: the registered names (``local``, ``ray``, ``remote``, and any added).
    make_executor: build a registered executor from the settings every executor takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from kernelgym.errors import KernelGymError
from kernelgym.registry import Registry
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult

__all__ = ["Executor", "PoolSettings", "executor_names", "make_executor", "register_executor"]


@dataclass(frozen=True)
class PoolSettings:
    """What every executor is built from: its first argument, before options of its own.

    Attributes:
        backend: the backend its workers build and run candidates for.
        num_workers: parallel workers (``None``: the executor's default).
        cache_dir: build and baseline cache (``None``: ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``
            where the worker runs).
        memory_limit_gb: address-space limit of each sandboxed worker.
        threads_per_worker: OpenMP/torch threads of each sandboxed worker.
    """

    backend: str = "cpp"
    num_workers: int | None = None
    cache_dir: str | Path | None = None
    memory_limit_gb: float = 16.0
    threads_per_worker: int = 1

    @classmethod
    def split(cls, options: dict[str, Any]) -> tuple[PoolSettings, dict[str, Any]]:
        """Separate the settings among ``options`` from the options of one executor.

        Example:
            >>> PoolSettings.split({"backend": "cuda", "ray_address": "auto"})
            (PoolSettings(backend='cuda', num_workers=None, cache_dir=None, memory_limit_gb=16.0, threads_per_worker=1), {'ray_address': 'auto'})
        """
        names = {f.name for f in fields(cls)}
        settings = cls(**{k: v for k, v in options.items() if k in names})
        return settings, {k: v for k, v in options.items() if k not in names}


class Executor(Protocol):
    """Runs worker stages for many jobs; results in the order of the jobs.

    A registered executor factory is called as ``factory(settings, **options)``
    with a :class:`PoolSettings` and the options of that executor (e.g. ``ray_address``).
    """

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]:
        """Judge ``jobs``; one result per job, in order."""
        ...

    def close(self) -> None:
        """Stop the workers (and whatever they started)."""
        ...


_EXECUTORS: Registry[Callable[..., Executor]] = Registry("executor")


def register_executor(name: str) -> Callable[[Any], Any]:
    """Class decorator adding an executor factory under ``name``.

    Raises:
        DuplicateNameError: another executor is registered as ``name``.
    """

    def decorate(factory: Any) -> Any:
        return _EXECUTORS.add(name, factory)

    return decorate


def executor_names() -> list[str]:
    """Registered executor names.

    Example:
        >>> {"local", "ray", "remote"} <= set(executor_names())
        True
    """
    import kernelgym.executor  # noqa: F401  (registers the built-in executors)

    return _EXECUTORS.names()


def make_executor(name: str, settings: PoolSettings | None = None, **options: Any) -> Executor:
    """Instantiate the executor registered as ``name`` (``local``, ``ray``, ``remote``, or one added).

    Raises:
        KernelGymError: no executor has that name.
    """
    names = executor_names()
    factory = _EXECUTORS.get(name)
    if factory is None:
        raise KernelGymError(f"unknown executor {name!r}; choose one of: {', '.join(names)}")
    return factory(settings or PoolSettings(), **options)
