"""Gymnasium registration of the kernelgym environments.

Holds:
    ENV_IDS: the registered ids.
    TUNE_ENV_IDS: the ids of the tuning environments.
    register_envs: register them all (idempotent; ``import kernelgym`` calls it).
    register_tune_envs: register the tuning environments alone.
    make_kernelbench_env: entry point of ``kernelgym/KernelBench-v0``.
    make_kernelbench_vector_env: its vector entry point.

Every id is registered ``nondeterministic=True``: timings, and so speedups and
rewards, differ from run to run. This module imports only Gymnasium: the
environments are named by entry-point strings and imported when made, so the
registration can run while Gymnasium's own import finishes (``kernelgym/__init__.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym

from kernelgym.errors import TaskError

if TYPE_CHECKING:
    from kernelgym.envs.kernel_env import KernelEnv
    from kernelgym.envs.vector import KernelVectorEnv

__all__ = ["ENV_IDS", "TUNE_ENV_IDS", "make_kernelbench_env", "make_kernelbench_vector_env", "register_envs", "register_tune_envs"]

ENV_IDS = ("kernelgym/CPU-v0", "kernelgym/GPU-v0", "kernelgym/KernelBench-v0")
TUNE_ENV_IDS = ("kernelgym/Tune-CPU-v0", "kernelgym/Tune-GPU-v0")

_ENV_ENTRY = "kernelgym.envs.kernel_env:KernelEnv"
_VECTOR_ENTRY = "kernelgym.envs.vector:KernelVectorEnv"


def _kernelbench_suite(path: str | None) -> str:
    if not path:
        raise TaskError(
            "kernelgym/KernelBench-v0 needs path=: a KernelBench checkout's KernelBench/ directory (level1/, level2/, ...) "
            "or its parquet file, e.g. gym.make('kernelgym/KernelBench-v0', path='~/KernelBench/KernelBench', level=1)"
        )
    return f"kernelbench:{path}"


def make_kernelbench_env(path: str | None = None, level: int | None = None, backend: str = "cuda", **kwargs: Any) -> KernelEnv:
    """A :class:`KernelEnv` over a KernelBench directory or parquet file.

    Args:
        path: the KernelBench problems directory or its parquet file (required).
        level: keep only this level (``None``: all).
        backend: the target backend (``"cuda"`` by default; ``"cpp"`` runs the tasks on the CPU).
        **kwargs: any other :class:`KernelEnv` argument.

    Raises:
        TaskError: ``path`` is missing or unusable.
    """
    from kernelgym.envs.kernel_env import KernelEnv

    return KernelEnv(suite=_kernelbench_suite(path), level=level, backend=backend, **kwargs)


def make_kernelbench_vector_env(
    num_envs: int = 1, path: str | None = None, level: int | None = None, backend: str = "cuda", **kwargs: Any
) -> KernelVectorEnv:
    """A :class:`KernelVectorEnv` over a KernelBench directory or parquet file (see :func:`make_kernelbench_env`)."""
    from kernelgym.envs.vector import KernelVectorEnv

    return KernelVectorEnv(num_envs, suite=_kernelbench_suite(path), level=level, backend=backend, **kwargs)


def register_envs() -> None:
    """Register ``kernelgym/CPU-v0``, ``kernelgym/GPU-v0`` and ``kernelgym/KernelBench-v0`` (once).

    Example:
        >>> import gymnasium as gym
        >>> register_envs()
        >>> gym.spec("kernelgym/CPU-v0").nondeterministic
        True
    """
    specs = {
        "kernelgym/CPU-v0": (_ENV_ENTRY, _VECTOR_ENTRY, {"suite": "cpu", "backend": "cpp", "executor": "local"}),
        "kernelgym/GPU-v0": (_ENV_ENTRY, _VECTOR_ENTRY, {"suite": "gpu", "backend": "cuda", "executor": "local"}),
        "kernelgym/KernelBench-v0": (
            "kernelgym.envs.registration:make_kernelbench_env",
            "kernelgym.envs.registration:make_kernelbench_vector_env",
            {"executor": "local"},
        ),
    }
    for env_id, (entry_point, vector_entry_point, kwargs) in specs.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=entry_point,
                vector_entry_point=vector_entry_point,
                nondeterministic=True,
                kwargs=kwargs,
            )
    register_tune_envs()


def register_tune_envs() -> None:
    """Register ``kernelgym/Tune-CPU-v0`` (backend ``cpp``) and ``kernelgym/Tune-GPU-v0`` (backend ``triton``), once.

    Both are ``nondeterministic=True``: rewards come from timings.

    Example:
        >>> import gymnasium as gym
        >>> register_tune_envs()
        >>> gym.spec("kernelgym/Tune-GPU-v0").kwargs["backend"]
        'triton'
    """
    for env_id, backend in zip(TUNE_ENV_IDS, ("cpp", "triton"), strict=True):
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="kernelgym.envs.tune_env:KernelTuneEnv",
                nondeterministic=True,
                kwargs={"backend": backend},
            )
