"""The speedup under KernelBench's contract, timed as KernelBench times it (trusted side).

kernelgym's own timing credits the device's work: each call launched behind a lead-in of device work, its
median. KernelBench's evaluator times each call from an idle device behind its L2 flush alone, autograd on, and
takes the mean (:mod:`~kernelgym.verifier.kernelbench_calls`): on a model whose Python path takes longer than that
flush, host time is part of its figure, and on CUDA-L1's answers with a reference under 0.2 ms the two figures
differed by 16% (median; 2% above it). The verdict under KernelBench's contract reports KernelBench's figure.

Each program is timed in a fresh process made like the candidate's (``ModelNew`` in one, the task's ``Model`` in
another, never in the judge's), built as the contract builds it and given the same inputs, and does nothing else
before its timed calls. Timed that way in the judged process, after the judge's checks, profile and watched calls,
answers read 0.18-0.56 of KernelBench's figure (``benchmarks/results/real-answers.md``, hold 8; a profiler may
stay attached to a process after its profile), and the reference, timed in the judge's own process, another way. ``ModelNew``'s
timed calls are checked as far as KernelBench's figure allows: its libraries and global functions, the native
observer's sample of the operators they ran, the output of one call the judge picks, work left on the device after
a call, and that the times it reports fit within the request's wall time.

Holds:
    kernelbench_speedup: the reference's mean over ``ModelNew``'s, both timed that way.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from kernelgym.verifier.harness import (
    Harness,
    Verdict,
    illegal_verdict,
    mismatch_verdict,
    perf_counter,
    require_ok,
)
from kernelgym.verifier.kernelbench_calls import KERNELBENCH_DISCARDED, KERNELBENCH_PERF_TRIALS
from kernelgym.verifier.kernelbench_numerics import job_inputs
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.sandboxed_task import TaskFailure
from kernelgym.verifier.timing_stage import check_pending

__all__ = ["kernelbench_speedup"]


def kernelbench_speedup(h: Harness, audited_ms: float | None = None) -> float | None:
    """The reference's mean time over ``ModelNew``'s, each timed as KernelBench times it in a fresh process.

    ``None`` where this judge starts no such processes, the contract is timed kernelgym's way
    (``VerifierConfig.contract_timing``), the reference's process failed, or, on a device, ``ModelNew``'s mean is
    below half of ``audited_ms`` (its time under the judge's audited timing: a call launched onto an idle device does
    not end sooner than the same call's work behind a lead-in; the caller's figure then stands, and a note says so).
    (On a host the audited time holds the guards' cost inside each call, and bounds nothing here.)

    Raises:
        Verdict: ``ModelNew`` failed or broke a rule in its timed calls (the contract's verdict).
    """
    if h.twin is None or h.config.contract_timing != "kernelbench" or not h.backend.timing_meaningful:
        return None
    job = h.job
    h.init_inputs = h.init_inputs_for({})  # the task's own shape
    reference = h.initial_reference()  # as the contract builds it (ModelNew is built in the timing process only)
    inputs = job_inputs(job, h.reference, job.seeds[h.config.trials + 1], h.device)
    expected = h.reference_call(reference, inputs, None, False)
    del reference
    calls = KERNELBENCH_PERF_TRIALS
    h.set_budget(h.config.timeouts.scaled(h.config.timeouts.time, h.reference_seconds[-1], 4 * (calls + 10)))
    keep = h.rng.randrange(KERNELBENCH_DISCARDED, calls + KERNELBENCH_DISCARDED)
    new_ms = _timed(h, job.code, inputs, expected, calls, keep, watched=True)
    try:  # the task's program, in a process of its own: its failure says nothing of the answer
        ref_ms = _timed(h, f"{job.task.source}\n\nModelNew = Model\n", inputs, expected, calls, keep, watched=False)
    except (Verdict, TaskFailure):
        return None
    if audited_ms and h.device.type != "cpu" and new_ms < 0.5 * audited_ms:
        h.progress.notes.append(f"KernelBench's timing read your calls at {new_ms:.4f} ms, below half of the judge's audited "
                                f"{audited_ms:.4f} ms: the audited figure is the contract's.")
        return None
    return ref_ms / new_ms


def _timed(h: Harness, code: str, inputs: list[Any], expected: Any, calls: int, keep: int, watched: bool) -> float:
    """``code``'s ``ModelNew`` built and timed in a fresh process; the mean ms of its calls (``watched``: checked as
    ``ModelNew``'s are)."""
    process = h.twin()
    process.build_service = getattr(h.candidate, "build_service", None)  # the answer's builds, from the store
    process.build_budget = getattr(h.candidate, "build_budget", h.config.timeouts.build)
    with h.attached(process):
        require_ok(h.ask("load", code, h.preset.tf32_convolutions))
        seed = h.job.seeds[0]
        constants = {key: getattr(h.reference, key) for key in sorted(h.constant_names)}
        require_ok(h.ask("construct", seed, h.init_inputs, {}, constants))
        require_ok(h.ask("place", seed))
        h.bind(inputs, expected)
        h.write_inputs(inputs)
        h.backend.synchronize()
        h.quiet()  # no process forked ahead creates its device context beside the timed calls
        start = perf_counter()
        reply = h.ask("kernelbench_time", calls, keep)
        wall_ms = (perf_counter() - start) * 1e3
        require_ok(reply)
        times = _times(reply.get("ms"), calls)
        if watched:
            _check_timed(h, reply, times, wall_ms, expected, keep, calls)
        return statistics.fmean(times)


def _times(value: Any, calls: int) -> list[float]:
    """The reply's times, as many as asked, each a finite positive number; else the reply is forged."""
    if not (isinstance(value, list) and len(value) == calls
            and all(isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms) and ms > 0 for ms in value)):
        raise illegal_verdict("Your program's process sent the judge a timing reply it did not make.",
                              runtime.forged_message(f"a reply to KernelBench's timed calls that is not {calls} positive times"))
    return [float(ms) for ms in value]


def _check_timed(h: Harness, reply: dict[str, Any], times: list[float], wall_ms: float, expected: Any, keep: int,
                 calls: int) -> None:
    """What ``ModelNew``'s process did in its timed calls is what its checked calls did, as far as a figure of
    KernelBench's timing can be checked."""
    h.check_libraries()
    h.check_watched(reply)
    replaced = [str(change) for change in reply.get("state") or [] if str(change).endswith(" was replaced")]
    if replaced:
        raise illegal_verdict("The candidate changed global state while KernelBench's timing ran.", runtime.global_state_changed(replaced))
    if sum(times) > wall_ms:
        raise illegal_verdict("Your program's process reported more time than its request took.", runtime.forged_message(
            f"{sum(times):.3f} ms over {calls} timed calls, in a request of {wall_ms:.3f} ms"))
    pending = reply.get("pending_ms")
    if isinstance(pending, list) and all(isinstance(p, (int, float)) for p in pending):
        check_pending([float(p) for p in pending], times)
    mismatch, got = h.outputs(reply, expected, late_check=False)
    if mismatch is None:
        mismatch = h.compare(expected, got).mismatch
    if mismatch is not None:
        raise mismatch_verdict(mismatch, f"timed call {keep} of {calls}, timed as KernelBench times", "timed-output-mismatch")
