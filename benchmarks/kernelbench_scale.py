"""KernelBench-scale GPU benchmark: kernelgym (cold, then warm) beside KernelBench's own pipeline, same answers.

Run on one GPU host (it writes results as they come, so a run cut short keeps what it did)::

    python benchmarks/kernelbench_scale.py --kernelbench ../KernelBench --evaluator path/to/kernelbench_pkg_parent --out results/

``--kernelbench`` is KernelBench's task tree (``level1/19_ReLU.py`` ...); ``--evaluator`` is a directory
holding KernelBench's evaluator as an importable ``kernelbench`` package (its ``eval.py``, ``timing.py``,
``dataset.py``). Answers come from ``kernelgym/tasks/suites/kernelbench/solutions/<backend>/level<N>/``.

KernelBench's pipeline is run as its ``eval_from_generations.py`` runs it: a process pool prebuilds every
answer (``build_compile_cache``), then each answer is evaluated alone on the GPU
(``eval_kernel_against_ref``, 5 correctness trials, 100 timed trials, CUDA events) in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "kernelgym" / "tasks" / "suites" / "kernelbench" / "solutions"


def answers(kernelbench: Path, only: str | None) -> list[tuple[str, Path, Path, str]]:
    """(task id, task file, answer file, backend) for every answer whose task file exists."""
    found = []
    for path in sorted(SOLUTIONS.glob("*/level*/*.py")):
        backend, level = path.parent.parent.name, path.parent.name
        task = kernelbench / level / path.name
        if task.exists() and (only is None or only in f"{level}/{path.stem}"):
            found.append((f"{level}/{path.stem}", task, path, backend))
    return found


def _write(out: Path, name: str, record: dict) -> None:
    with open(out / name, "a") as handle:
        handle.write(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)


def run_kernelgym(items: list, out: Path, cache: Path, label: str) -> float:
    """Judge every answer through ``Verifier.submit`` per backend; return the wall seconds."""
    from kernelgym.verifier import Verifier
    from kernelgym.tasks.loaders import load_task_file

    start = time.perf_counter()
    by_backend: dict[str, list] = {}
    for item in items:
        by_backend.setdefault(item[3], []).append(item)
    for backend, group in by_backend.items():
        with Verifier(backend=backend, cache_dir=cache) as verifier:
            tasks = [load_task_file(task) for _, task, _, _ in group]
            results = verifier.evaluate_many([(t, answer.read_text()) for t, (_, _, answer, _) in zip(tasks, group)])
            for (task_id, _, _, _), result in zip(group, results):
                _write(out, f"kernelgym_{label}.jsonl", {
                    "task": task_id, "backend": backend, "status": result.status.value, "speedup": result.speedup_eager,
                    "runtime_ms": result.runtime_ms, "ref_ms": result.ref_eager_ms, "seconds": result.seconds.__dict__,
                    "feedback": result.feedback[:600] if result.status.value != "ok" else "",
                })
    return time.perf_counter() - start


def _kb_build(args: tuple[str, str, str]) -> tuple[str, bool, float]:
    evaluator, source, build_dir = args
    sys.path.insert(0, evaluator)
    from kernelbench.eval import build_compile_cache

    start = time.perf_counter()
    ok = build_compile_cache(source, verbose=False, build_dir=build_dir)[0]
    return build_dir, bool(ok), time.perf_counter() - start


def _kb_eval(evaluator: str, reference: str, source: str, build_dir: str, backend: str, queue: mp.Queue) -> None:
    sys.path.insert(0, evaluator)
    from kernelbench.eval import eval_kernel_against_ref

    start = time.perf_counter()
    try:
        result = eval_kernel_against_ref(reference, source, num_correct_trials=5, num_perf_trials=100,
                                         measure_performance=True, build_dir=build_dir, backend=backend)
        queue.put({"compiled": result.compiled, "correct": result.correctness, "runtime_us": result.runtime,
                   "ref_us": getattr(result, "ref_runtime", None), "seconds": time.perf_counter() - start})
    except Exception as exc:  # noqa: BLE001 (recorded, never stops the benchmark)
        queue.put({"error": f"{type(exc).__name__}: {exc}"[:300], "seconds": time.perf_counter() - start})


def run_kernelbench(items: list, out: Path, evaluator: Path, scratch: Path, timeout: float) -> float:
    """KernelBench's pipeline: prebuild in a pool, then one evaluation at a time, each in a fresh process."""
    start = time.perf_counter()
    jobs = [(str(evaluator), answer.read_text(), str(scratch / task_id.replace("/", "_"))) for task_id, _, answer, _ in items]
    with ProcessPoolExecutor(max_workers=max(1, (mp.cpu_count() or 2) - 1), mp_context=mp.get_context("spawn")) as pool:
        built = {d: (ok, s) for d, ok, s in pool.map(_kb_build, jobs)}
    ctx = mp.get_context("spawn")
    for (task_id, task, answer, backend), (_, source, build_dir) in zip(items, jobs):
        queue = ctx.Queue()
        proc = ctx.Process(target=_kb_eval, args=(str(evaluator), task.read_text(), source, build_dir, backend, queue))
        begun = time.perf_counter()
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            record = {"timeout": timeout}
        else:
            record = queue.get() if not queue.empty() else {"error": f"exit code {proc.exitcode}"}
        record |= {"task": task_id, "build_ok": built[build_dir][0], "build_seconds": built[build_dir][1],
                   "wall": time.perf_counter() - begun}
        _write(out, "kernelbench.jsonl", record)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="KernelBench task tree (level1/, level2/, ...)")
    parser.add_argument("--evaluator", type=Path, help="directory holding KernelBench's evaluator as the package 'kernelbench'")
    parser.add_argument("--out", type=Path, required=True, help="where results are written")
    parser.add_argument("--only", help="only answers whose 'levelN/name' contains this")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/kgbench"), help="build caches of both pipelines")
    parser.add_argument("--kernelbench-timeout", type=float, default=240.0, help="seconds per KernelBench evaluation")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    items = answers(args.kernelbench, args.only)
    print(f"{len(items)} answers", flush=True)
    totals = {"answers": len(items)}
    totals["kernelgym_cold_s"] = run_kernelgym(items, args.out, args.scratch / "kernelgym-cache", "cold")
    totals["kernelgym_warm_s"] = run_kernelgym(items, args.out, args.scratch / "kernelgym-cache", "warm")
    (args.out / "summary.json").write_text(json.dumps(totals, indent=1))
    if args.evaluator is not None:
        totals["kernelbench_s"] = run_kernelbench(items, args.out, args.evaluator, args.scratch / "kernelbench-builds", args.kernelbench_timeout)
    (args.out / "summary.json").write_text(json.dumps(totals, indent=1))
    print(json.dumps(totals), flush=True)


if __name__ == "__main__":
    main()
