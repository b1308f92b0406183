"""What in the judge's way of calling an answer changes the time of its kernel: one condition at a time, on a GPU.

    python benchmarks/call_conditions.py --kernelbench .kb --tasks level1/9_Tall_skinny_matrix_multiplication_ --out "$OUT"

For each task, the bundled CUDA answer is built with plain ``load_inline`` (no
kernelgym judge involved) and timed as KernelBench times it (device events
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
``reference``
    the task's own ``Model`` (plain), for the speedup.

One JSON line per task and condition in ``<out>/call_conditions.jsonl``
(milliseconds: median, mean, min of the timed calls).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
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
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _time(model: Any, inputs: list[Any], calls: int, before: Any = None, after: Any = None) -> dict[str, float]:
    """KernelBench's timing: sync, flush L2, events around the call; ``before``/``after`` run outside the events."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    times = []
    out = None
    with torch.no_grad():
        for i in range(calls + 3):
            if before is not None:
                before()
            torch.cuda.synchronize()
            flush.zero_()
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
    return {"median_ms": statistics.median(times), "mean_ms": statistics.mean(times), "min_ms": min(times)}


def _ipc_child(source: str, seed: int, queue: Any, done: Any) -> None:
    """Make the task's inputs on the GPU and send them through CUDA IPC; keep them alive until told."""
    torch.manual_seed(seed)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in _module(source, "task").get_inputs()]
    queue.put(inputs)
    done.wait()


def conditions(task: Any, answer: str, calls: int) -> dict[str, dict[str, float]]:
    """Every condition's timing of one task's answer (see the module's docstring)."""
    reference_module = _module(task.source, "reference")
    answer_module = _module(answer, "answer")
    torch.manual_seed(0)
    init = reference_module.get_init_inputs()
    model = answer_module.ModelNew(*init).cuda().eval()
    reference = reference_module.Model(*init).cuda().eval()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in reference_module.get_inputs()]
    results = {"plain": _time(model, inputs, calls), "reference": _time(reference, inputs, calls)}

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

    backend = get_backend("cuda")  # the judge's own poisoning: the first call empties the cache and reserves a block
    results["poisoned"] = _time(model, inputs, calls, before=lambda: backend.poison_memory("call_conditions"))
    torch.cuda.empty_cache()

    buffers: list[Any] = []

    def take(out: Any) -> None:  # as the judge's candidate takes its outputs into the judge's buffers
        leaves = flatten_outputs(out)
        if not buffers:
            buffers.extend(torch.empty_like(leaf) for leaf in leaves)
        take_outputs(leaves, buffers)

    results["outputs_taken"] = _time(model, inputs, calls, after=take)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="KernelBench tree (level1/, level2/)")
    parser.add_argument("--tasks", required=True, help="task ids with a bundled CUDA answer, comma-separated")
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
            results = conditions(task, task.solution("cuda"), args.calls)
        except Exception as exc:  # one task's failure is recorded; the next task still runs
            results = {"error": {"message": f"{type(exc).__name__}: {exc}"[:500]}}
        for condition, figures in results.items():
            line = {"task": task_id, "condition": condition, **figures, "gpu": torch.cuda.get_device_name(),
                    "seconds": round(time.monotonic() - start, 1)}
            print(json.dumps(line), flush=True)
            with (out / "call_conditions.jsonl").open("a") as handle:
                handle.write(json.dumps(line) + "\n")
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
