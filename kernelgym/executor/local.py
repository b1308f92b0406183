"""The embedded default executor: a pool of sandboxed worker processes on this machine.

Holds:
    WorkerHandle: one worker process, spawned fresh (never forked), with per-stage
        wall-clock deadlines; killed with its whole session on timeout or crash.
    failure_result: the result of a job whose worker failed (also used by the Ray pool).
    LocalExecutor: runs many jobs in parallel over a pool of workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path

from kernelgym.backends import get_backend
from kernelgym.executor.registry import PoolSettings, register_executor
from kernelgym.executor.sandbox import SandboxPolicy, kill_session, scrubbed_environment
from kernelgym.verifier.feedback import compose_feedback
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, StageSeconds, Status

__all__ = ["WorkerHandle", "LocalExecutor", "default_cache_dir", "failure_result"]

_STARTUP_SECONDS = 900.0  # importing torch and, once per machine, building the precompiled header


def default_cache_dir() -> Path:
    """``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``."""
    return Path(os.environ.get("KERNELGYM_CACHE", Path.home() / ".cache" / "kernelgym"))


class WorkerHandle:
    """One sandboxed worker process and the protocol to drive it."""

    def __init__(self, backend: str, cache_dir: Path, policy: SandboxPolicy, device_index: int | None = None) -> None:
        self.backend = backend
        self.cache_dir = cache_dir
        self.policy = policy
        self.device_index = device_index
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.work_dir: Path | None = None
        self.confinement = ""

    def _start(self) -> None:
        self.work_dir = Path(tempfile.mkdtemp(prefix="kernelgym-worker-"))
        parent, child = socket.socketpair()
        build_root = self.cache_dir / "builds"
        backend = get_backend(self.backend)
        writable = (str(self.work_dir), str(self.cache_dir), *backend.writable_paths(build_root))
        policy = asdict(self.policy) | {"writable": list(writable)}
        log = open(self.work_dir / "worker.log", "wb")  # noqa: SIM115 (handed to the child)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kernelgym.executor.worker", str(child.fileno()), str(self.work_dir),
                 str(self.cache_dir), json.dumps(policy), self.backend],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=scrubbed_environment(self.work_dir, self.cache_dir, self.policy.threads)
                | backend.worker_environment(self.device_index),
                cwd=self.work_dir,
                start_new_session=True,
            )
        finally:
            child.close()
            log.close()
        self.conn = Connection(parent.detach())
        kind, info = self._receive(_STARTUP_SECONDS)[:2]
        if kind != "ready":
            raise RuntimeError(f"worker failed to start: {info}")
        self.confinement = info

    def _receive(self, timeout: float) -> tuple:
        assert self.conn is not None
        if not self.conn.poll(timeout):
            return ("timeout", None)
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return ("crash", self._crash_reason())

    def _crash_reason(self) -> str:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            reason = f"killed by signal {signal.Signals(-code).name}"
        else:
            reason = f"exited with code {code}"
        tail = ""
        if self.work_dir is not None and (self.work_dir / "worker.log").exists():
            tail = (self.work_dir / "worker.log").read_bytes()[-1500:].decode(errors="replace").strip()
        return f"{reason}" + (f"; last output:\n{tail}" if tail else "")

    def stop(self) -> None:
        """Kill the worker, everything it started, and remove its directory."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.process is not None:
            kill_session(self.process.pid)
            self.process.kill()
            self.process.wait()
            self.process = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def run(self, job: JudgeJob) -> EvalResult:
        """Judge one job; a timeout or crash kills the worker and becomes a result."""
        try:
            if self.process is None:
                self._start()
        except (RuntimeError, OSError) as exc:
            self.stop()
            return failure_result(job, Status.RUNTIME_ERROR, f"The judge's worker could not start: {exc}", "build")
        assert self.conn is not None
        self.conn.send(job)
        timeouts = job.config.timeouts
        budgets = {"build": timeouts.build, "check": timeouts.check, "time": timeouts.time}
        stage, budget = "build", timeouts.build
        while True:
            message = self._receive(budget)
            kind = message[0]
            if kind == "stage":
                stage, budget = message[1], budgets.get(message[1], timeouts.check)
            elif kind == "result":
                result = EvalResult.from_dict(message[1])
                if message[2]:
                    self.stop()
                return result
            elif kind == "timeout":
                self.stop()
                return failure_result(job, Status.TIMEOUT, f"The {stage} stage exceeded its {budget:.0f} s budget; the worker was killed.", stage)
            else:
                reason = message[1]
                self.stop()
                return failure_result(job, Status.RUNTIME_ERROR, f"The worker crashed during the {stage} stage: {reason}", stage)


def failure_result(job: JudgeJob, status: Status, sentence: str, stage: str) -> EvalResult:
    """The result of a job whose worker failed (timeout, crash, lost machine) during ``stage``.

    The job counts as compiled when the failure came after the build stage.
    """
    compiled = stage in ("check", "time")
    score = job.config.reward.score(status, compiled=compiled, correct=False, speedup=None, timing_meaningful=False)
    return EvalResult(
        task_id=job.task.id,
        backend=job.backend,
        status=status,
        parsed=True,
        legal=True,
        compiled=compiled,
        feedback=compose_feedback(status, [sentence]),
        score=score,
        seconds=StageSeconds(extract=job.extract_seconds, inspect=job.inspect_seconds),
        seeds=job.seeds[: job.config.trials + 1],
    )


@register_executor("local")
class LocalExecutor:
    """Evaluate jobs in parallel over sandboxed local worker processes.

    Workers are started lazily, reused across jobs, and replaced after a crash,
    a timeout or a suspicious result. Candidate code never runs in this process.
    For a GPU backend the default is one worker per visible GPU, each pinned to
    its own GPU; more workers than GPUs share them round-robin.

    Args:
        settings: backend, workers (default: one per visible GPU, else up to four), cache and
            worker limits.

    Example:
        >>> ex = LocalExecutor(PoolSettings(backend="cpp", num_workers=1))
        >>> ex.close()
    """

    def __init__(self, settings: PoolSettings | None = None) -> None:
        settings = settings or PoolSettings()
        self.backend = backend = settings.backend
        self.cache_dir = Path(settings.cache_dir) if settings.cache_dir is not None else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        backend_obj = get_backend(backend)
        devices = backend_obj.device_count()
        self.num_workers = settings.num_workers or devices or max(1, min(4, os.cpu_count() or 1))
        self.policy = SandboxPolicy(
            memory_gb=settings.memory_limit_gb if backend_obj.address_space_limit_ok else None,
            threads=settings.threads_per_worker,
        )
        self._idle = [
            WorkerHandle(backend, self.cache_dir, self.policy, i % devices if devices else None)
            for i in range(self.num_workers)
        ]
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.num_workers, thread_name_prefix="kernelgym-worker")
        self._closed = False

    def _run_one(self, job: JudgeJob) -> EvalResult:
        with self._lock:
            worker = self._idle.pop()
        try:
            return worker.run(job)
        finally:
            with self._lock:
                self._idle.append(worker)

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]:
        """Judge ``jobs`` in parallel; results in the same order."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        return list(self._pool.map(self._run_one, jobs))

    def close(self) -> None:
        """Stop every worker (and whatever they started)."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        for worker in self._idle:
            worker.stop()
