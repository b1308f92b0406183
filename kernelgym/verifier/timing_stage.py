"""The timing stage (trusted side): both programs timed the same way, the candidate's claims audited.

Holds:
    time_stage: time the reference here and the candidate in its process, on fresh inputs every call,
        with outputs of timed calls verified, the candidate's reported times audited, and an
        impossible speedup re-measured by the judge and turned into a verdict.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from typing import Any

import torch

from kernelgym.backends import KernelTracker
from kernelgym.backends.base import median_and_iqr
from kernelgym.verifier.candidate_side import run_call
from kernelgym.verifier.compare import checksum
from kernelgym.verifier.harness import Harness, illegal_verdict, mismatch_verdict, perf_counter
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.timing_audit import audit_claims
from kernelgym.verifier.trial_inputs import Refresher, draw_inputs, tensor_bytes

__all__ = ["time_stage"]

# Every timed call's output is compared when the reference costs less than this in all; otherwise a sample.
_VERIFY_ALL_SECONDS = 3.0
_VERIFY_ALL_BYTES = 64 * 1024**2
_SAMPLED_CALLS = 8

def _time_reference(h: Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, calls: int, warmup: int) -> tuple[list[float], list[float]]:
    """The reference timed here through the candidate's own call path (:func:`run_call`).

    Returns the timer's milliseconds per call and the judge's own measure of each
    whole call (CPU time of this thread on a host, wall time on a device), whose
    difference is the harness's overhead.
    """
    host = h.device.type == "cpu"
    clock = time.thread_time if host else perf_counter
    tracker = KernelTracker()
    times, costs = [], []
    with torch.no_grad():
        for i in range(warmup + calls):
            refresher.refresh(inputs)
            h.backend.synchronize()
            start = clock()
            _, reply = run_call(reference, inputs, h.backend, tracker, False, False)
            json.dumps(reply)
            cost = clock() - start
            if i >= warmup:
                costs.append(cost * 1e3)
                times.append(float(reply["ms"]))
    return times, costs


def time_stage(h: Harness) -> None:
    """Time both programs and record the credited runtimes in ``h.progress.timing``."""
    job, config, backend, progress = h.job, h.config, h.backend, h.progress
    if not backend.timing_meaningful:
        progress.flags.append("timing-not-meaningful")
        return
    reference = h.models({}).eval()  # both programs afresh at the task's own shapes
    assert h.reference is not None
    rng = random.Random(h.rng.randrange(2**63))
    per_call = statistics.median(h.reference_seconds) if h.reference_seconds else 0.01
    runs = config.runs or max(10, min(backend.default_runs, int(config.timing_seconds / max(per_call, 1e-6))))
    warmup = config.warmup + rng.randrange(0, 4)
    h.set_budget(config.timeouts.scaled(config.timeouts.time, per_call, 6 * (runs + warmup)))
    inputs = draw_inputs(h.reference, job.seeds[config.trials + 1], h.device)
    refresher = Refresher(h.reference, inputs, h.device, rng)
    ref_times, ref_walls = _time_reference(h, reference, inputs, refresher, runs, warmup)
    overhead_ms = max(statistics.median(w - t for w, t in zip(ref_walls, ref_times, strict=True)), 0.0)
    roundtrip_ms = statistics.median(h.measured("ping")[1] * 1e3 for _ in range(5))
    total = warmup + runs
    verify_all = per_call * total < _VERIFY_ALL_SECONDS and tensor_bytes(inputs) < _VERIFY_ALL_BYTES
    checked = set(range(total)) if verify_all else set(rng.sample(range(total), min(total, _SAMPLED_CALLS)))
    reported, judged = [], []
    seen: set[tuple] = set()
    with torch.no_grad():
        expected = h.reference_call(reference, inputs, False, False)
        h.bind(inputs, expected)
        for i in range(total):
            refresher.refresh(inputs)
            reply, own = h.call(inputs, False, False)
            if i >= warmup:
                reported.append(float(reply.get("ms", 0.0)))
                judged.append(own * 1e3)
            if i in checked:
                del expected  # freed before the next is made: one expected output at a time
                expected = h.reference_call(reference, inputs, False, False)
                mismatch, got = h.outputs(reply, expected)
                if mismatch is None:
                    mismatch = h.compare(expected, got).mismatch
                if mismatch is not None:
                    rule = "stale-output" if got and checksum(got) in seen else "timed-output-mismatch"
                    raise mismatch_verdict(mismatch, f"timed call {i + 1} of {total} (fresh inputs)", rule)
                seen.add(checksum(got))
    h.check_process("while being timed")
    audit = audit_claims(reported, judged, roundtrip_ms, overhead_ms)
    ref_ms, _ = median_and_iqr(ref_times)
    new_ms, new_spread = audit.credited_ms, audit.spread_ms
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
    progress.timing.update(ref_eager_ms=ref_ms, runtime_ms=new_ms, runtime_spread_ms=new_spread, timed_calls=runs)
    if config.compile_baseline:
        progress.timing["ref_compile_ms"] = _compile_baseline(h, reference, inputs, refresher, runs, warmup)


def _compile_baseline(h: Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, runs: int, warmup: int) -> float | None:
    """Median time of ``torch.compile(Model)``, cached per (task, shapes, device, torch version)."""
    shapes = [tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
    key = json.dumps([h.job.task.id, hashlib.sha1(h.job.task.source.encode()).hexdigest(), shapes, h.backend.device_name(), torch.__version__])
    cache = h.build_root / "baselines" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    if cache.exists():
        return json.loads(cache.read_text())["ref_compile_ms"]
    try:
        compiled = torch.compile(reference)
        times, _ = _time_reference(h, compiled, inputs, refresher, runs, warmup + 2)
    except Exception:  # a baseline that cannot compile is reported as missing, not as the candidate's failure
        return None
    value = median_and_iqr(times)[0]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "ref_compile_ms": value}))
    return value
