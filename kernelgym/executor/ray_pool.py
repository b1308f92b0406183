"""The Ray executor: the judge spread over a Ray cluster, pipelined and fault tolerant.

Holds:
    RayExecutor: builds candidates ahead on CPU actors while judge actors (one per
        GPU, or CPU actors for the ``cpp`` backend) check and time them; the same
        results as :class:`~kernelgym.executor.local.LocalExecutor`.
    ActorInfo: one actor of the pool as seen from the caller (monitoring, tests).

Every actor wraps a one-worker :class:`~kernelgym.executor.local.LocalExecutor`,
so candidate code runs in the same sandboxed worker process as it does locally,
never in the Ray actor itself. Builds go through the content-addressed cache in
``cache_dir``: a build made by a build actor is found there by the judge actor,
on any node that sees the same directory (a shared file system). ``ray`` is an
optional extra (``pip install 'kernelgym[ray]'``), imported when an executor is made.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import socket
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kernelgym.backends import get_backend
from kernelgym.errors import BackendUnavailableError, require_extra
from kernelgym.executor.local import LocalExecutor, failure_result, with_build
from kernelgym.executor.registry import PoolSettings
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, Status

__all__ = ["RayExecutor", "ActorInfo"]

# A build-ahead result with one of these statuses is final: the judge would
# reach the same verdict from the same sources. Any other failure (e.g. module
# code that needs the GPU a build actor lacks) is judged again on a judge actor.
_FINAL_AFTER_BUILD = (Status.COMPILE_ERROR, Status.FORMAT_ERROR, Status.ILLEGAL, Status.TIMEOUT)

# Deaths of the actor working on one candidate before it is reported as a runtime error.
_MAX_ACTOR_DEATHS = 2

# How long the driver waits for a finished call before it looks at new submissions again.
_POLL_SECONDS = 0.05

# What an actor does in each phase of a candidate, in words, and the stage a failure then counts in
# (``build`` when it is unknown whether the candidate compiled).
_PHASES = {
    "build": ("building", "build"),
    "judge": ("checking and timing", "check"),
    "full": ("building, checking and timing", "build"),
}


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())[:600]


def _only_this_node(ray: Any) -> bool:
    """Whether the Ray cluster is this process's node alone (every actor then runs on this machine)."""
    alive = [node for node in ray.nodes() if node.get("Alive")]
    return len(alive) == 1 and alive[0].get("NodeID") == ray.get_runtime_context().get_node_id()


def _local_cpus(ray_address: str | None) -> dict[str, int]:
    """``num_cpus`` for a new local Ray instance started by a process restricted to some CPUs (``taskset``, a
    scheduler's cpuset): Ray counts the machine's CPUs, so it would place more actors than the process has cores.
    Nothing when joining a cluster (Ray refuses ``num_cpus`` there) or when every CPU is the process's."""
    allowed = len(os.sched_getaffinity(0))
    if ray_address or os.environ.get("RAY_ADDRESS") or allowed >= (os.cpu_count() or allowed):
        return {}
    return {"num_cpus": allowed}


