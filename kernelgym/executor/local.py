"""The embedded default executor: a pool of sandboxed worker processes on this machine.

Holds:
    WorkerHandle: one worker process, spawned fresh (never forked), with per-stage
        wall-clock deadlines; killed with its whole session on timeout or crash.
    failure_result: the result of a job whose worker failed (also used by the Ray pool).
    LocalExecutor: runs many jobs in parallel over a pool of workers; keeps the build cache under its size cap.
    device_lock_path: the lock file the judges of one device share.
    default_cache_dir: re-exported from ``kernelgym.backends.cache``.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, replace
from multiprocessing.connection import Connection
from pathlib import Path

from kernelgym.backends import get_backend
from kernelgym.backends.cache import BuildCache, default_cache_dir
from kernelgym.backends.locks import DEVICE_LOCK_ENV
from kernelgym.backends.store import judge_dir
from kernelgym.errors import KernelGymError
from kernelgym.executor.registry import PoolSettings, register_executor
from kernelgym.executor.sandbox import SandboxPolicy, kill_session, scrubbed_environment
from kernelgym.verifier.channel import BuildsDeferred
from kernelgym.verifier.feedback import conclude, contract_of_rejected
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, StageSeconds, Status

__all__ = ["WorkerHandle", "LocalExecutor", "default_cache_dir", "device_lock_path", "failure_result", "remove_orphaned_work_dirs",
           "with_build", "default_build_workers"]

_STARTUP_SECONDS = 900.0  # importing torch and, once per machine, building the precompiled header
_WORKER_MARGIN_SECONDS = 60.0
_DEFERRED_ROUNDS = 3  # times a judge may send an answer back for builds it asked for late, before it builds them itself
_WORK_DIR_PREFIX = "kernelgym-worker-"
_OWNER_FILE = "owner.pid"


def remove_orphaned_work_dirs() -> None:
    """Remove worker directories whose owning process is gone (a parent killed before it could clean up)."""
    for path in Path(tempfile.gettempdir()).glob(_WORK_DIR_PREFIX + "*"):
        try:
            owner = int((path / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)


class WorkerHandle:
    """One sandboxed worker process and the protocol to drive it."""

    def __init__(self, backend: str, cache_dir: Path, policy: SandboxPolicy, device_index: int | None = None,
                 environment: dict[str, str] | None = None) -> None:
        self.backend = backend
        self.environment = environment or {}
        self.cache_dir = cache_dir
        self.policy = policy
        self.device_index = device_index
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.work_dir: Path | None = None
        self.confinement = ""
        self.closed = False

    def _start(self) -> None:
        if self.closed:
            raise RuntimeError("the judge is shutting down")
        remove_orphaned_work_dirs()
        self.work_dir = Path(tempfile.mkdtemp(prefix=_WORK_DIR_PREFIX))
        (self.work_dir / _OWNER_FILE).write_text(str(os.getpid()))
        parent, child = socket.socketpair()
        backend = get_backend(self.backend)
        # The worker runs no candidate code and is not confined: each candidate's writable paths come from its factory.
        policy = asdict(self.policy)
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
                | backend.worker_environment(self.device_index) | self.environment,
                cwd=self.work_dir,
                start_new_session=True,
            )
        finally:
            child.close()
            log.close()
        self.conn = Connection(parent.detach())
        if self.closed:  # closed while it was being started: stopped here, by the thread that started it
            self.stop()
            raise RuntimeError("the judge is shutting down")
        kind, info = self._receive(_STARTUP_SECONDS)[:2]
        if kind != "ready":
            raise RuntimeError(f"worker failed to start: {info}")
        self.confinement = info

    def _receive(self, timeout: float) -> tuple:
        conn = self.conn
        if conn is None:  # stopped from another thread (the pool was closed)
            return ("crash", "the worker was stopped")
        try:
            if not conn.poll(timeout):
                return ("timeout", None)
            return conn.recv()
        except (EOFError, OSError):
            return ("crash", self._crash_reason())

    def _crash_reason(self) -> str:
        process = self.process
        if process is None:
            return "the worker was stopped"
        try:
            code = process.wait(timeout=5)
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
        process, self.process = self.process, None
        if process is not None:
            kill_session(process.pid)  # first: a thread waiting on the connection then sees it close
            process.kill()
            process.wait()
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def start(self) -> None:
        """Start the worker unless it is running; a start that fails stops what it started and raises."""
        if self.process is not None:
            return
        try:
            self._start()
        except (RuntimeError, OSError):
            self.stop()
            raise

    def run(self, job: JudgeJob) -> EvalResult:
        """Judge one job; a timeout or crash kills the worker and becomes a result."""
        try:
            self.start()
        except (RuntimeError, OSError) as exc:
            return failure_result(job, Status.JUDGE_ERROR, f"The judge's worker could not start: {exc}", "build")
        assert self.conn is not None
        self.conn.send(job)
        stage, budget = "build", job.config.timeouts.build
        while True:
            # The worker enforces each stage's budget on the candidate itself; this deadline only
            # catches a worker that hangs, so it is the stage's budget plus a margin.
            message = self._receive(budget + _WORKER_MARGIN_SECONDS)
            kind = message[0]
            if kind == "stage":
                stage, budget = message[1], float(message[2])
            elif kind == "failed":
                self.stop()
                return failure_result(job, Status.JUDGE_ERROR, f"The judge's worker failed: {message[1]}", stage)
            elif kind == "deferred":  # the answer asked for a build the store did not have: built elsewhere, judged after
                raise BuildsDeferred(message[1])
            elif kind == "result":
                result = message[1]  # the trusted worker's EvalResult, as it made it
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

    The job counts as compiled when the failure came after the build stage. Status ``judge_error``: the
    judge failed before the answer's code ran (a worker or candidate process that could not start, a lost
    machine); ``sentence`` becomes its ``judge_reason``, kept out of the feedback. A job carrying a strict
    ``illegal`` verdict (judged under KernelBench's contract only) keeps it, the failure as its contract verdict.
    """
    result = conclude(
        job.task.id,
        job.backend,
        status,
        reward=job.config.reward,
        details=[sentence],
        compiled=stage in ("check", "time"),
        seconds=StageSeconds(extract=job.extract_seconds, inspect=job.inspect_seconds),
        seeds=job.seeds[: job.config.trials + 1],
        rules=job.config.rules,
        weights=job.config.weights,
    )
    return result if job.strict_rejection is None else contract_of_rejected(job.strict_rejection, result)


