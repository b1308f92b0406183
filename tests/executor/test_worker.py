"""The trusted judge worker: its CPUs, its start-up handshake and one-time builds, and how it ends."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernelgym.backends.native import floor_record, floor_stores
from kernelgym.executor.local import WorkerHandle, failure_result
from kernelgym.executor.sandbox import SandboxPolicy
from kernelgym.executor.worker import _cpus
from kernelgym.tasks import load_suite
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import Status


def test_judges_get_one_cpu_each_and_builders_share_the_rest() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    judge, spare_cpus = _cpus(SandboxPolicy(cpu=0))
    assert judge == {allowed[0]}
    assert spare_cpus == (set(allowed) - judge or judge)
    builders, _ = _cpus(SandboxPolicy(cpu=1, cpu_count=len(allowed) - 1))
    assert builders == set(allowed[1:]) or len(allowed) == 1
    assert _cpus(SandboxPolicy())[0] == set(allowed)


def test_a_worker_starts_pinned_says_how_it_is_confined_and_leaves_nothing_behind(cache_dir: Path) -> None:
    handle = WorkerHandle("cpp", cache_dir, SandboxPolicy(memory_gb=None, cpu=0))
    try:
        handle.start()
        assert handle.process is not None and handle.work_dir is not None
        assert os.sched_getaffinity(handle.process.pid) == {sorted(os.sched_getaffinity(0))[0]}
        assert "trusted worker" in handle.confinement
        # its one-time builds are done before it says ready: the judge's floor, and the candidates' copy of it
        judge_store, candidate_store = floor_stores(cache_dir)
        assert floor_record("cpp", judge_store).exists()
        assert json.loads(floor_record("cpp", candidate_store).read_text()) == json.loads(floor_record("cpp", judge_store).read_text())
        work_dir = handle.work_dir
    finally:
        handle.stop()
    assert handle.process is None and not work_dir.exists()


def test_a_worker_whose_caller_hangs_up_exits_cleanly(cache_dir: Path) -> None:
    handle = WorkerHandle("cpp", cache_dir, SandboxPolicy(memory_gb=None))
    try:
        handle.start()
        process = handle.process
        assert process is not None and handle.conn is not None
        handle.conn.send(None)  # the caller's "no more jobs"
        assert process.wait(timeout=60) == 0
    finally:
        handle.stop()


def test_a_failure_of_the_judge_is_flagged_and_says_it_is_not_the_answers() -> None:
    suite = load_suite("cpu")
    task = suite[suite.ids()[0]]
    job = JudgeJob(task, "class ModelNew: ...", "cpp", VerifierConfig(), seeds=(1, 2, 3, 4))
    judged = failure_result(job, Status.JUDGE_ERROR, "The judge's worker failed: boom", "build")
    assert judged.judge_error and judged.score == 0.0 and judged.judge_reason == "The judge's worker failed: boom"
    assert "boom" not in judged.feedback and "Hint" not in judged.feedback and "not counted" in judged.feedback
    crashed = failure_result(job, Status.RUNTIME_ERROR, "The worker crashed during the check stage: SIGSEGV", "check")
    assert crashed.flags == () and crashed.compiled


class _Device:
    """Stands in for a GPU backend: what its memory reading says."""

    def __init__(self, reading: tuple[int, int] | None) -> None:
        self.reading = reading

    def memory_held_elsewhere(self, processes: int) -> tuple[int, int]:
        if self.reading is None:
            raise RuntimeError("no device")
        return self.reading


def test_a_device_out_of_memory_is_the_judges_failure_when_other_processes_held_the_device() -> None:
    """At 2655f3a an honest answer's timed call ran out of memory with another process holding 76.79 of 79.18 GiB, and
    was paid out as its ``runtime_error``. The worker reads the device itself, after the candidate's process is gone."""
    from kernelgym.executor.worker import _unless_memory_held_elsewhere
    from kernelgym.verifier.feedback import conclude
    from kernelgym.verifier.result import Status

    gib = 1024**3
    answer_oom = conclude("level1/84_conv", "cuda", Status.RUNTIME_ERROR, compiled=True,
                          details=["Your forward raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    crowded = _unless_memory_held_elsewhere(answer_oom, _Device((int(76.8 * gib), 80 * gib)), 2)
    assert crowded.status is Status.JUDGE_ERROR and crowded.score == 0.0
    assert "76.8 of its 80.0 GiB" in crowded.judge_reason and "held by processes other" not in crowded.feedback
    assert _unless_memory_held_elsewhere(answer_oom, _Device((2 * gib, 80 * gib)), 2) is answer_oom  # its own
    assert _unless_memory_held_elsewhere(answer_oom, _Device(None), 2) is answer_oom  # no reading: as it was
