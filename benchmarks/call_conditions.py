"""What in the judge's way of calling an answer changes the time of its kernel: one condition at a time, on a GPU.

    python benchmarks/call_conditions.py --kernelbench .kb --tasks level1/9_Tall_skinny_matrix_multiplication_ --out "$OUT"

For each task, the bundled CUDA answer is built with plain ``load_inline`` (or the
Triton answer imported, ``--backend triton``; no kernelgym judge involved) and timed as KernelBench times it (device events
around the call, L2 flushed before each, outputs of one call alive while the
next runs), under one condition at a time:

``plain``
    inputs made in this process, as in KernelBench.
``ipc_inputs``
    inputs made by another process and opened here through CUDA IPC (as a judged
    candidate sees the judge's shared buffers).
``ipc_inputs_copied``
    the same, copied into this process's own memory before the timed calls.
``poisoned``
    every free block of the caching allocator filled (0xFF) before each call by the
    judge's own ``poison_memory`` (the first call empties the cache and reserves one
    block as large as the memory in use).
``outputs_taken``
    each call's outputs copied into buffers of the same shape after the call, and
    dropped before the next call.
``idle_gap``
    5 ms of sleep after each call (the device and this process idle between calls, as
    between a judge's commands).
``idle_gap_cpu_busy`` / ``idle_gap_gpu_busy``
    the same 5 ms between calls with this process's CPU kept busy (a spin loop, the
    device idle), or with the device kept busy (``torch.cuda._sleep``, this process
    asleep while it waits).
``idle_gap_then_cpu_warm`` / ``idle_gap_then_gpu_warm``
    5 ms of sleep, then 1 ms of spinning on the CPU, or 1 ms of device work queued
    just before the call (not waited for).
``idle_gap_then_gpu_warm_synced`` / ``idle_gap_then_short_gpu_warm_synced``
    5 ms of sleep, then 1 ms (0.3 ms) of device work waited for before the call's
    synchronization, flush and events, as KernelBench makes them.
``idle_gap_then_gpu_warm_polled``
    5 ms of sleep, then 1 ms of device work queued before the flush, and the call
    made once that work is done (the device goes from it to the flush without a
    pause, and the call is launched while the flush runs, as in KernelBench).
``one_core``
    this process pinned to one CPU.
``woken_on_shared_core``
    pinned to one CPU, and before each call this process waits for another process
    pinned to the same CPU, which first runs about 2 ms of Python (as a judge does
    between a candidate's calls on the CPU they share).
``other_context_between``
    before each call another process runs a small operation on the GPU in its own
    context and synchronizes (as a judge reading outputs between calls does).
``inputs_rewritten_by_another_context``
    the inputs are another process's buffers opened through CUDA IPC, and before each
    call that process writes the inputs into them again and synchronizes (as the judge
    copies each call's inputs into the shared buffers, in its own context).
``judged_path`` / ``judged_path_no_observer``
    the call made by the judge's own :func:`run_call` in this process (memory poisoned,
    L2 flushed, the kernel tracker and, in the first, the native ATen observer armed),
    its ``ms`` as the candidate reports it.
``after_reference``
    before each call, one call of the task's own ``Model`` on the same inputs, then a
    synchronization (as the judge times the reference between the candidate's calls).
``reference``
    the task's own ``Model`` (plain), for the speedup.

One JSON line per task and condition in ``<out>/call_conditions.jsonl``
(milliseconds: median, mean, min of the timed calls).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from kernelgym.backends import get_backend  # noqa: E402
from kernelgym.tasks import load_kernelbench_dir  # noqa: E402
from kernelgym.verifier.candidate_side import take_outputs  # noqa: E402
from kernelgym.verifier.compare import flatten_outputs  # noqa: E402

FLUSH_BYTES = 256 * 1024**2


def _module(source: str, name: str) -> types.ModuleType:
    """Import ``source`` from a file of its own (Triton reads a kernel's source from its file)."""
    path = Path(tempfile.mkdtemp(prefix="call_conditions_")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"call_conditions_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _stats(times: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(times), "mean_ms": statistics.mean(times), "min_ms": min(times)}


def _cuda_inputs(source: str, seed: int) -> list[Any]:
    """The task's ``get_inputs()`` drawn from ``seed``, on the GPU."""
    torch.manual_seed(seed)
    return [x.cuda() if isinstance(x, torch.Tensor) else x for x in _module(source, "task").get_inputs()]


def _time(model: Any, inputs: list[Any], calls: int, before: Any = None, after: Any = None, queued: Any = None,
          flushed: Any = None) -> dict[str, float]:
    """KernelBench's timing: sync, flush L2, events around the call; ``before``/``after`` run outside the events.

    ``queued`` runs after the synchronization, just before the flush (device work it queues is not waited for);
    ``flushed`` right after the flush is queued.
    """
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    times = []
    out = None
    with torch.no_grad():
        for i in range(calls + 3):
            if before is not None:
                before()
            torch.cuda.synchronize()
            if queued is not None:
                queued()
            flush.zero_()
            if flushed is not None:
                flushed()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(*inputs)
            end.record()
            torch.cuda.synchronize()
            if after is not None:
                after(out)
                out = None
            if i >= 3:
                times.append(start.elapsed_time(end))
    del out, flush
    return _stats(times)


def _ipc_child(source: str, seed: int, queue: Any, done: Any) -> None:
    """Make the task's inputs on the GPU and send them through CUDA IPC; keep them alive until told."""
    queue.put(_cuda_inputs(source, seed))
    done.wait()


def _helper(cpu: int | None, gpu: bool, conn: Any) -> None:
    """Answer each ping after 2 ms of Python work (and a small GPU operation in this process's own context when ``gpu``)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    scratch = torch.ones(1 << 18, device="cuda") if gpu else None
    conn.send("ready")
    while conn.recv() == "ping":
        if scratch is not None:
            float(scratch.sum())
        else:
            deadline = time.perf_counter() + 0.002
            junk = list(range(2000))
            while time.perf_counter() < deadline:
                junk = [v ^ 1 for v in junk]
        conn.send("pong")


@contextlib.contextmanager
def _helper_process(target: Any, *args: Any) -> Iterator[tuple[Any, Any]]:
    """A spawned process running ``target(*args, conn)``: yields its first message and a ``ping`` that waits for its answer."""
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    helper = ctx.Process(target=target, args=(*args, there), daemon=True)
    helper.start()

    def ping() -> None:
        here.send("ping")
        here.recv()

    try:
        yield here.recv(), ping
    finally:
        here.send("exit")
        helper.join(timeout=60)


def _with_helper(model: Any, inputs: list[Any], calls: int, cpu: int | None, gpu: bool) -> dict[str, float]:
    """:func:`_time` with a ping to a helper process (see :func:`_helper`) before each call."""
    before_affinity = os.sched_getaffinity(0)
    with _helper_process(_helper, cpu, gpu) as (_ready, ping):
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        try:
            return _time(model, inputs, calls, before=ping)
        finally:
            os.sched_setaffinity(0, before_affinity)


def _rewriter(source: str, seed: int, conn: Any) -> None:
    """Make the inputs, send buffers holding them through CUDA IPC, and write the inputs into them again on each ping."""
    inputs = _cuda_inputs(source, seed)
    buffers = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    torch.cuda.synchronize()
    conn.send(buffers)
    while conn.recv() == "ping":
        for dst, src in zip(buffers, inputs, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        torch.cuda.synchronize()
        conn.send("pong")


def _rewritten(model: Any, source: str, calls: int) -> dict[str, float]:
    """:func:`_time` on inputs another process writes again before each call (see :func:`_rewriter`)."""
    with _helper_process(_rewriter, source, 1) as (shared, ping):
        result = _time(model, shared, calls, before=ping)
        del shared
        return result


def _judged(model: Any, inputs: list[Any], calls: int, observer: Any) -> dict[str, float]:
    """The candidate's own :func:`run_call` (credited: no Python guard), in this process; the ms it reports."""
    from kernelgym.backends import KernelTracker
    from kernelgym.verifier.candidate_side import run_call

    backend, tracker = get_backend("cuda"), KernelTracker()
    buffers: list[Any] = []
    times = []
    for i in range(calls + 3):
        leaves, reply = run_call(model, inputs, backend, tracker, False, False, observer, python_guard=False,
                                 take=buffers or None)
        if not buffers:
            buffers.extend(torch.empty_like(leaf) for leaf in leaves if isinstance(leaf, torch.Tensor))
        del leaves
        if i >= 3:
            times.append(reply["ms"])
    return _stats(times)


def _pinned(model: Any, inputs: list[Any], calls: int, cpu: int) -> dict[str, float]:
    """:func:`_time` with this process pinned to one CPU."""
    before_affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        return _time(model, inputs, calls)
    finally:
        os.sched_setaffinity(0, before_affinity)


def conditions(task: Any, answer: str, calls: int, only: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Every condition's timing of one task's answer (see the module's docstring); ``only``: these besides plain and reference."""
    reference_module = _module(task.source, "reference")
    answer_module = _module(answer, "answer")
    torch.manual_seed(0)
    init = reference_module.get_init_inputs()
    model = answer_module.ModelNew(*init).cuda().eval()
    reference = reference_module.Model(*init).cuda().eval()
    inputs = _cuda_inputs(task.source, 1)
    results = {"plain": _time(model, inputs, calls), "reference": _time(reference, inputs, calls)}

    def wanted(name: str) -> bool:
        return only is None or name in only

    if wanted("ipc_inputs") or wanted("ipc_inputs_copied"):
        ctx = mp.get_context("spawn")
        queue, done = ctx.Queue(), ctx.Event()
        child = ctx.Process(target=_ipc_child, args=(task.source, 1, queue, done))
        child.start()
        try:
            shared = queue.get(timeout=300)
            results["ipc_inputs"] = _time(model, shared, calls)
            copied = [x.clone() if isinstance(x, torch.Tensor) else x for x in shared]
            results["ipc_inputs_copied"] = _time(model, copied, calls)
            del shared, copied
        finally:
            done.set()
            child.join(timeout=60)

    if wanted("poisoned"):
        backend = get_backend("cuda")  # the judge's own poisoning: the first call empties the cache and reserves a block
        results["poisoned"] = _time(model, inputs, calls, before=lambda: backend.poison_memory("call_conditions"))
        torch.cuda.empty_cache()

    if wanted("outputs_taken"):
        buffers: list[Any] = []

        def take(out: Any) -> None:  # as the judge's candidate takes its outputs into the judge's buffers
            leaves = flatten_outputs(out)
            if not buffers:
                buffers.extend(torch.empty_like(leaf) for leaf in leaves)
            take_outputs(leaves, buffers)

        results["outputs_taken"] = _time(model, inputs, calls, after=take)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    def gap(_out: Any) -> None:  # 5 ms with nothing to do between calls
        time.sleep(0.005)

    def spin(seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            pass

    cycles_per_ms = int(torch.cuda.get_device_properties(0).clock_rate)  # kHz: cycles per ms at the rated clock

    def gpu_busy(ms: float) -> None:
        torch.cuda._sleep(int(cycles_per_ms * ms))

    if wanted("idle_gap"):
        results["idle_gap"] = _time(model, inputs, calls, after=gap)
    if wanted("idle_gap_cpu_busy"):
        results["idle_gap_cpu_busy"] = _time(model, inputs, calls, after=lambda _out: spin(0.005))
    if wanted("idle_gap_gpu_busy"):
        results["idle_gap_gpu_busy"] = _time(model, inputs, calls, after=lambda _out: (gpu_busy(5.0), torch.cuda.synchronize()))
    if wanted("idle_gap_then_cpu_warm"):
        results["idle_gap_then_cpu_warm"] = _time(model, inputs, calls, after=lambda out: (gap(out), spin(0.001)))
    if wanted("idle_gap_then_gpu_warm"):
        results["idle_gap_then_gpu_warm"] = _time(model, inputs, calls, after=gap,
                                                  queued=lambda: gpu_busy(1.0))
    if wanted("idle_gap_then_gpu_warm_synced"):
        results["idle_gap_then_gpu_warm_synced"] = _time(model, inputs, calls, after=gap,
                                                         before=lambda: gpu_busy(1.0))
    if wanted("idle_gap_then_short_gpu_warm_synced"):
        results["idle_gap_then_short_gpu_warm_synced"] = _time(model, inputs, calls, after=gap,
                                                               before=lambda: gpu_busy(0.3))
    if wanted("idle_gap_then_gpu_warm_polled"):
        warmed = torch.cuda.Event()

        def warm() -> None:
            gpu_busy(1.0)
            warmed.record()

        def wait_for_flush_start() -> None:
            while not warmed.query():
                pass

        results["idle_gap_then_gpu_warm_polled"] = _time(model, inputs, calls, after=gap,
                                                         queued=warm, flushed=wait_for_flush_start)
    if wanted("one_core"):
        results["one_core"] = _pinned(model, inputs, calls, cpu)
    if wanted("woken_on_shared_core"):
        results["woken_on_shared_core"] = _with_helper(model, inputs, calls, cpu, gpu=False)
    if wanted("other_context_between"):
        results["other_context_between"] = _with_helper(model, inputs, calls, None, gpu=True)
    if wanted("inputs_rewritten_by_another_context"):
        results["inputs_rewritten_by_another_context"] = _rewritten(model, task.source, calls)
    if wanted("after_reference"):

        def run_reference() -> None:
            with torch.no_grad():
                reference(*inputs)
            torch.cuda.synchronize()

        results["after_reference"] = _time(model, inputs, calls, before=run_reference)
    if wanted("judged_path"):
        from kernelgym.backends.aten_observer import load_observer

        results["judged_path"] = _judged(model, inputs, calls, load_observer(Path(tempfile.gettempdir()) / "call_conditions_builds"))
    if wanted("judged_path_no_observer"):
        results["judged_path_no_observer"] = _judged(model, inputs, calls, None)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="KernelBench tree (level1/, level2/)")
    parser.add_argument("--tasks", required=True, help="task ids with a bundled CUDA answer, comma-separated")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "triton"), help="which bundled answer (default: cuda)")
    parser.add_argument("--only", default="", help="only these conditions (besides plain and reference), comma-separated")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per condition")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suite = {t.id: t for t in load_kernelbench_dir(args.kernelbench)}
    for task_id in [t for t in args.tasks.split(",") if t]:
        task = suite[task_id]
        start = time.monotonic()
        try:
            results = conditions(task, task.solution(args.backend), args.calls, set(args.only.split(",")) if args.only else None)
        except Exception as exc:  # one task's failure is recorded; the next task still runs
            results = {"error": {"message": f"{type(exc).__name__}: {exc}"[:500]}}
        for condition, figures in results.items():
            line = {"task": task_id, "backend": args.backend, "condition": condition, **figures, "gpu": torch.cuda.get_device_name(),
                    "seconds": round(time.monotonic() - start, 1)}
            print(json.dumps(line), flush=True)
            with (out / "call_conditions.jsonl").open("a") as handle:
                handle.write(json.dumps(line) + "\n")
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
