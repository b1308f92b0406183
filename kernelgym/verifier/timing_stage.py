"""The timing stage (trusted side): both programs timed the same way, the candidate's claims audited.

Holds:
    time_stage: time the reference here and the candidate in its process, on fresh inputs every call,
        with outputs of timed calls verified, the candidate's reported times audited, and an
        impossible speedup re-measured by the judge and turned into a verdict.
    check_pending: the verdict on work a call left on the device after its end event.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from time import perf_counter
from typing import Any

import torch

from kernelgym.backends import KernelTracker
from kernelgym.backends.base import median_and_iqr, paired_ratio
from kernelgym.backends.store import judge_dir
from kernelgym.verifier.candidate_side import run_call
from kernelgym.verifier.compare import fingerprint, flatten_outputs
from kernelgym.verifier.harness import CHECK_MODES, Harness, illegal_verdict, mismatch_verdict
from kernelgym.verifier.kernelbench_numerics import job_inputs
from kernelgym.verifier.placement import host_state
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.sandboxed_task import TaskFailure
from kernelgym.verifier.timing_audit import audit_claims
from kernelgym.verifier.trial_inputs import Refresher, tensor_bytes
from kernelgym.verifier.twin import ReferenceTwin, TwinUnavailable

__all__ = ["check_pending", "time_stage", "timed_calls", "MIN_RUNS", "PENDING_FLOOR_MS", "IDLE_SPIN_MS"]

# Every timed call's output is compared when the reference costs less than this in all; otherwise a sample.
_VERIFY_ALL_SECONDS = 3.0
_VERIFY_ALL_BYTES = 64 * 1024**2
_SAMPLED_CALLS = 8
_PROBES = 5
_TWIN_WARMUP = 10

PENDING_FLOOR_MS = 0.05
"""Device time after a call's end event that is the synchronization's own cost, not left-over work."""

IDLE_SPIN_MS = 2.0
"""CPU an idle thread pool may spin per CPU between two calls before it sleeps (libgomp spins up to ~0.3 ms)."""

MIN_RUNS = 20
"""Fewest timed calls of each program when ``VerifierConfig.runs`` is unset."""


def timed_calls(default_runs: int, timing_seconds: float, per_call: float) -> int:
    """Timed calls of each program: as many as fit in ``timing_seconds`` of calls costing ``per_call`` seconds,
    at most ``default_runs`` and at least :data:`MIN_RUNS` (fewer only where the backend's default is fewer).

    The judge's work around each timed call (fresh inputs, poisoning, the input checks, the lead-in) costs
    5-50 ms on an H100 whatever the kernel, so 100 calls of a kernel of milliseconds cost seconds more than 20
    to 30 of them. On an H100 the 36 bundled KernelBench answers got the same speedups this way as with 100 calls
    (median difference 0.06%, largest 1.3%) in 91 s instead of 139 s (``benchmarks/results/kernelbench-scale.md``).
    """
    fitting = int(timing_seconds / max(per_call, 1e-6))
    return max(min(MIN_RUNS, default_runs), min(default_runs, fitting))


def _mode(h: Harness) -> bool | None:
    """The mode both programs are timed in: eval mode; under KernelBench's numbers as built (``None``), as KernelBench
    times them (a BatchNorm in training mode computes its batch's statistics)."""
    return None if h.job.kernelbench_numerics else False


def _time_reference(h: Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, calls: int, warmup: int) -> list[float]:
    """A reference (itself, to count the timed calls; ``torch.compile`` of it, for the baseline) timed here through
    :func:`run_call` on freshly refreshed inputs, unwatched and unpoisoned; ms per call."""
    tracker = KernelTracker()
    times = []
    with torch.no_grad():
        for i in range(warmup + calls):
            refresher.refresh(inputs)
            h.backend.synchronize()
            _, reply = run_call(reference, inputs, h.backend, tracker, _mode(h), False, python_guard=False, poison=False)
            if i >= warmup:
                times.append(float(reply["ms"]))
    return times


def _watched_calls(rng: random.Random, warmup: int, runs: int) -> set[int]:
    """The calls the Python dispatch guard watches (their time is not credited): the warm-up and a random quarter of the rest."""
    timed = list(range(warmup, warmup + runs))
    return set(range(warmup)) | set(rng.sample(timed, max(1, runs // 4)))


def time_stage(h: Harness) -> None:
    """Time both programs and record the credited runtimes in ``h.progress.timing``."""
    job, config, backend, progress = h.job, h.config, h.backend, h.progress
    if not backend.timing_meaningful:
        progress.flags.append("timing-not-meaningful")
        return
    mode = _mode(h)
    reference = h.models({})  # both programs afresh at the task's own shapes
    if mode is not None:
        reference.eval()
    assert h.reference is not None
    rng = random.Random(h.rng.randrange(2**63))
    per_call = statistics.median(h.reference_seconds) if h.reference_seconds else 0.01
    warmup = config.warmup + rng.randrange(0, 4)
    h.set_budget(config.timeouts.scaled(config.timeouts.time, per_call, 6 * ((config.runs or backend.default_runs) + warmup)))
    inputs = job_inputs(job, h.reference, job.seeds[config.trials + 1], h.device)
    refresher = Refresher(h.reference, inputs, h.device, rng)
    with torch.no_grad():
        expected = h.reference_call(reference, inputs, mode, False)
        if config.runs is None and backend.default_runs > MIN_RUNS:
            # The trials' median is mostly of the task's smaller variant shapes: count the calls by these shapes
            # (the faster of two reference calls, timed as its timed calls are).
            per_call = min(_time_reference(h, reference, inputs, refresher, 2, 0)) / 1e3
    runs = config.runs or timed_calls(backend.default_runs, config.timing_seconds, per_call)
    h.set_budget(config.timeouts.scaled(config.timeouts.time, per_call, 6 * (runs + warmup)))
    total = warmup + runs
    verify_all = per_call * total < _VERIFY_ALL_SECONDS and tensor_bytes(inputs) < _VERIFY_ALL_BYTES
    checked = set(range(total)) if verify_all else set(rng.sample(range(total), min(total, _SAMPLED_CALLS)))
    # Outputs read again for work after return (a request of each process, on a host): a sample of the checked calls.
    reread = set(rng.sample(sorted(checked), min(len(checked), _SAMPLED_CALLS)))
    watched = _watched_calls(rng, warmup, runs)
    probed = set(rng.sample(range(warmup, total), min(runs, max(_PROBES, runs // 4))))
    reported, judged, call_cpu, probes, ref_times = [], [], [], [], []
    seen: set[tuple] = set()
    tracker = KernelTracker()
    with torch.no_grad():
        h.bind(inputs, expected)
        twin = _start_twin(h, reference, inputs, expected)
        del expected
        if twin is not None:  # from here on both processes hand freed host memory out alike (CandidateSide.cmd_reuse)
            h.reuse_freed_memory()
            twin.reuse()
        # On a device, no process of this worker starts beside the timed calls (the next job's candidate, forked
        # ahead, creates its device context while it starts); on a host, spares start on other CPUs.
        h.quiet()
        h.last_reading, h.idle_cpu_ms, h.pending_ms = None, [], []
        try:
            for i in range(total):
                refresher.refresh(inputs)
                if i in probed:  # the harness alone, in the candidate's process, between calls at random
                    probes.append(h.measured("probe", mode, False)[1])
                    if twin is not None:
                        twin.probe(mode)
                twin_first = twin is not None and rng.random() < 0.5  # neither program always follows the other
                twin_ms = twin.call(inputs, i in watched, i in reread, training=mode) if twin_first else None
                reply, own = h.call(inputs, mode, False, python_guard=i in watched)
                call_cpu.append(own)
                if twin is not None and twin_ms is None:
                    twin_ms = twin.call(inputs, i in watched, i in reread, training=mode)
                # The reference, right beside the candidate on the same inputs: on a host, its time is the twin's
                # (the same kind of process, the same request, the same guards: credited only where the
                # candidate's is); on a device, timed here the same way (unwatched and unpoisoned: it is trusted). Its output
                # here is the expected one.
                outputs: Any = None
                if twin is None or i in checked:
                    h.backend.synchronize()
                    outputs, ref_reply = run_call(reference, inputs, backend, tracker, mode, False, python_guard=False, poison=False)
                if twin is None and i >= warmup:
                    ref_times.append(float(ref_reply["ms"]))
                if i not in watched:
                    reported.append(float(reply.get("ms", 0.0)))
                    judged.append(own)
                    if twin_ms is not None:
                        ref_times.append(twin_ms)
                if i in checked:
                    mismatch, got = h.outputs(reply, outputs, late_check=i in reread)
                    if mismatch is None:
                        mismatch = h.compare(outputs, got).mismatch
                    if mismatch is not None:
                        rule = "stale-output" if got and fingerprint(got) in seen else "timed-output-mismatch"
                        raise mismatch_verdict(mismatch, f"timed call {i + 1} of {total} (fresh inputs)", rule)
                    seen.add(fingerprint(got))
                del outputs  # one reference output at a time
        finally:
            if twin is not None:
                twin.close()
    h.check_process("while being timed")
    _check_work_after_return(h, reported, call_cpu)
    audit = audit_claims(reported, judged, probes)
    ref_ms, _ = median_and_iqr(ref_times)
    new_ms, new_spread = audit.credited_ms, audit.spread_ms
    claims_credited = not audit.rejected  # the candidate's own per-call times are what is credited
    if audit.rejected:
        progress.flags.append("timing-claim-rejected")
        progress.notes.append(audit.sentence)
    moved = tensor_bytes(inputs) + tensor_bytes([t for t in h.local_outputs if isinstance(t, torch.Tensor)])
    bandwidth = config.roofline_bandwidth_gbs or backend.default_bandwidth_gbs
    floor_ms = moved / (bandwidth * 1e9) * 1e3
    if new_ms < floor_ms:
        wall_ms = audit.wall_ms
        if wall_ms < floor_ms:
            raise illegal_verdict("The measured time is below what the memory traffic allows.", runtime.excessive_speedup(
                f"{wall_ms * 1e3:.2f} us per call (measured by the judge) is below the roofline floor of "
                f"{floor_ms * 1e3:.2f} us ({moved} bytes at {bandwidth:.0f} GB/s)"))
        progress.flags.append("excessive-speedup")
        progress.notes.append(f"Your reported {new_ms * 1e3:.2f} us per call is below the roofline floor of {floor_ms * 1e3:.2f} us; "
                              f"the judge's own measurement ({wall_ms * 1e3:.2f} us) is credited instead.")
        new_ms = wall_ms
        claims_credited = False
    # With a twin (a host), the credited rounds' two times are ref_times and reported, round by round.
    ratio = paired_ratio(list(zip(ref_times, reported, strict=True))) if twin is not None and claims_credited else None
    if ratio is not None:
        # On a host both programs' calls of a round ran back to back on one CPU: the reference's time is the credited
        # one times the median over rounds of their ratio, which drift of the machine's pace reaches alike.
        ref_ms = new_ms * ratio
    progress.timing.update(ref_eager_ms=ref_ms, runtime_ms=new_ms, runtime_spread_ms=new_spread, timed_calls=len(reported))
    if config.compile_baseline and not job.task.sandboxed:  # torch.compile would run the task's program here
        progress.timing["ref_compile_ms"] = _compile_baseline(h, reference, inputs, refresher, runs, warmup)


def _start_twin(h: Harness, reference: torch.nn.Module, inputs: list[Any], expected: Any) -> ReferenceTwin | None:
    """On a host, the reference's twin process, built and bound like the candidate's (``None`` on a device, or if it fails).

    A sandboxed task's reference is timed in its twin on every device: it never runs in this process.
    """
    sandboxed = h.job.task.sandboxed
    if h.twin is None or h.device.type != "cpu" and not sandboxed:
        return None
    twin = None
    try:
        twin = ReferenceTwin(h.twin(), lambda: h.deadline - perf_counter())
        twin.start(h.job.task.source, h.job.seeds[0], h.init_inputs, host_state(reference), inputs, flatten_outputs(expected))
        # The candidate's process has been through the checked calls: their modes, watched by the Python guard.
        # The twin goes through them too, so that both processes' allocators have the same history (after
        # plain calls only, single bundled CPU tasks read 0.82x and 1.28x, run after run).
        modes = ((_mode(h), False),) if h.job.kernelbench_numerics else CHECK_MODES  # the candidate's checked calls' modes
        for k in range(_TWIN_WARMUP):
            training, grad = modes[k % len(modes)]
            twin.call(inputs, python_guard=True, fetch=False, training=training, grad=grad)
    except (TwinUnavailable, OSError, RuntimeError) as exc:
        if twin is not None:
            twin.close()
        if sandboxed:
            raise TaskFailure(f"timing the task's program in a process of its own: {exc}") from None
        h.progress.flags.append("reference-timed-in-judge")
        h.progress.notes.append(f"The reference was timed in the judge's process (its twin did not start: {str(exc)[:200]}).")
        return None
    return twin


def _check_work_after_return(h: Harness, reported: list[float], call_cpu: list[float]) -> None:
    """No work of a call may outlive it: not on the device after its end event, not in a thread after its reply.

    On a device, ``pending_ms`` is how long the device stayed busy after a call's end event (an honest
    answer joins its streams before returning, leaving only the synchronization itself). On every
    device, the CPU the candidate's threads ran between calls, while its main thread waited for the
    next one, is compared with what they ran during calls: idle OpenMP pool threads spin briefly
    (:data:`IDLE_SPIN_MS` per gap at most) and then sleep.
    """
    check_pending(h.pending_ms, reported)
    gaps = h.idle_cpu_ms
    idle, busy = sum(gaps), sum(call_cpu)
    if gaps and idle > len(gaps) * IDLE_SPIN_MS * h.cpus + 0.5 * busy:
        raise illegal_verdict("Your threads kept working after your calls returned.", runtime.work_after_return(
            f"the candidate's threads ran {idle:.2f} ms of CPU between {len(gaps)} calls, while they waited for the judge, "
            f"against {busy:.2f} ms during the calls"))


def check_pending(pending_ms: list[float], reported: list[float]) -> None:
    """The device stayed busy after a call's end event (median over calls) no longer than the synchronization costs
    plus a quarter of the call's own time; else the call left work on another stream (``work-after-return``)."""
    claimed = statistics.median(reported) if reported else 0.0
    pending = statistics.median(pending_ms) if pending_ms else 0.0
    if pending > PENDING_FLOOR_MS + 0.25 * max(claimed, 0.0):
        raise illegal_verdict("Work of your call was still running on the device after it returned.", runtime.work_after_return(
            f"the device stayed busy {pending * 1e3:.1f} us (median) after each call's end event, against "
            f"{claimed * 1e3:.1f} us timed inside it: work left on another stream"))


def _compile_baseline(h: Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, runs: int, warmup: int) -> float | None:
    """Median time of ``torch.compile(Model)``, cached per (task, shapes, device, torch version, convolution precision)."""
    shapes = [tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
    key = json.dumps([h.job.task.id, hashlib.sha1(h.job.task.source.encode()).hexdigest(), shapes, h.backend.device_name(), torch.__version__,
                      *(["tf32-convolutions"] if h.preset.tf32_convolutions else [])])
    # In the judge's own directory beside the cache: a candidate that could rewrite a baseline would set every later speedup.
    cache = judge_dir(h.build_root.parent) / "baselines" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    if cache.exists():
        return json.loads(cache.read_text())["ref_compile_ms"]
    try:
        compiled = torch.compile(reference)
        times = _time_reference(h, compiled, inputs, refresher, runs, warmup + 2)
    except Exception:  # a baseline that cannot compile is reported as missing, not as the candidate's failure
        return None
    value = median_and_iqr(times)[0]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "ref_compile_ms": value}))
    return value
