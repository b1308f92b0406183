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
