"""``LocalExecutor(judges_per_device=K)``: K judges pinned to each device, sharing its lock (here two on one host "device")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.backends.locks import LOCK_MODE
from kernelgym.errors import KernelGymError
from kernelgym.executor.local import LocalExecutor, device_lock_path
from kernelgym.executor.registry import PoolSettings
from kernelgym.verifier import Status, VerifierConfig


@pytest.mark.slow
def test_two_judges_on_one_device_share_its_lock_and_judge_with_timing(cache_dir: Path, cpu_suite) -> None:
    task = cpu_suite["level1/1_ReLU"]
    executor = LocalExecutor(PoolSettings(backend="cpp", cache_dir=cache_dir), devices=1, judges_per_device=2)
    try:
        assert executor.num_workers == 2
        with Verifier(backend="cpp", executor=executor, config=VerifierConfig(runs=3, warmup=1)) as verifier:
            results = verifier.evaluate_many([(task, task.solution("cpp"))] * 3)
    finally:
        executor.close()
    assert [r.status for r in results] == [Status.OK] * 3, results[0].feedback
    assert all(r.runtime_ms for r in results)
    lock = device_lock_path(cache_dir, 0)  # made by the judges' harnesses as they checked and timed
    assert lock.stat().st_mode & 0o777 == LOCK_MODE


def test_one_judge_per_device_is_the_default_and_shares_nothing(tmp_path: Path) -> None:
    one = LocalExecutor(PoolSettings(backend="cpp", cache_dir=tmp_path), devices=2)
    three = LocalExecutor(PoolSettings(backend="cpp", cache_dir=tmp_path), devices=2, judges_per_device=3)
    try:
        assert one.num_workers == 2 and [w.environment for w in one._judges.workers] == [{}, {}]
        assert three.num_workers == 6
        locks = [next(iter(w.environment.values())) for w in three._judges.workers]
        assert locks == [str(device_lock_path(tmp_path, i % 2)) for i in range(6)]
    finally:
        one.close()
        three.close()
    with pytest.raises(KernelGymError, match="judges_per_device must be at least 1"):
        LocalExecutor(PoolSettings(backend="cpp", cache_dir=tmp_path), devices=1, judges_per_device=0)
