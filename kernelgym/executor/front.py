"""The judge's front door: ``Verifier.evaluate``, ``evaluate_many``, ``submit`` (futures) and ``build_many`` (builds ahead).

Holds:
    Verifier: runs the static stages (extract, inspect) in this process and hands the
        rest to an executor whose workers build, check, time and score in a sandbox.

The Verifier pairs the verifier's static stages with an executor, so it sits
above both packages: ``kernelgym.verifier`` never imports ``kernelgym.executor``.
Also exported as ``kernelgym.Verifier`` and ``kernelgym.executor.Verifier``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelgym.backends import get_backend
from kernelgym.executor.registry import Executor, PoolSettings, make_executor
from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult
from kernelgym.verifier.static import run_static_stages

__all__ = ["Verifier"]


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
        self._settings, self._executor_options = PoolSettings.split(
            dict(executor_kwargs, backend=backend, num_workers=num_workers, cache_dir=cache_dir,
                 memory_limit_gb=self.config.memory_limit_gb)
        )
        self._executor: Executor | None = None if isinstance(executor, str) else executor
        self._rng = random.Random(self.config.seed)
        self._threads: ThreadPoolExecutor | None = None

    @property
    def executor(self) -> Executor:
        """The executor, created on first use (so building a Verifier is cheap)."""
        if self._executor is None:
            assert isinstance(self._executor_spec, str)
            self._executor = make_executor(self._executor_spec, self._settings, **self._executor_options)
        return self._executor

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the executor's workers (an executor passed in by the caller is closed too)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def prepare(self, task: Task, text: str) -> EvalResult | JudgeJob:
        """Run the static stages; return the final result if they reject the answer, else the job for a worker.

        Under the ``kernelbench`` preset an answer rejected only for rules KernelBench's contract does not have
        goes to a worker too, carrying its strict verdict, to be judged under that contract (``strict_rejection``).
        """
        outcome = run_static_stages(task, text, self.backend, self.config.rules)
        rejection = outcome.rejection.with_changes(weights=self.config.weights) if outcome.rejection is not None else None
        if rejection is not None and not (outcome.contract_only and self.config.kernelbench_contract):
            return rejection
        seeds = tuple(self._rng.randrange(2**31) for _ in range(self.config.trials + 3))
        return JudgeJob(task, outcome.code, self.backend, self.config, seeds, outcome.seconds.extract, outcome.seconds.inspect,
                        strict_rejection=rejection)

    def evaluate(self, task: Task, text: str) -> EvalResult:
        """Judge one candidate answer (the full text of an LLM response or bare code)."""
        return self.evaluate_many([(task, text)])[0]

    def submit(self, task: Task, text: str) -> Future[EvalResult]:
        """Start judging one answer; the future's result is its :class:`EvalResult`.

        The static stages run now, in this process; the rest runs on the executor, so a
        trainer can keep generating while answers are judged (see :meth:`as_completed`).
        """
        prepared = self.prepare(task, text)
        if not isinstance(prepared, JudgeJob):
            done: Future[EvalResult] = Future()
            done.set_result(prepared)
            return done
        submit = getattr(self.executor, "submit", None)
        if submit is not None:
            return submit(prepared)
        return self._fallback_pool().submit(lambda: self.executor.run_many([prepared])[0])

    def _fallback_pool(self) -> ThreadPoolExecutor:
        # Executors without futures of their own (an added executor with only run_many) are driven from a few local threads.
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kernelgym-submit")
        return self._threads

    @staticmethod
    def as_completed(futures: Iterable[Future[EvalResult]], timeout: float | None = None) -> Iterator[Future[EvalResult]]:
        """The futures of :meth:`submit` as they finish (``concurrent.futures.as_completed``)."""
        return as_completed(list(futures), timeout=timeout)

    def build_many(self, pairs: Iterable[tuple[Task, str]]) -> list[EvalResult]:
        """Build answers ahead, in parallel: the static stages and the build stage only, nothing is judged.

        Builds land in the content-addressed cache, so a later :meth:`evaluate` of the same code
        (in any verifier sharing the cache) finds them built. Each result is the static verdict, a
        build failure, or ``ok`` for "built"; it is not a judgement of the answer.
        """
        prepared = [self.prepare(task, text) for task, text in pairs]
        jobs = [replace(p, build_only=True) for p in prepared if isinstance(p, JudgeJob)]
        submit = getattr(self.executor, "submit", None)
        built = iter([f.result() for f in [submit(job) for job in jobs]] if submit is not None else self.executor.run_many(jobs))
        results = [next(built) if isinstance(p, JudgeJob) else p for p in prepared]
        # An answer illegal by a rule KernelBench's contract lacks was built for that contract's judgement; it stays illegal.
        return [p.strict_rejection if isinstance(p, JudgeJob) and p.strict_rejection is not None else r
                for p, r in zip(prepared, results, strict=True)]

    def evaluate_many(self, pairs: Iterable[tuple[Task, str]]) -> list[EvalResult]:
        """Judge many answers, in the order given, in parallel (through :meth:`submit` where the executor has futures)."""
        pairs = list(pairs)
        if hasattr(self.executor, "submit"):
            return [future.result() for future in [self.submit(task, text) for task, text in pairs]]
        prepared = [self.prepare(task, text) for task, text in pairs]
        jobs = [p for p in prepared if isinstance(p, JudgeJob)]
        judged = iter(self.executor.run_many(jobs) if jobs else [])
        return [next(judged) if isinstance(p, JudgeJob) else p for p in prepared]
