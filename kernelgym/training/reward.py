"""The reward function verl calls on the single-turn path, and the per-process resources of the verl integration.

Holds:
    compute_score: score one response, for ``reward.custom_reward_function``.
    ScoreSettings: where a response's task comes from and how it is judged.
    shared_verifier: the verifier of one backend, built once per process and shared by all callers.
    set_shared_verifier: make this process use a given verifier for a backend.
    close_shared_verifiers: stop the shared verifiers' workers.
    cached_suite: a task suite, loaded once per process.

verl builds many agent loops and reward calls per worker process; they share one
verifier per backend (its worker pool is thread-safe), so a training run starts
one pool of sandboxed workers per process, not one per sample. This module
imports nothing from verl: ``compute_score`` is a plain function.

Use on the single-turn path::

    reward.custom_reward_function.path=pkg://kernelgym.training.reward
    reward.custom_reward_function.name=compute_score
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kernelgym.agents.base import strip_reasoning
from kernelgym.envs.kernel_env import LazyVerifier, VerifierLike
from kernelgym.errors import TaskError
from kernelgym.tasks.task import TaskSuite
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult

__all__ = [
    "ScoreSettings",
    "cached_suite",
    "close_shared_verifiers",
    "compute_score",
    "score_fields",
    "set_shared_verifier",
    "shared_verifier",
]

_LOCK = threading.Lock()
# backend -> its verifier; only verifiers built here are closed here.
_VERIFIERS: dict[str, LazyVerifier] = {}


@lru_cache(maxsize=16)
def cached_suite(name: str) -> TaskSuite:
    """Load the suite ``name`` (``"cpu"``, ``"gpu"``, ``"kernelbench:<path>"``) once per process.

    Example:
        >>> cached_suite("cpu") is cached_suite("cpu")
        True
    """
    from kernelgym.tasks import load_suite

    return load_suite(name)


def shared_verifier(
    backend: str,
    *,
    executor: str = "local",
    num_workers: int | None = None,
    cache_dir: str | None = None,
    config: VerifierConfig | None = None,
) -> VerifierLike:
    """The verifier this process uses for ``backend``, built by the first caller with its settings.

    Its worker pool is created here, under a lock, so that concurrent first
    evaluations from several threads share one pool.

    Raises:
        BackendUnavailableError: the backend cannot run on this machine.
    """
    with _LOCK:
        handle = _VERIFIERS.get(backend)
        if handle is None:
            handle = LazyVerifier(
                None, backend, executor=executor, config=config, num_workers=num_workers, cache_dir=cache_dir
            )
            _ = handle.get().executor  # type: ignore[attr-defined]  (starts the worker pool now, under the lock)
            _VERIFIERS[backend] = handle
        return handle.get()


def set_shared_verifier(backend: str, verifier: VerifierLike | None) -> None:
    """Make this process judge ``backend`` answers with ``verifier`` (``None``: build one again on next use).

    The caller keeps ownership of ``verifier`` (it is never closed here); a
    verifier this module built for ``backend`` before is closed. Useful to embed
    the verl integration with a verifier built elsewhere (a remote service, a
    custom executor, a test session's verifier).
    """
    with _LOCK:
        previous = _VERIFIERS.pop(backend, None)
        if verifier is not None:
            _VERIFIERS[backend] = LazyVerifier(verifier, backend)
    if previous is not None and previous.get() is not verifier:
        previous.close()


def close_shared_verifiers() -> None:
    """Forget every shared verifier, closing those built here (also run at interpreter exit)."""
    with _LOCK:
        handles = list(_VERIFIERS.values())
        _VERIFIERS.clear()
    for handle in handles:
        handle.close()


atexit.register(close_shared_verifiers)


@dataclass(frozen=True)
class ScoreSettings:
    """Where a response's task comes from and how it is judged.

    Attributes:
        suite: the suite holding the task (``"cpu"``, ``"gpu"``, ``"kernelbench:<path>"``).
        backend: the backend answers are written for.
        executor: the executor of the shared verifier (``"local"`` or ``"ray"``).
        num_workers: worker processes of the shared verifier (``None``: its default).
        cache_dir: build cache of the shared verifier (``None``: its default).
    """

    suite: str
    backend: str
    executor: str = "local"
    num_workers: int | None = None
    cache_dir: str | None = None

    @classmethod
    def resolve(cls, extra_info: Mapping[str, Any] | None, **defaults: Any) -> ScoreSettings:
        """Settings from a dataset row's ``extra_info`` (``suite``, ``backend``), else from ``defaults``.

        Raises:
            TaskError: neither names the suite or the backend.

        Example:
            >>> ScoreSettings.resolve({"suite": "cpu"}, backend="cpp").backend
            'cpp'
        """
        info = dict(extra_info or {})
        values = {key: info.get(key) or defaults.get(key) for key in ("suite", "backend")}
        missing = [key for key, value in values.items() if not value]
        if missing:
            raise TaskError(
                f"kernelgym reward: no {' or '.join(missing)} for this sample; put them in the row's extra_info "
                "(`kernelgym train` does) or pass them in reward.custom_reward_function.reward_kwargs"
            )
        knobs = {key: defaults[key] for key in ("executor", "num_workers", "cache_dir")
                 if defaults.get(key) is not None}
        return cls(suite=str(values["suite"]), backend=str(values["backend"]), **knobs)

    def verifier(self) -> VerifierLike:
        """The shared verifier for these settings."""
        return shared_verifier(
            self.backend, executor=self.executor, num_workers=self.num_workers, cache_dir=self.cache_dir
        )


def score_fields(result: EvalResult) -> dict[str, float | str]:
    """The numbers verl logs for one judged answer (``score`` first, then the stage outcomes).

    Example:
        >>> score_fields(EvalResult("t", "cpp", "compile_error", parsed=True, legal=True))["compiled"]
        0.0
    """
    return {
        "score": float(result.score),
        "status": result.status.value,
        "compiled": float(result.compiled),
        "correct": float(result.correct),
        "solved": float(result.legal and result.correct),
        "speedup": float(result.speedup or 0.0),
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | None,
    extra_info: Mapping[str, Any] | None = None,
    **reward_kwargs: Any,
) -> dict[str, float | str]:
    """Judge one response with the kernelgym verifier (verl's ``custom_reward_function`` contract).

    The task id is ``ground_truth`` (or ``extra_info["task_id"]``); the suite and
    the backend come from ``extra_info`` or from ``reward_kwargs`` (``suite``,
    ``backend``, ``executor``, ``num_workers``, ``cache_dir``). A leading
    ``<think>...</think>`` block is dropped before the answer is judged.

    Args:
        data_source: the row's ``data_source`` (not used to judge).
        solution_str: the decoded response.
        ground_truth: the task id.
        extra_info: the row's ``extra_info``.
        **reward_kwargs: defaults for the settings above; verl-internal extras are ignored.

    Returns:
        ``{"score", "status", "compiled", "correct", "solved", "speedup"}``; verl uses
        ``score`` as the reward and logs the rest.

    Raises:
        TaskError: the task, suite or backend is missing or unknown.
    """
    del data_source
    settings = ScoreSettings.resolve(extra_info, **reward_kwargs)
    task_id = ground_truth or (extra_info or {}).get("task_id")
    if not task_id:
        raise TaskError("kernelgym reward: the sample names no task (reward_model.ground_truth or extra_info.task_id)")
    task = cached_suite(settings.suite)[str(task_id)]
    result = settings.verifier().evaluate(task, strip_reasoning(solution_str))
    return score_fields(result)
