"""KernelBench's timing loop, run in a process made like the candidate's (candidate side).

KernelBench's evaluator times a model with ``time_execution_with_cuda_event`` (its default): 3 warm-up calls, each
followed by a synchronization; the allocator's cache emptied; then 100 calls and one more discarded first, each
after a synchronization of the device, a 256 MB fill that evicts L2 (``clear_l2_cache``) and a start event, ended by
an end event and a synchronization; autograd on, the model as built; it reports the mean. A call therefore starts
on an idle device behind the fill alone, and what the model's Python path costs beyond the fill's time shows in its
figure: on short models, host time. Its ``host_time`` method (the host clock around the call and a synchronization)
is what it offers where device events do not exist; here it times host devices.

Holds:
    KERNELBENCH_WARMUP / KERNELBENCH_DISCARDED / KERNELBENCH_PERF_TRIALS: the loop's counts.
    kernelbench_calls: a model's calls timed that way; each counted call's ms and the device's work left after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kernelgym.backends import Backend

__all__ = ["KERNELBENCH_DISCARDED", "KERNELBENCH_PERF_TRIALS", "KERNELBENCH_WARMUP", "kernelbench_calls"]

# Captured at import, before any answer loads in this process.
_perf_counter = time.perf_counter

KERNELBENCH_WARMUP = 3
"""Calls before the timed ones (``num_warmup``)."""

KERNELBENCH_DISCARDED = 1
"""Timed calls dropped first (``discard_first``)."""

KERNELBENCH_PERF_TRIALS = 100
"""Timed calls counted (``num_perf_trials`` as KernelBench's scripts pass it)."""

_FLUSH_SHAPE = (32, 1024, 1024)
"""KernelBench's L2 flush: a fresh int64 tensor of this shape (256 MB), filled."""


def kernelbench_calls(model: Any, inputs: list[Any], backend: Backend, trials: int, keep_call: int,
                      keep: Callable[[Any], None]) -> tuple[list[float], list[float]]:
    """``trials`` calls of ``model`` timed as KernelBench times them (after its warm-up and its discarded call).

    ``keep`` is given the output of call ``keep_call`` (counted from 0 with the discarded one), for the judge to
    compare. The end of each call is waited for in two steps, its end event and then the whole device (KernelBench
    waits for the device at once): the second wait's length is work the call left on another stream.

    Returns:
        The counted calls' milliseconds, and for each the milliseconds the device stayed busy after its end event
        (on a host, zeros).
    """
    device = backend.device()
    api = backend.api() if backend.device_type != "cpu" else None
    with torch.enable_grad():  # KernelBench's timing runs outside its torch.no_grad
        for _ in range(KERNELBENCH_WARMUP):
            model(*inputs)
            backend.synchronize()
        if api is not None:
            api.empty_cache()
        times: list[float] = []
        pending: list[float] = []
        output = None
        for call in range(trials + KERNELBENCH_DISCARDED):
            backend.synchronize()
            if api is not None:
                begin, end = api.Event(enable_timing=True), api.Event(enable_timing=True)
                flush = torch.empty(_FLUSH_SHAPE, dtype=torch.int64, device=device)
                flush.fill_(42)
                del flush
                begin.record()
                output = model(*inputs)
                end.record()
                end.synchronize()
                waited = _perf_counter()
                backend.synchronize()
                left = (_perf_counter() - waited) * 1e3
                ms = float(begin.elapsed_time(end))
            else:
                start = _perf_counter()
                output = model(*inputs)
                backend.synchronize()
                ms, left = (_perf_counter() - start) * 1e3, 0.0
            if call >= KERNELBENCH_DISCARDED:
                times.append(ms)
                pending.append(left)
            if call == keep_call:
                keep(output)
        del output
    return times, pending