class _WorkerPool:
    """Workers of one kind and the threads that drive them; a job takes whichever worker is idle.

    Waiting jobs are taken oldest answer first (``order``: the answer's place in submission), not in the order they
    reached this pool: an answer back from a build worker with the build its call asked for goes ahead of answers
    submitted after it, instead of behind every one of them.
    """

    def __init__(self, workers: list[WorkerHandle], name: str) -> None:
        self.workers = list(workers)
        self.idle = list(workers)
        self.lock = threading.Lock()
        self.threads = ThreadPoolExecutor(len(workers), thread_name_prefix=name)
        self.waiting: list[tuple[int, int, JudgeJob, Future[EvalResult]]] = []
        self.arrivals = itertools.count()

    def _run(self, job: JudgeJob) -> EvalResult:
        with self.lock:
            worker = self.idle.pop()
        try:
            return worker.run(job)
        finally:
            with self.lock:
                self.idle.append(worker)

    def _run_oldest(self) -> None:
        with self.lock:
            if not self.waiting:  # emptied by close()
                return
            _, _, job, future = heapq.heappop(self.waiting)
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(self._run(job))
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's future)
            future.set_exception(exc)

    def submit(self, job: JudgeJob, order: int | None = None) -> Future[EvalResult]:
        """Queue ``job``; ``order`` (default: its arrival here) ranks it among the waiting jobs, lowest first."""
        future: Future[EvalResult] = Future()
        with self.lock:
            arrival = next(self.arrivals)
            heapq.heappush(self.waiting, (arrival if order is None else order, arrival, job, future))
        self.threads.submit(self._run_oldest)
        return future

    def warm(self) -> None:
        """Start the idle workers not started yet, each in one of the pool's threads; a job queued meanwhile waits
        for the first that is ready. A start that fails is tried again, and reported, by the next job it gets."""
        with self.lock:
            cold = [worker for worker in self.idle if worker.process is None]
            for worker in cold:
                self.idle.remove(worker)
        for worker in cold:
            self.threads.submit(self._start, worker)

    def _start(self, worker: WorkerHandle) -> None:
        try:
            with contextlib.suppress(RuntimeError, OSError):  # tried again, and reported, by its next job
                worker.start()
        finally:
            with self.lock:
                self.idle.append(worker)

    def close(self) -> None:
        """Stop every worker, busy ones included (a job still running ends as a crash), then the threads."""
        self.threads.shutdown(wait=False, cancel_futures=True)
        with self.lock:
            waiting, self.waiting = self.waiting, []
        for *_, future in waiting:  # never started: their callers see them cancelled
            future.cancel()
        for worker in self.workers:
            worker.closed = True
            worker.stop()
        self.threads.shutdown(wait=True)


