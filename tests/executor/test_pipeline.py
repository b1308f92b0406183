"""Futures and the build-ahead pipeline: ``Verifier.submit``/``as_completed`` and ``LocalExecutor`` with build workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.backends.cpp import CppBackend
from kernelgym.executor.local import LocalExecutor, default_build_workers, with_build
from kernelgym.executor.registry import PoolSettings
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.result import EvalResult, StageSeconds

pytestmark = pytest.mark.slow

CONFIG = VerifierConfig(runs=3, warmup=1)


def test_submit_returns_futures_that_complete_as_judged(cache_dir: Path, cpu_suite) -> None:
    task = cpu_suite["level1/1_ReLU"]
    with Verifier(backend="cpp", num_workers=2, cache_dir=cache_dir, config=CONFIG) as verifier:
        futures = [verifier.submit(task, task.solution("cpp")), verifier.submit(task, "no code at all")]
        assert futures[1].done() and futures[1].result().status is Status.FORMAT_ERROR  # static stages run at once
        finished = list(Verifier.as_completed(futures, timeout=900))
        assert set(finished) == set(futures)
        assert futures[0].result().status is Status.OK, futures[0].result().feedback


def test_build_many_builds_ahead_and_the_judgement_then_finds_the_build(cache_dir: Path, cpu_suite) -> None:
    task = cpu_suite["level1/1_ReLU"]
    with Verifier(backend="cpp", num_workers=2, cache_dir=cache_dir, config=CONFIG) as verifier:
        built = verifier.build_many([(task, "no code at all"), (task, task.solution("cpp"))])
        assert [r.status for r in built] == [Status.FORMAT_ERROR, Status.OK]
        assert built[1].speedup_eager is None  # built, not judged: nothing was timed
        judged = verifier.evaluate(task, task.solution("cpp"))
        assert judged.status is Status.OK and judged.cache_hit, judged.feedback


def test_build_workers_compile_ahead_and_a_failed_build_is_the_verdict(cache_dir: Path, cpu_suite, monkeypatch) -> None:
    # The cpp backend builds where it runs; pretend it can build apart, as the cuda backend does on a GPU host.
    monkeypatch.setattr(CppBackend, "build_worker_environment", lambda self: {})
    monkeypatch.setattr(CppBackend, "device_count", lambda self: 1)
    task = cpu_suite["level1/1_ReLU"]
    broken = task.solution("cpp").replace("return out;", "return out")
    executor = LocalExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), build_workers=1)
    warmed = []
    monkeypatch.setattr(executor._judges, "warm", lambda: warmed.append(True))
    try:
        assert executor._builders is not None
        with Verifier(backend="cpp", executor=executor, config=CONFIG) as verifier:
            good, bad = verifier.evaluate_many([(task, task.solution("cpp")), (task, broken)])
    finally:
        executor.close()
    assert good.status is Status.OK, good.feedback
    assert bad.status is Status.COMPILE_ERROR and not bad.correct
    assert warmed  # the judges were told to start while the answers built
    assert good.seconds.build > 0.0  # the build-ahead step's seconds, not only the judge's lookup


def test_a_verdict_after_a_build_ahead_carries_the_build_steps_seconds_and_cache_use() -> None:
    built = EvalResult(task_id="level1/1_ReLU", backend="cpp", status=Status.OK, seconds=StageSeconds(build=12.5))
    judged = built.with_changes(seconds=StageSeconds(build=0.25, check=1.0, time=2.0), cache_hit=True)
    merged = with_build(built, judged)
    assert merged.seconds == StageSeconds(build=12.75, check=1.0, time=2.0) and not merged.cache_hit
    failed = built.with_changes(status=Status.COMPILE_ERROR)
    assert with_build(failed, judged) is judged and with_build(None, judged) is judged


def test_a_warmed_pool_starts_its_worker_before_any_job_and_judges_with_it(cache_dir: Path, cpu_suite) -> None:
    task = cpu_suite["level1/1_ReLU"]
    executor = LocalExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir))
    try:
        worker = executor._judges.workers[0]
        assert worker.process is None
        executor._judges.warm()
        executor._judges.threads.submit(lambda: None).result(timeout=300)  # the one thread has finished the start
        assert worker.process is not None and "trusted worker" in worker.confinement
        pid = worker.process.pid
        verifier = Verifier(backend="cpp", executor=executor, config=CONFIG)
        assert verifier.evaluate(task, task.solution("cpp")).status is Status.OK
        assert worker.process is not None and worker.process.pid == pid
    finally:
        executor.close()


def test_build_workers_default_to_half_the_cpus_less_the_judges_as_memory_allows(monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)))
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": 128 * 1024**3 // 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert default_build_workers(1) == 7  # a 16-CPU host with one GPU
    pages["SC_PHYS_PAGES"] = 8 * 1024**3 // 4096
    assert default_build_workers(1) == 2  # 4 GB a build worker
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert default_build_workers(2) == 0


def test_a_build_ahead_worker_builds_without_watching_global_state_and_refuses_to_judge(cache_dir: Path, cpu_suite) -> None:
    """Its candidates skip the global-state snapshot (importing ``torch._dynamo`` for it took seconds of every build
    worker's start); the judge that gives the verdict watches it, and a build worker never judges."""
    from dataclasses import replace

    from kernelgym.executor.local import WorkerHandle
    from kernelgym.executor.sandbox import SandboxPolicy

    task = cpu_suite["level1/1_ReLU"]
    # Given to the workers as it is (the static rules would refuse it first): its import changes the thread count.
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=CONFIG) as verifier:
        clean = verifier.prepare(task, task.solution("cpp"))
        assert not isinstance(clean, EvalResult)
        job = replace(clean, code="import torch\ntorch.set_num_threads(3)\n" + clean.code)
        judged = verifier.executor.run_many([job])[0]
    assert judged.status is Status.ILLEGAL and "thread count" in judged.feedback, judged.feedback
    worker = WorkerHandle("cpp", cache_dir, SandboxPolicy(builds_only=True))
    try:
        built = worker.run(replace(job, build_only=True))
        refused = worker.run(job)
    finally:
        worker.stop()
    assert built.status is Status.OK, built.feedback
    assert refused.status is Status.JUDGE_ERROR and "only builds" in refused.judge_reason, refused.judge_reason


class _HeldWorker:
    """A stand-in worker: records the jobs it runs; the first waits until released."""

    def __init__(self) -> None:
        import threading

        self.ran: list[str] = []
        self.release = threading.Event()
        self.started = threading.Event()

    def run(self, job: str) -> str:
        self.ran.append(job)
        if len(self.ran) == 1:
            self.started.set()
            assert self.release.wait(10)
        return job

    def stop(self) -> None:
        pass


def test_a_pool_takes_its_waiting_jobs_oldest_answer_first() -> None:
    from kernelgym.executor.local import _WorkerPool

    worker = _HeldWorker()
    pool = _WorkerPool([worker], "test")  # type: ignore[list-item]
    try:
        first = pool.submit("first", 0)  # type: ignore[arg-type]
        assert worker.started.wait(10)
        # Waiting while the one worker is busy: a new answer (order 7), then one submitted earlier and sent back (3).
        later, sent_back = pool.submit("later", 7), pool.submit("sent back", 3)  # type: ignore[arg-type]
        worker.release.set()
        assert [f.result(timeout=10) for f in (first, sent_back, later)] == ["first", "sent back", "later"]
        assert worker.ran == ["first", "sent back", "later"]
    finally:
        pool.close()
