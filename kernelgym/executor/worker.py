"""The judge's worker process: ``python -m kernelgym.executor.worker``.

Holds:
    main: the worker loop. It limits itself (session, rlimits, scrubbed
        environment, private directory, one pinned CPU), then judges
        jobs received over an inherited socket, sending ``("stage", name,
        budget)`` as each stage starts (or its budget grows with the task) and
        ``("result", dict, discard)`` at the end.

The worker is the trusted side: it owns the reference, the inputs, the
comparisons, the timing and the result channel. Candidate code never runs
here: each answer gets a candidate process of its own, forked by a
:class:`~kernelgym.executor.candidate.CandidateFactory` that imported torch
once, and killed after the answer. One candidate is forked ahead, so creating
its device context is not on the path of the next answer. The worker is also
the trusted build step: a candidate's ``load_inline`` asks it to build, and it
checks, compiles in a build sandbox and publishes into the store
(:class:`~kernelgym.backends.trusted_build.StoreBuilder`), which candidates only read.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelgym.executor.sandbox import SandboxPolicy, apply_limits, die_with_parent, kill_group

if TYPE_CHECKING:
    from kernelgym.verifier.result import EvalResult

__all__ = ["main"]

_CANDIDATE_STARTUP_SECONDS = 300.0
_QUIET_SECONDS = 60.0
_FOREIGN_MEMORY_SHARE = 0.25
"""An answer's device out-of-memory is the judge's failure when other processes held more than this share of the device."""


def _cpus(policy: SandboxPolicy) -> tuple[set[int], set[int]]:
    """The CPUs this worker and its candidates are pinned to, and the CPUs a spare may start on."""
    allowed = sorted(os.sched_getaffinity(0))
    if policy.cpu is None:
        mine = set(allowed)
    else:
        mine = {allowed[(policy.cpu + k) % len(allowed)] for k in range(max(1, policy.cpu_count))}
    others = set(allowed) - mine
    return mine, others or mine


def main(argv: list[str]) -> int:
    """Run the worker loop; ``argv`` = [fd, work_dir, cache_dir, policy_json, backend]."""
    die_with_parent()
    fd, work_dir, cache_dir, policy_json, backend_name = int(argv[0]), Path(argv[1]), Path(argv[2]), argv[3], argv[4]
    policy = SandboxPolicy(**json.loads(policy_json))
    conn = Connection(socket.socket(fileno=fd).detach())
    os.chdir(work_dir)
    apply_limits(policy)
    mine, startup = _cpus(policy)
    # The candidate factory first: it imports torch and loads the observer in its own process while this
    # one imports torch (each import takes seconds; one after the other, they were most of a worker's start).
    from kernelgym.backends.locks import DEVICE_LOCK_ENV
    from kernelgym.executor.candidate import CandidateFactory, CandidateProcess

    candidates = work_dir / "candidates"
    candidates.mkdir()
    # Candidates get this worker's environment, less where its device's lock is: that lock is the judge's alone.
    factory = CandidateFactory(backend_name, cache_dir, policy, {k: v for k, v in os.environ.items() if k != DEVICE_LOCK_ENV},
                               candidates)
    # And the first build sandbox, where builds target a device: it imports the loader meanwhile too.
    from kernelgym.backends import get_backend
    from kernelgym.executor.builder import SandboxedCompile

    backend = get_backend(backend_name)
    planned = backend.native_toolchain()
    compile_apart = SandboxedCompile(planned.loader, ahead=planned.cuda) if planned is not None else None

    import torch

    from kernelgym.backends.native import prepare_floor
    from kernelgym.backends.trusted_build import StoreBuilder
    from kernelgym.verifier.channel import BuildsDeferred
    from kernelgym.verifier.guard import convolution_precision
    from kernelgym.verifier.judge import judge
    from kernelgym.verifier.mapped_code import runtime_roots
    from kernelgym.verifier.presets import get_preset
    from kernelgym.verifier.result import Status

    torch.set_num_threads(policy.threads)
    # fp32 references compute in full fp32 by default: cuDNN's default TF32 convolutions are ~1e-3 off, which no exact
    # answer could match within the fp32 tolerance (matmuls already default to full precision). A preset that keeps
    # PyTorch's default (kernelbench, as KernelBench's process) sets it per job (RulePreset.tf32_convolutions).
    torch.backends.cudnn.allow_tf32 = False
    build_root = cache_dir / "builds"
    build_root.mkdir(parents=True, exist_ok=True)
    # The worker runs no candidate code, so it is not confined to its directory: a process confined
    # by Landlock cannot create a GPU context in the children it starts, and every candidate needs one.
    # Each candidate confines itself once its own context exists.

    # One-time builds (once per cache, on a fresh machine minutes of compiling) run side by side on every
    # CPU this worker may use, before it is pinned to its own: the factory's observer, the precompiled
    # header with the device context, and the toolchain floor of the symbol check.
    with ThreadPoolExecutor(1) as pool:
        floor = pool.submit(prepare_floor, backend_name, cache_dir)
        backend.prepare_worker(build_root)
        runtime_roots()  # what the library checks compare against, read before the first job
        floor.result()
    toolchain = backend.native_toolchain()
    # The trusted build step: candidates ask, this worker checks, compiles apart and publishes into the store.
    builder = StoreBuilder(build_root, toolchain, compile_apart) if toolchain is not None and compile_apart is not None else None
    os.sched_setaffinity(0, mine)

    def spawn() -> CandidateProcess:
        return factory.spawn(_CANDIDATE_STARTUP_SECONDS, startup)

    # One candidate forked ahead: its device context is created while the previous answer is judged.
    spares = [spawn()]
    # Process groups of closed processes, killed but not yet seen gone: swept before any timed call and at each job's start.
    dying: list[int] = []

    def sweep() -> None:
        while dying:
            kill_group(dying.pop())

    def take_spare() -> CandidateProcess:
        """The process forked ahead, ready and pinned to this worker's CPUs; another is forked in its place.

        Each job's candidate is one, and so is the reference's twin on a host (a process made like the candidate's).
        A factory that no longer answers is the judge's failure: reported as such, and the worker replaced.
        """
        process = spares.pop(0)
        try:
            spares.append(spawn())
            process.wait_ready(_CANDIDATE_STARTUP_SECONDS)
        except Exception:
            process.close()
            raise
        process.pin(mine)
        process.sweeps = dying
        return process

    def quiet() -> None:
        """On a device, wait until the processes forked ahead have started (a start that fails shows when one
        is taken): none creates its device context beside timed calls. On a host they start on other CPUs.
        Every process closed before is gone."""
        sweep()
        if backend.device_type == "cpu":
            return
        for spare in spares:  # bounded well within the time stage's budget: a slow start is not the answer's time
            with contextlib.suppress(Exception):
                spare.wait_ready(_QUIET_SECONDS)

    conn.send(("ready", "trusted worker; each candidate is confined in its own process"))
    jobs = 0
    try:
        while True:
            try:
                job = conn.recv()
            except (EOFError, OSError):
                return 0
            if job is None:
                return 0
            if policy.builds_only and not job.build_only:  # its candidates keep no watch on global state
                conn.send(("failed", "a build-ahead worker was sent an answer to judge; it only builds"))
                continue
            sweep()
            jobs += 1
            job_dir = work_dir / f"job{jobs}"
            job_dir.mkdir()
            conn.send(("stage", "build", job.config.timeouts.build + _CANDIDATE_STARTUP_SECONDS))
            candidate = None
            try:
                candidate = take_spare()
                if builder is not None:
                    serve = functools.partial(builder.serve, admitted=get_preset(job.config.rules).admitted_concerns)
                    for request in job.prebuild:  # builds a judge left to this worker
                        serve(request, job.config.timeouts.build)
                    candidate.build_service = _deferring(serve, builder) if job.defer_builds else serve
                    candidate.build_budget = job.config.timeouts.build
                # The preset's numerics for the reference computed here (the answer's process is told them at load).
                with convolution_precision(get_preset(job.config.rules).tf32_convolutions):
                    result = judge(job, candidate, build_root, job_dir, on_stage=lambda stage, budget: conn.send(("stage", stage, budget)),
                                   twin=take_spare, quiet=quiet)
            except BuildsDeferred as deferred:
                result = None
                conn.send(("deferred", deferred.requests))
            except Exception as exc:  # the candidate's process never came up
                result = None
                conn.send(("failed", f"the candidate's process could not start: {exc}"))
            finally:
                if candidate is not None:
                    candidate.close()
                shutil.rmtree(job_dir, ignore_errors=True)
                if backend.device_type != "cpu":
                    getattr(torch, backend.device_type).empty_cache()  # the next candidate gets the device memory this job's buffers held
            if result is not None and result.status is Status.RUNTIME_ERROR and "out of memory" in result.feedback \
                    and backend.device_type != "cpu":
                sweep()  # the candidate's process gone, its memory given back
                result = _unless_memory_held_elsewhere(result, backend, 1 + len(spares))
            if result is not None:
                # A worker whose GPU saw a fault may be in a bad state: replace it.
                discard = result.status in (Status.RUNTIME_ERROR, Status.JUDGE_ERROR) and backend.device_type != "cpu"
                conn.send(("result", result, discard))
    finally:
        for spare in spares:
            spare.close()
        sweep()
        factory.close()
        if compile_apart is not None:
            compile_apart.close()


def _deferring(serve: Any, builder: Any) -> Any:
    """``serve``, except that a request the store cannot answer at once is left to the build workers."""
    from kernelgym.verifier.channel import BuildsDeferred

    def serve_or_defer(request: dict[str, Any], timeout: float) -> dict[str, Any]:
        if not builder.settled(request):
            raise BuildsDeferred([request])
        return serve(request, timeout)

    return serve_or_defer


def _unless_memory_held_elsewhere(result: EvalResult, backend: Any, processes: int) -> EvalResult:
    """An answer's device out-of-memory, or the judge's failure if other processes held much of the device
    (measured here, after the candidate's process is gone: not taken from what the candidate reported)."""
    from kernelgym.verifier.feedback import conclude
    from kernelgym.verifier.result import Status

    try:
        elsewhere, total = backend.memory_held_elsewhere(processes)
    except Exception:  # a device that cannot say leaves the verdict as it is
        return result
    if not total or elsewhere <= _FOREIGN_MEMORY_SHARE * total:
        return result
    reason = (f"The device ran out of memory while {elsewhere / 1024**3:.1f} of its {total / 1024**3:.1f} GiB were held "
              f"by processes other than this judge's. The answer's error: {result.feedback[:500]}")
    return conclude(result.task_id, result.backend, Status.JUDGE_ERROR, details=[reason], compiled=result.compiled,
                    seconds=result.seconds, cache_hit=result.cache_hit, seeds=result.seeds, device=result.device,
                    rules=result.rules, weights=result.weights)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