@register_executor("local")
class LocalExecutor:
    """Evaluate jobs in parallel over sandboxed local worker processes.

    Workers are started at the first job (with build workers, the judges start
    while the first answers build), reused across jobs, and replaced after a crash
    or a timeout. Candidate code never runs in this process (nor in a worker:
    each answer runs in a candidate process of its own). For a GPU backend the
    default is one judge worker per visible GPU, each pinned to its own GPU, and
    a pipeline: build workers without a GPU compile answers ahead on the other
    CPU cores while the judge workers check and time whatever is built, so no
    GPU waits on a compiler and timing never shares a GPU. Judges that share a
    device (``judges_per_device`` above 1, or more ``num_workers`` than devices)
    share its lock (:func:`~kernelgym.backends.locks.device_lock`): they check
    side by side, and each times alone. The build cache is
    trimmed to its size cap (``cache_max_gb``, else ``$KERNELGYM_CACHE_MAX_GB``, else
    5 GB; least recently used builds first, never one in use) when the executor
    starts and when it closes.

    Args:
        settings: backend, judge workers (default: ``judges_per_device`` per visible GPU, else up to four), cache
            and worker limits.
        build_workers: build-ahead workers (default: :func:`default_build_workers` on a GPU backend that
            supports building without a GPU; 0 elsewhere).
        cache_max_gb: the build cache's size cap.
        first_cpu: index (into the CPUs this process may use) of the first judge's CPU; judge ``i`` gets
            ``first_cpu + i`` and the build workers share those after the judges'. A Ray pool runs one
            such executor per actor, several on a node, and gives each its own CPUs.
        worker_cpus: CPUs of each judge worker from its first (a Ray build actor's worker: every CPU but the judges').
        devices: devices the judges are pinned to, one each in turn (default: the backend's visible devices,
            which imports the device library; a Ray actor, whose devices Ray assigned, passes them and starts
            its worker without that import).
        builds_only: every worker only builds (a Ray build actor's): see ``SandboxPolicy.builds_only``.
        judges_per_device: judges pinned to each device by default (judge ``i`` to device ``i % devices``). While one
            times (or profiles its kernels' device time) on a device, no other judge there checks or times.

    Raises:
        KernelGymError: ``judges_per_device`` is below 1.

    Example:
        >>> ex = LocalExecutor(PoolSettings(backend="cpp", num_workers=1))
        >>> ex.close()
    """

    def __init__(self, settings: PoolSettings | None = None, build_workers: int | None = None,
                 cache_max_gb: float | None = None, first_cpu: int = 0, worker_cpus: int = 1,
                 devices: int | None = None, builds_only: bool = False, judges_per_device: int = 1) -> None:
        if judges_per_device < 1:
            raise KernelGymError(f"judges_per_device must be at least 1, not {judges_per_device}")
        settings = settings or PoolSettings()
        self.backend = backend = settings.backend
        self.cache_dir = Path(settings.cache_dir) if settings.cache_dir is not None else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.build_cache = BuildCache(self.cache_dir, None if cache_max_gb is None else int(cache_max_gb * 1e9))
        self.build_cache.enforce_cap()
        backend_obj = get_backend(backend)
        devices = backend_obj.device_count() if devices is None else devices
        self.num_workers = settings.num_workers or devices * judges_per_device or max(1, min(4, os.cpu_count() or 1))
        # A worker with a device has no address-space limit (a device runtime reserves terabytes); asked of a Triton
        # backend told its devices, that would import torch to find a GPU it was given.
        limit_ok = backend_obj.device_type == "cpu" if devices else backend_obj.address_space_limit_ok
        self.policy = SandboxPolicy(
            memory_gb=settings.memory_limit_gb if limit_ok else None,
            threads=settings.threads_per_worker,
            builds_only=builds_only,
        )
        shared = self.num_workers > devices > 0  # judges share a device: each holds its lock (judges_per_device)
        judges = [
            WorkerHandle(backend, self.cache_dir, replace(self.policy, cpu=first_cpu + i, cpu_count=worker_cpus),
                         i % devices if devices else None,
                         {DEVICE_LOCK_ENV: str(device_lock_path(self.cache_dir, i % devices))} if shared else None)
            for i in range(self.num_workers)
        ]
        self._judges = _WorkerPool(judges, "kernelgym-judge")
        build_env = backend_obj.build_worker_environment() if devices and build_workers != 0 else None
        if build_workers is None:
            build_workers = default_build_workers(self.num_workers) if build_env is not None else 0
        self._builders = None
        if build_workers and build_env is not None:
            # Builders share every CPU the judges do not use, so a build's compile steps run side by side.
            shared = replace(self.policy, cpu=first_cpu + self.num_workers,
                             cpu_count=max(1, len(os.sched_getaffinity(0)) - first_cpu - self.num_workers), builds_only=True)
            builders = [WorkerHandle(backend, self.cache_dir, shared, None, build_env) for _ in range(build_workers)]
            self._builders = _WorkerPool(builders, "kernelgym-build")
        self._closed = False
        self._submitted = itertools.count()

    def submit(self, job: JudgeJob) -> Future[EvalResult]:
        """Start judging ``job``; the future's result is its :class:`EvalResult`."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        order = next(self._submitted)
        if self._builders is None or job.build_only:
            return self._judges.submit(job, order)
        # The judges start (a device context, a candidate forked ahead) while the first answers build.
        self._judges.warm()
        judged: Future[EvalResult] = Future()
        self._build_then_judge(replace(job, defer_builds=True), judged, 0, order=order)
        return judged

    def _build_then_judge(self, job: JudgeJob, judged: Future[EvalResult], rounds: int,
                          prebuild: tuple[dict, ...] = (), built_before: float = 0.0, order: int | None = None) -> None:
        """Build ``job`` ahead (with ``prebuild``, the builds a judge left), then judge it; a judge that meets a build
        the store does not have sends the job back here with it, up to :data:`_DEFERRED_ROUNDS` times (then the
        judge builds the rest itself). A slow build holds a build worker, never a judge. Each pool takes its waiting
        jobs in ``order`` (the answer's place in submission): a job sent back goes ahead of answers submitted after it."""
        assert self._builders is not None

        def built(build: Future[EvalResult]) -> None:
            try:
                result = build.result()
            except BaseException as exc:  # noqa: BLE001 (handed to the caller's future)
                judged.set_exception(exc)
                return
            result = _with_build_seconds(result, built_before)
            if result.status is not Status.OK:  # it did not build: that is the verdict
                judged.set_result(result)
                return
            try:
                self._judges.submit(job, order).add_done_callback(lambda final: judged_once(final, result))
            except RuntimeError as exc:  # closed meanwhile
                judged.set_exception(exc)

        def judged_once(final: Future[EvalResult], build: EvalResult) -> None:
            deferred = final.exception()
            if isinstance(deferred, BuildsDeferred):
                again = job if rounds + 1 < _DEFERRED_ROUNDS else replace(job, defer_builds=False)
                try:
                    self._build_then_judge(again, judged, rounds + 1, tuple(deferred.requests), build.seconds.build, order)
                except RuntimeError as exc:  # closed meanwhile
                    judged.set_exception(exc)
                return
            _forward(final, judged, build)

        self._builders.submit(replace(job, build_only=True, defer_builds=False, prebuild=prebuild), order).add_done_callback(built)

    def warm(self) -> None:
        """Start every worker now, in the background (jobs submitted meanwhile wait for them).

        Without it, judges start at the first job and build workers at the first build. A Ray actor
        calls it as it is made, so its worker's start (seconds: torch, a device context, a candidate
        forked ahead) runs while the pool's other actors start and build.
        """
        self._judges.warm()
        if self._builders is not None:
            self._builders.warm()

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]:
        """Judge ``jobs`` in parallel; results in the same order."""
        return [future.result() for future in [self.submit(job) for job in jobs]]

    def close(self) -> None:
        """Stop every worker (and whatever they started)."""
        if self._closed:
            return
        self._closed = True
        if self._builders is not None:
            self._builders.close()
        self._judges.close()
        self.build_cache.enforce_cap()


