"""The judge's front door: ``Verifier.evaluate`` and ``evaluate_many``.

Holds:
    Verifier: runs the static stages (extract, inspect) here, hands the rest to
        an executor whose workers build, check, time and score in a sandbox.
    register_executor / make_executor: the executor registry (``local``, ``ray``).
    backend_language: how answers for a backend must be written (for prompts).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from kernelgym.backends import get_backend
from kernelgym.errors import KernelGymError
from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.feedback import compose_feedback
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, StageSeconds, Status

__all__ = ["Verifier", "Executor", "register_executor", "make_executor", "executor_names", "backend_language"]


class Executor(Protocol):
    """Runs worker stages for many jobs; results in the order of the jobs."""

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]: ...

    def close(self) -> None: ...


_EXECUTORS: dict[str, Callable[..., Executor]] = {}


def register_executor(name: str) -> Callable[[Any], Any]:
    """Class decorator adding an executor factory under ``name``."""

    def decorate(factory: Any) -> Any:
        _EXECUTORS[name] = factory
        return factory

    return decorate


def executor_names() -> list[str]:
    """Registered executor names."""
    import kernelgym.executor  # noqa: F401  (registers the built-in executors)

    return sorted(_EXECUTORS)


def make_executor(name: str, **kwargs: Any) -> Executor:
    """Instantiate the executor registered as ``name`` (``local`` or ``ray``)."""
    names = executor_names()
    if name not in _EXECUTORS:
        raise KernelGymError(f"unknown executor {name!r}; choose one of: {', '.join(names)}")
    return _EXECUTORS[name](**kwargs)


def backend_language(name: str) -> str:
    """How answers for backend ``name`` must be written (used in prompts)."""
    return get_backend(name).language


class Verifier:
    """Judge candidate programs against tasks.

    Args:
        backend: the target (``cpp``, ``cuda``, ``triton``, ``musa``).
        executor: ``"local"`` (default, sandboxed processes here), ``"ray"``, or an executor object.
        config: strictness, timing and reward settings.
        num_workers: parallel workers of a named executor.
        cache_dir: build and baseline cache (default ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``).
        **executor_kwargs: passed to a named executor's constructor.

    Raises:
        BackendUnavailableError: the backend cannot run on this machine (local executor; the Ray
            executor raises it when the cluster cannot run it).

    Example:
        >>> from kernelgym.tasks import load_suite
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> with Verifier(backend="cpp") as verifier:
        ...     verifier.evaluate(task, "no code here").status.value
        'format_error'
    """

    def __init__(
        self,
        backend: str = "cpp",
        executor: str | Executor = "local",
        config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | Path | None = None,
        **executor_kwargs: Any,
    ) -> None:
        self.backend = backend
        if executor == "local":  # remote executors check where the candidates will actually run
            get_backend(backend).require_available()
        self.config = config or VerifierConfig()
        self._executor_spec = executor
        self._executor_kwargs = dict(executor_kwargs, backend=backend, num_workers=num_workers, cache_dir=cache_dir,
                                     memory_limit_gb=self.config.memory_limit_gb)
        self._executor: Executor | None = None if isinstance(executor, str) else executor
        self._rng = random.Random(self.config.seed)

    @property
    def executor(self) -> Executor:
        """The executor, created on first use (so building a Verifier is cheap)."""
        if self._executor is None:
            assert isinstance(self._executor_spec, str)
            self._executor = make_executor(self._executor_spec, **self._executor_kwargs)
        return self._executor

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the executor's workers (an executor passed in by the caller is closed too)."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def prepare(self, task: Task, text: str) -> EvalResult | JudgeJob:
        """Run the static stages; return the final result if they fail, else the job for a worker."""
        from kernelgym.verifier.extract import FormatError, extract_program
        from kernelgym.verifier.inspect import inspect_program

        start = time.perf_counter()
        try:
            code = extract_program(text if isinstance(text, str) else "")
        except FormatError as exc:
            seconds = StageSeconds(extract=time.perf_counter() - start)
            return EvalResult(task.id, self.backend, Status.FORMAT_ERROR, feedback=compose_feedback(Status.FORMAT_ERROR, [str(exc)]), seconds=seconds)
        extracted = time.perf_counter()
        violations = inspect_program(code, self.backend, reference=task.source)
        inspected = time.perf_counter()
        if violations:
            seconds = StageSeconds(extract=extracted - start, inspect=inspected - extracted)
            details = [f"Static analysis found {len(violations)} rule violation(s):"]
            return EvalResult(
                task.id, self.backend, Status.ILLEGAL, parsed=True, violations=tuple(violations),
                feedback=compose_feedback(Status.ILLEGAL, details, violations), seconds=seconds,
            )
        seeds = tuple(self._rng.randrange(2**31) for _ in range(self.config.trials + 3))
        return JudgeJob(task, code, self.backend, self.config, seeds, extracted - start, inspected - extracted)

    def evaluate(self, task: Task, text: str) -> EvalResult:
        """Judge one candidate answer (the full text of an LLM response or bare code)."""
        return self.evaluate_many([(task, text)])[0]

    def evaluate_many(self, pairs: Iterable[tuple[Task, str]]) -> list[EvalResult]:
        """Judge many answers; the executor runs the worker stages in parallel."""
        prepared = [self.prepare(task, text) for task, text in pairs]
        jobs = [p for p in prepared if isinstance(p, JudgeJob)]
        judged = iter(self.executor.run_many(jobs) if jobs else [])
        return [next(judged) if isinstance(p, JudgeJob) else p for p in prepared]