class _SandboxedWorkerActor:
    """Body of every actor of the pool: one sandboxed worker process on the actor's node.

    ``settings.cache_dir=None`` means the node's default cache (``$KERNELGYM_CACHE`` or
    ``~/.cache/kernelgym`` there). ``devices``: the GPUs Ray gave the actor (one for a judge of a GPU backend).
    """

    def __init__(self, settings: PoolSettings, role: str, index: int, judges: int, environment: dict[str, str] | None = None,
                 devices: int = 0) -> None:
        # A build actor's environment (no GPU, the judges' architecture) is set here, before anything asks for a
        # device, and not as a Ray runtime environment: that needs Ray's runtime-env agent on every node.
        os.environ.update(environment or {})
        # Ray binds an actor to no CPU. Judge i's worker gets CPU i of its node, for itself and its candidates; a build
        # actor's worker shares every CPU after the judges' (pinned to the first CPU, all of them had compiled on one).
        # The pool builds ahead itself: no build workers of the actor's own.
        cpus = len(os.sched_getaffinity(0))
        first, count = (index % cpus, 1) if role == "judge" else (judges % cpus, max(1, cpus - judges))
        # Its devices are the ones Ray assigned (``devices``: a judge of a GPU backend has one): counting them here
        # would import torch first, seconds before the worker could start (3 s an actor on an H200 host).
        self._executor = LocalExecutor(dataclasses.replace(settings, num_workers=1), build_workers=0, first_cpu=first,
                                       worker_cpus=count, devices=devices, builds_only=role == "build")
        # Its worker starts now, not at the first job: the judge's start overlaps the first builds (at the first job,
        # a warm pool's first verdict came 42 s after the batch began on an H100, against 20 s locally).
        self._executor.warm()

    def where(self) -> tuple[str, int]:
        """(host name, pid) of the actor process."""
        return socket.gethostname(), os.getpid()

    def build_environment(self, backend: str) -> dict[str, str] | None:
        """What a build worker needs so that its builds share cache keys with this node's judges (see
        :meth:`~kernelgym.backends.base.Backend.build_worker_environment`), read on this actor's node."""
        return get_backend(backend).build_worker_environment()

    def run(self, job: JudgeJob) -> EvalResult:
        """Judge (or, for a ``build_only`` job, build) one candidate in the sandboxed worker."""
        return self._executor.run_many([job])[0]

    def close(self) -> None:
        """Stop the worker process and whatever it started."""
        self._executor.close()


@dataclass(frozen=True)
class ActorInfo:
    """One actor of a :class:`RayExecutor` pool.

    Attributes:
        role: ``"build"`` (builds ahead on a CPU) or ``"judge"`` (checks and times).
        index: position in its role's pool (a replacement keeps the position).
        actor: the Ray actor handle.
        host: host name of the node the actor runs on.
        pid: process id of the actor on that node.
        task_id: the task of the candidate it is working on (``None``: idle).
        replacements: how many actors died in this position and were replaced.
    """

    role: str
    index: int
    actor: Any
    host: str
    pid: int
    task_id: str | None
    replacements: int


class _Slot:
    """A position in the pool: the current actor there and what it is doing (mutable, driver side)."""

    def __init__(self, role: str, index: int, actor: Any) -> None:
        self.role = role
        self.index = index
        self.actor = actor
        self.where = actor.where.remote()  # first call: resolves once the actor is up
        self.candidate: JudgeJob | None = None
        self.task_id: str | None = None
        self.replacements = 0


@dataclass
class _Entry:
    """One submitted candidate (driver side): its job, its future, and what the pool has done with it so far."""

    job: JudgeJob
    future: Future[EvalResult]
    build: EvalResult | None = None  # the build-ahead step's result, merged into the verdict
    deaths: int = 0  # deaths of the actor working on it