def device_lock_path(cache_dir: Path, device_index: int) -> Path:
    """The lock the judges pinned to device ``device_index`` share, in the judge's own directory beside ``cache_dir``.

    Example:
        >>> device_lock_path(Path("/cache/kernelgym"), 1).as_posix()
        '/cache/kernelgym.trusted/devices/device-1.lock'
    """
    return judge_dir(cache_dir) / "devices" / f"device-{device_index}.lock"


def default_build_workers(judges: int) -> int:
    """Build-ahead workers beside ``judges``: half the CPUs, less the judges, as memory allows (4 GB each).

    A CUDA build is mostly one single-threaded nvcc, yet one build worker per CPU did not pay on a 16-CPU H100 host
    (``benchmarks/results/kernelbench-scale.md``): with 14 workers each build took 54-63 s instead of 39-54 s with
    7, the first verdict came at 79 s instead of 61 s, and after it the judge, not the builds, set the pace. Each
    worker holds torch, its candidate factory and one nvcc over torch's headers at a time.
    """
    cpus = len(os.sched_getaffinity(0))
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    return max(0, min(cpus // 2 - judges, int(memory_gb // 4)))


def with_build(built: EvalResult | None, judged: EvalResult) -> EvalResult:
    """The judge's result, with the build-ahead step's cost and cache use (the judge's own build was a lookup)."""
    if built is None or built.status is not Status.OK:
        return judged
    return _with_build_seconds(judged, built.seconds.build).with_changes(cache_hit=built.cache_hit and judged.cache_hit)


def _with_build_seconds(result: EvalResult, seconds: float) -> EvalResult:
    """``result`` with ``seconds`` more of build time (a build-ahead step's, earlier rounds' of the same answer)."""
    if not seconds:
        return result
    return result.with_changes(seconds=replace(result.seconds, build=round(result.seconds.build + seconds, 6)))


def _forward(source: Future[EvalResult], target: Future[EvalResult], built: EvalResult) -> None:
    try:
        target.set_result(with_build(built, source.result()))
    except BaseException as exc:  # noqa: BLE001 (handed to the caller's future)
        target.set_exception(exc)
