"""Where judges share a device, each stage but the build holds its lock: checks shared, timed calls alone, the wait unbudgeted."""

from __future__ import annotations

import contextlib
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from kernelgym.backends import get_backend
from kernelgym.backends.locks import DEVICE_LOCK_ENV
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier import harness as harness_module
from kernelgym.verifier.harness import Harness, Progress

WAIT = 0.2  # seconds the lock keeps each stage waiting


class RecordingLock:
    """A device lock that keeps its taker waiting :data:`WAIT` seconds (telling it once), and records each hold."""

    def __init__(self) -> None:
        self.holds: list[tuple[Path, bool]] = []

    @contextlib.contextmanager
    def __call__(self, path: Path, exclusive: bool, waiting: Callable[[], None] = lambda: None) -> Iterator[None]:
        waiting()
        time.sleep(WAIT)
        self.holds.append((path, exclusive))
        yield


@pytest.fixture
def lock(monkeypatch: pytest.MonkeyPatch) -> RecordingLock:
    recording = RecordingLock()
    monkeypatch.setattr(harness_module, "device_lock", recording)
    return recording


def _harness(tmp_path: Path, told: list[tuple[str, float]]) -> Harness:
    job = types.SimpleNamespace(config=VerifierConfig(), seeds=[7], strict_rejection=None)
    return Harness(job, get_backend("cpp"), None, tmp_path, tmp_path, lambda *stage: told.append(stage), Progress())


def test_one_judge_per_device_takes_no_lock(tmp_path: Path, lock: RecordingLock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEVICE_LOCK_ENV, raising=False)
    h = _harness(tmp_path, [])
    for name in ("build", "check", "time", "check"):
        with h.stage(name, 5.0):
            pass
    assert h.device_lock is None and lock.holds == []


def test_checks_hold_the_lock_shared_and_the_time_stage_alone(tmp_path: Path, lock: RecordingLock,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "device-0.lock"
    monkeypatch.setenv(DEVICE_LOCK_ENV, str(path))
    told: list[tuple[str, float]] = []
    h = _harness(tmp_path, told)
    with h.stage("build", 30.0):
        pass
    with h.stage("check", 5.0):
        left = h.deadline - harness_module.perf_counter()
    assert 4.5 < left <= 5.0  # the wait was not the stage's: its budget counts from the hold
    assert h.progress.seconds["check"] >= WAIT  # but it is in the stage's wall time
    assert told[-2:] == [("check", 5.0), ("check", 5.0)]  # the watchdog heard of the wait, then of the budget
    with h.stage("time", 7.0):
        pass
    h.progress.timing["runtime_ms"] = 1.0
    with h.stage("check", 5.0):  # after the time stage, on a host: sampling only, nothing timed
        pass
    assert lock.holds == [(path, False), (path, True), (path, False)]


def test_a_check_that_profiles_device_time_holds_the_lock_alone(tmp_path: Path, lock: RecordingLock,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_LOCK_ENV, str(tmp_path / "device-0.lock"))
    h = _harness(tmp_path, [])
    h.device = torch.device("cuda", 0)  # only its type is read: profiling runs on a device
    with h.stage("check", 5.0):
        pass
    h.progress.timing["runtime_ms"] = 1.0  # the time stage credited a time: the answer's kernels are profiled next
    with h.stage("check", 5.0):
        pass
    h.config = VerifierConfig(profile_calls=0)
    with h.stage("check", 5.0):
        pass
    assert [exclusive for _, exclusive in lock.holds] == [False, True, False]
