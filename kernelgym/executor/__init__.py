"""Where candidate code runs: sandboxed worker processes, locally or over Ray.

Holds ``LocalExecutor`` (the embedded default) and registers ``ray`` lazily
(``RayExecutor`` in ``kernelgym.executor.ray_pool``; needs ``pip install 'kernelgym[ray]'``).
"""

from __future__ import annotations

from kernelgym.executor.local import LocalExecutor, WorkerHandle, default_cache_dir
from kernelgym.executor.front import register_executor

__all__ = ["LocalExecutor", "WorkerHandle", "default_cache_dir"]


@register_executor("ray")
def _make_ray_executor(**kwargs: object) -> object:
    from kernelgym.executor.ray_pool import RayExecutor

    return RayExecutor(**kwargs)
