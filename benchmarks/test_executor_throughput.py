"""Throughput of the executors on a batch of 16 CPU candidates, cold and warm build cache; env step overhead.

The batch: the bundled C++ reference solutions of the first 16 tasks of the
``cpu`` suite, prepared once (same seeds) and judged with the default
``VerifierConfig`` by

* ``serial``: ``LocalExecutor(num_workers=1)``, one candidate after another;
* ``local``: ``LocalExecutor(num_workers=2)``;
* ``ray``: ``RayExecutor`` on ``ray.init(num_cpus=2)``: one build actor and
  one judge actor (which builds too when no built candidate waits).

Cold: each round starts from a fresh cache directory that holds only the
precompiled ``torch/extension.h`` (built once per machine), so all 16
candidates compile; one round per executor. Warm: every build is in the cache
(a warm-up batch fills it); three rounds. Workers and actors are started before
the clock runs in both cases. The env benchmark compares ``KernelEnv.step`` with
``Verifier.evaluate`` on the same cached candidate: the difference is the env's
overhead (prompt and feedback text, observation, info).

    pytest benchmarks/test_executor_throughput.py --benchmark-only --benchmark-group-by=group

Results: ``benchmarks/results/executor-throughput.md``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelgym import Verifier
from kernelgym.envs import KernelEnv
from kernelgym.executor import LocalExecutor, PoolSettings, default_cache_dir
from kernelgym.tasks import Task, load_suite
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier.job import JudgeJob

CONFIG = VerifierConfig(seed=0)
BATCH = 16


def _local(workers: int) -> Callable[[Path], Any]:
    return lambda cache: LocalExecutor(PoolSettings("cpp", num_workers=workers, cache_dir=cache))


def _ray(cache: Path) -> Any:
    from kernelgym.executor.ray_pool import RayExecutor

    return RayExecutor(PoolSettings("cpp", num_workers=1, cache_dir=cache), num_builders=1)


EXECUTORS = {"serial": _local(1), "local": _local(2), "ray": _ray}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return list(load_suite("cpu"))[:BATCH]


@pytest.fixture(scope="module")
def jobs(tasks: list[Task]) -> list[JudgeJob]:
    verifier = Verifier(backend="cpp", config=CONFIG)
    prepared = [verifier.prepare(task, task.solution("cpp")) for task in tasks]
    assert all(isinstance(job, JudgeJob) for job in prepared)
    return prepared  # type: ignore[return-value]


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kernelgym-bench-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def pch_only(scratch: Path, tasks: list[Task]) -> Path:
    """A cache holding just the precompiled header (linked from the default cache when it has one)."""
    path = scratch / "pch-only"
    existing = default_cache_dir() / "builds" / "pch"
    if existing.is_dir():
        shutil.copytree(existing, path / "builds" / "pch", copy_function=os.link)
    else:
        executor = LocalExecutor(PoolSettings("cpp", num_workers=1, cache_dir=path))
        _start_workers(executor, tasks[0], 1)  # a fresh worker builds the header
        executor.close()
    return path


@pytest.fixture(scope="module")
def warm_cache(scratch: Path, pch_only: Path, jobs: list[JudgeJob]) -> Path:
    """A cache in which all 16 candidates are built."""
    path = _fresh_cache(scratch, pch_only, "warm")
    executor = LocalExecutor(PoolSettings("cpp", num_workers=2, cache_dir=path))
    assert {r.status.value for r in executor.run_many(jobs)} == {"ok"}
    executor.close()
    return path


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def _fresh_cache(scratch: Path, pch_only: Path, name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    shutil.copytree(pch_only / "builds" / "pch", path / "builds" / "pch", copy_function=os.link)
    return path


def _start_workers(executor: Any, task: Task, count: int) -> None:
    """Run ``count`` trivial jobs so every worker (and actor) is up before timing."""
    job = Verifier(backend="cpp", config=CONFIG).prepare(task, task.solution("cpp"))
    assert isinstance(job, JudgeJob)
    trivial = dataclasses.replace(job, code="no_model_here = 1\n")  # fails fast, in the worker, keeping it
    assert {r.status.value for r in executor.run_many([trivial] * count)} == {"format_error"}


def _workers(executor: Any) -> int:
    return getattr(executor, "num_builders", 0) + executor.num_workers


def _machine_info(benchmark: Any) -> None:
    benchmark.extra_info["cpus"] = os.cpu_count()
    benchmark.extra_info["load_before"] = os.getloadavg()


@pytest.fixture(params=list(EXECUTORS))
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    return request.param


@pytest.mark.benchmark(group="16-cpu-candidates-cold-cache")
def test_cold_cache(benchmark: Any, kind: str, scratch: Path, pch_only: Path, jobs: list[JudgeJob], tasks: list[Task]) -> None:
    made: list[Any] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        executor = EXECUTORS[kind](_fresh_cache(scratch, pch_only, f"cold-{kind}"))
        _start_workers(executor, tasks[0], _workers(executor))
        made.append(executor)
        return (executor,), {}

    _machine_info(benchmark)
    try:
        results = benchmark.pedantic(lambda executor: executor.run_many(jobs), setup=setup, rounds=1, iterations=1)
    finally:
        for executor in made:
            executor.close()
    benchmark.extra_info["load_after"] = os.getloadavg()
    assert [r.status.value for r in results] == ["ok"] * BATCH
    assert not any(r.cache_hit for r in results)


@pytest.mark.benchmark(group="16-cpu-candidates-warm-cache")
def test_warm_cache(benchmark: Any, kind: str, warm_cache: Path, jobs: list[JudgeJob], tasks: list[Task]) -> None:
    executor = EXECUTORS[kind](warm_cache)
    try:
        _start_workers(executor, tasks[0], _workers(executor))
        _machine_info(benchmark)
        results = benchmark.pedantic(executor.run_many, args=(jobs,), rounds=3, iterations=1)
        benchmark.extra_info["load_after"] = os.getloadavg()
    finally:
        executor.close()
    assert [r.status.value for r in results] == ["ok"] * BATCH
    assert all(r.cache_hit for r in results)


@pytest.fixture(scope="module")
def cached_verifier(warm_cache: Path, tasks: list[Task]) -> Iterator[Verifier]:
    verifier = Verifier(backend="cpp", num_workers=1, cache_dir=warm_cache, config=CONFIG)
    assert verifier.evaluate(tasks[0], tasks[0].solution("cpp")).ok  # starts the worker
    yield verifier
    verifier.close()


@pytest.mark.benchmark(group="one-cached-candidate")
def test_verifier_evaluate_cached_candidate(benchmark: Any, cached_verifier: Verifier, tasks: list[Task]) -> None:
    _machine_info(benchmark)
    result = benchmark.pedantic(cached_verifier.evaluate, args=(tasks[0], tasks[0].solution("cpp")), rounds=10, iterations=1)
    assert result.ok and result.cache_hit


@pytest.mark.benchmark(group="one-cached-candidate")
def test_env_step_cached_candidate(benchmark: Any, cached_verifier: Verifier, tasks: list[Task]) -> None:
    env = KernelEnv("cpu", verifier=cached_verifier, max_turns=1_000_000, success_speedup=1e9)
    env.reset(seed=0, options={"task_id": tasks[0].id})
    _machine_info(benchmark)
    info = benchmark.pedantic(lambda: env.step(tasks[0].solution("cpp"))[-1], rounds=10, iterations=1)
    assert info["status"] == "ok" and info["result"]["cache_hit"]
