"""Where candidate code runs: sandboxed worker processes, locally or over Ray; and the front door above them.

Holds:
    Verifier: the judge's front door (static stages here, worker stages on an executor).
    Executor, PoolSettings, register_executor, make_executor, executor_names: the executor
        contract and registry.
    LocalExecutor: the embedded default; ``ray`` is registered lazily (``RayExecutor`` in
        ``kernelgym.executor.ray_pool``; needs ``pip install 'kernelgym[ray]'``), and so is ``remote``
        (``RemoteExecutor`` in ``kernelgym.executor.remote``: a ``kernelgym serve`` judge over HTTP).

The one-time builds every worker needs (``kernelgym prepare``) are in ``kernelgym.executor.prepare``.
"""

from __future__ import annotations

from kernelgym.executor.front import Verifier
from kernelgym.executor.local import LocalExecutor, WorkerHandle, default_cache_dir
from kernelgym.executor.registry import Executor, PoolSettings, executor_names, make_executor, register_executor

__all__ = [
    "Executor",
    "LocalExecutor",
    "PoolSettings",
    "Verifier",
    "WorkerHandle",
    "default_cache_dir",
    "executor_names",
    "make_executor",
    "register_executor",
]


@register_executor("ray")
def _make_ray_executor(settings: PoolSettings, **options: object) -> object:
    from kernelgym.executor.ray_pool import RayExecutor

    return RayExecutor(settings, **options)


@register_executor("remote")
def _make_remote_executor(settings: PoolSettings, **options: object) -> object:
    from kernelgym.executor.remote import RemoteExecutor

    return RemoteExecutor(settings, **options)