class RayExecutor:
    """Judge candidates on a Ray cluster: builds on CPU actors, checks and timing on judge actors.

    The pool has ``num_builders`` build actors (one CPU each) and ``num_workers``
    judge actors: one per GPU (``num_gpus=1``) for a GPU backend, one CPU each
    for ``cpp``. A candidate is first built by a build actor (a ``build_only``
    job that fills the content-addressed cache), then judged in full by a judge
    actor, whose build step is a cache hit. The two stages overlap: while judge
    actors check and time, build actors build the next candidates, and a judge
    actor always takes a built candidate before anything else, so it never idles
    while built candidates wait. At most ``max_in_flight`` candidates are
    admitted at once (building, built and waiting, or being judged).

    An actor that dies (killed, out of memory, node lost) is replaced and its
    candidate retried once on the replacement; a second death is reported as a
    ``runtime_error`` result giving the reason. Results come back in the order
    of the jobs and equal those of :class:`~kernelgym.executor.local.LocalExecutor`
    (timings aside): ``cache_hit`` and the build seconds are those of the build step.

    Args:
        settings: backend, judge actors (``num_workers``; default: the cluster's GPUs for a
            GPU backend, half its CPUs, at least one, for ``cpp``), cache and worker limits;
            give a ``cache_dir`` on a file system shared by every node for builds to be reused
            across nodes (default: each node's ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``).
        ray_address: the cluster to join when Ray is not initialised yet
            (``"auto"``, ``"ray://head:10001"``, ...; ``None``: ``$RAY_ADDRESS``
            or a new local instance, given the CPUs this process may use). The executor then shuts Ray down on close.
        num_builders: build actors (default: the CPUs the judges leave, at most
            eight per judge); ``0`` turns the build-ahead stage off. On a GPU backend they build for
            the judges' architecture (read on a judge's node); a backend that builds where it runs
            (Triton), or a node where it cannot be read, gets none.
        max_in_flight: candidates admitted at once (default: builders + 2 x judges).
        judges_build_when_idle: a judge actor with no built candidate waiting
            builds and judges a new one itself (default: on for CPU backends,
            off for GPU backends, where it would hold the GPU during a build).
        runtime_env: Ray runtime environment, used when this executor initialises Ray.
        resources: custom Ray resources each actor requires, e.g. ``{"kernelgym_judge": 1}``: actors
            then start only on nodes started with that resource (``ray start --resources=...``), which
            keeps judges off the nodes that train (see ``kernelgym.training.judge_placement``).

    Raises:
        MissingExtraError: ``ray`` is not installed.
        BackendUnavailableError: a GPU backend on a cluster without GPUs.

    Example:
        >>> with_ray = RayExecutor(PoolSettings(backend="cpp", num_workers=1), num_builders=1)  # doctest: +SKIP
        >>> with_ray.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        settings: PoolSettings | None = None,
        ray_address: str | None = None,
        num_builders: int | None = None,
        max_in_flight: int | None = None,
        judges_build_when_idle: bool | None = None,
        runtime_env: dict[str, Any] | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        self._ray = require_extra("ray", "ray")
        settings = settings or PoolSettings()
        self.backend = backend = settings.backend
        num_workers = settings.num_workers
        self._owns_ray = not self._ray.is_initialized()
        if self._owns_ray:
            cpus_kwarg = _local_cpus(ray_address)
            try:
                self._ray.init(address=ray_address, runtime_env=runtime_env, **cpus_kwarg)
            except ValueError:
                if not cpus_kwarg:
                    raise
                # Ray found a cluster started on this machine (``ray start``) and joins it, which refuses ``num_cpus``.
                self._ray.init(address=ray_address, runtime_env=runtime_env)
        cluster = self._ray.cluster_resources()
        cpus, gpus = int(cluster.get("CPU", 1)), int(cluster.get("GPU", 0))
        on_gpu = get_backend(backend).device_type != "cpu"
        if on_gpu and gpus == 0 and not num_workers:
            raise BackendUnavailableError(f"backend {backend!r} needs GPUs, and the Ray cluster has none")
        self.num_workers = num_workers or (gpus if on_gpu else max(1, cpus // 2))
        self.num_builders = num_builders if num_builders is not None else max(0, min(cpus - self.num_workers, 8 * self.num_workers))
        self.max_in_flight = max(1, max_in_flight or self.num_builders + 2 * self.num_workers)
        self.judges_build_when_idle = not on_gpu if judges_build_when_idle is None else judges_build_when_idle
        if self.num_workers + self.num_builders > cpus or (on_gpu and self.num_workers > gpus):
            warnings.warn(
                f"the Ray cluster has {cpus} CPUs and {gpus} GPUs; {self.num_workers} judge and {self.num_builders} "
                "build actors will wait until it grows", stacklevel=2,
            )
        body = self._ray.remote(_SandboxedWorkerActor)
        cache_dir = settings.cache_dir
        args = (dataclasses.replace(settings, cache_dir=str(cache_dir) if cache_dir is not None else None),)
        custom = dict(resources or {})
        gpus_each = 1 if on_gpu else 0
        judge = body.options(num_cpus=1, num_gpus=gpus_each, resources=custom)

        def make_judge(i: int) -> Any:
            return judge.remote(*args, "judge", i, self.num_workers, devices=gpus_each)

        judges = [_Slot("judge", i, make_judge(i)) for i in range(self.num_workers)]
        # Build actors have no GPU: they target the judges' architecture, read where a judge runs. Without it their
        # builds would target every architecture and have other cache keys: every answer built again by its judge.
        # On a cluster of this one node (a local Ray) that is here, so the build actors start beside the judges
        # instead of once a judge actor is up.
        build_env = None
        if on_gpu and self.num_builders:
            build_env = (get_backend(backend).build_worker_environment() if _only_this_node(self._ray)
                         else self._ray.get(judges[0].actor.build_environment.remote(backend)))
        if on_gpu and not build_env:  # a backend that builds where it runs (Triton), or no architecture to read
            self.num_builders = 0
        builder = body.options(num_cpus=1, num_gpus=0, resources=custom)
        self._make = {"build": lambda i: builder.remote(*args, "build", i, self.num_workers, build_env),
                      "judge": make_judge}
        self._slots = {
            "build": [_Slot("build", i, self._make["build"](i)) for i in range(self.num_builders)],
            "judge": judges,
        }
        self._state_lock = threading.Lock()  # slots, read by actors() from other threads
        # The pipeline (driver side): candidates not admitted yet, built ones waiting for a judge actor, and the
        # count admitted and not finished (the in-flight bound applies to it); the driver thread starts on first use.
        self._wake = threading.Condition()
        self._waiting: collections.deque[_Entry] = collections.deque()
        self._built: collections.deque[_Entry] = collections.deque()
        self._admitted = 0
        self._driver: threading.Thread | None = None
        self._closed = False

    # --- introspection ---------------------------------------------------------

    def actors(self, timeout: float = 300.0) -> list[ActorInfo]:
        """The pool's actors now, waiting up to ``timeout`` seconds for each to be up."""
        with self._state_lock:
            slots = [(s, s.actor, s.where, s.task_id, s.replacements) for role in ("build", "judge") for s in self._slots[role]]
        infos = []
        for slot, actor, where, task_id, replacements in slots:
            host, pid = self._ray.get(where, timeout=timeout)
            infos.append(ActorInfo(slot.role, slot.index, actor, host, pid, task_id, replacements))
        return infos

    def queued(self) -> dict[str, int]:
        """Candidates in the pipeline now: ``waiting`` (not admitted yet), ``built`` (waiting for a judge actor), ``admitted``."""
        with self._wake:
            return {"waiting": len(self._waiting), "built": len(self._built), "admitted": self._admitted}

    # --- running ---------------------------------------------------------------

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]:
        """Judge ``jobs`` over the pool, pipelined; results in the same order."""
        return [future.result() for future in [self.submit(job) for job in jobs]]

    def submit(self, job: JudgeJob) -> Future[EvalResult]:
        """Admit ``job`` into the pool's pipeline; the future's result is its :class:`EvalResult`.

        Candidates submitted from any thread share one pipeline: build actors build the next ones while
        the judge actors judge (a ``submit`` per answer, as :meth:`Verifier.submit` makes, is as fast as
        one ``run_many`` of them all).
        """
        future: Future[EvalResult] = Future()
        with self._wake:
            if self._closed:
                raise RuntimeError("this executor is closed")
            self._waiting.append(_Entry(job, future))
            if self._driver is None:
                self._driver = threading.Thread(target=self._drive, name="kernelgym-ray-driver", daemon=True)
                self._driver.start()
            self._wake.notify()
        return future

    def _drive(self) -> None:
        """The pipeline's loop (one thread): hand work to idle actors, then take the next finished call."""
        in_flight: dict[Any, tuple[_Slot, str, _Entry]] = {}
        while True:
            with self._wake:
                while not self._closed and not in_flight and not self._waiting and not self._built:
                    self._wake.wait()
                if self._closed:
                    break
                self._dispatch(in_flight)
            if not in_flight:
                continue
            ready, _ = self._ray.wait(list(in_flight), num_returns=1, timeout=_POLL_SECONDS)
            for ref in ready:
                slot, phase, entry = in_flight.pop(ref)
                with self._wake:
                    self._collect(slot, phase, entry, ref)
        for _, _, entry in in_flight.values():
            if not entry.future.done():
                entry.future.set_exception(RuntimeError("this executor is closed"))

    def _dispatch(self, in_flight: dict[Any, tuple[_Slot, str, _Entry]]) -> None:
        """Give work to idle actors: built candidates to judges first, then new candidates (``_wake`` held)."""

        def admit() -> _Entry | None:
            if not self._waiting or self._admitted >= self.max_in_flight:
                return None
            self._admitted += 1
            return self._waiting.popleft()

        for slot in self._slots["judge"]:
            if slot.candidate is not None:
                continue
            if self._built:
                self._submit(slot, self._built.popleft(), "judge", in_flight)
            elif self.judges_build_when_idle or not self._slots["build"]:
                entry = admit()
                if entry is not None:
                    self._submit(slot, entry, "full", in_flight)
        for slot in self._slots["build"]:
            if slot.candidate is None:
                entry = admit()
                if entry is not None:
                    self._submit(slot, entry, "build", in_flight)

    def _submit(self, slot: _Slot, entry: _Entry, phase: str, in_flight: dict[Any, tuple[_Slot, str, _Entry]]) -> None:
        job = entry.job
        with self._state_lock:
            slot.candidate, slot.task_id = job, job.task.id
        in_flight[slot.actor.run.remote(dataclasses.replace(job, build_only=True) if phase == "build" else job)] = (slot, phase, entry)

    def _finish(self, entry: _Entry, result: EvalResult) -> None:
        self._admitted -= 1
        entry.future.set_result(result)

    def _collect(self, slot: _Slot, phase: str, entry: _Entry, ref: Any) -> None:
        """Take one finished call: a result, the next stage, a retry or a failure (``_wake`` held)."""
        with self._state_lock:
            slot.candidate = slot.task_id = None
        job = entry.job
        try:
            result: EvalResult = self._ray.get(ref)
        except (self._ray.exceptions.RayActorError, self._ray.exceptions.OutOfMemoryError) as exc:
            self._replace(slot)
            entry.deaths += 1
            if entry.deaths < _MAX_ACTOR_DEATHS:
                if phase == "judge":
                    self._built.appendleft(entry)
                else:
                    self._admitted -= 1  # re-admitted from the waiting queue
                    self._waiting.appendleft(entry)
                return
            doing, stage = _PHASES[phase]
            sentence = f"The Ray actor {doing} it died {entry.deaths} times; the last time: {_reason(exc)}"
            self._finish(entry, failure_result(job, Status.RUNTIME_ERROR, sentence, stage))
            return
        except self._ray.exceptions.RayError as exc:
            sentence = f"The Ray pool could not run the candidate: {_reason(exc)}"
            self._finish(entry, failure_result(job, Status.JUDGE_ERROR, sentence, _PHASES[phase][1]))
            return
        if phase == "build":
            if result.status in _FINAL_AFTER_BUILD:
                self._finish(entry, result)
            else:
                entry.build = result
                self._built.append(entry)
            return
        self._finish(entry, with_build(entry.build, result))

    def _replace(self, slot: _Slot) -> None:
        """Put a fresh actor in the position of one that died."""
        self._ray.kill(slot.actor, no_restart=True)
        actor = self._make[slot.role](slot.index)
        with self._state_lock:
            slot.actor, slot.where = actor, actor.where.remote()
            slot.replacements += 1

    # --- shutting down ---------------------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        """Stop every actor's worker process, then the actors; shut Ray down if this executor started it."""
        with self._wake:
            if self._closed:
                return
            self._closed = True
            self._wake.notify()
            waiting = [*self._waiting, *self._built]
            self._waiting.clear()
            self._built.clear()
        if self._driver is not None:
            self._driver.join(timeout=timeout)
        for entry in waiting:
            if not entry.future.done():
                entry.future.set_exception(RuntimeError("this executor is closed"))
        with self._state_lock:
            actors = [s.actor for role in ("build", "judge") for s in self._slots[role]]
        closing = [a.close.remote() for a in actors]
        # An actor that died, or does not close in time, takes its worker with it when killed.
        self._ray.wait(closing, num_returns=len(closing), timeout=timeout)
        for actor in actors:
            self._ray.kill(actor, no_restart=True)
        if self._owns_ray:
            self._ray.shutdown()
