"""Judge and time the bundled answers of the ``gpu`` suite on this machine's GPU; write a dated report.

    python benchmarks/gpu_report.py                                  # every task, CUDA and Triton answers
    python benchmarks/gpu_report.py --tasks level1/1_ReLU --runs 100 --out /tmp/results

Two passes per backend. First every answer is built and checked by several
workers sharing the GPU (timing off; this fills the build cache, builds are
CPU-bound). Then the answers that passed are judged again by one worker per
GPU with the GPU to itself: warm-up, L2 flushed before every timed run,
fresh inputs for every timed call, median and IQR over ``--runs`` runs,
the eager and ``torch.compile`` references timed in the same worker.

Writes ``<out>/gpu-<date>.json`` and ``<out>/gpu-<date>.md`` (default out:
``benchmarks/results``) with the machine (GPU, driver, CUDA, torch, Triton,
CPU), the date, the commit, and per task and backend the status, runtimes and
speedups. The build cache is ``$KERNELGYM_CACHE`` (default ``~/.cache/kernelgym``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelgym import Verifier  # noqa: E402
from kernelgym.tasks import load_suite  # noqa: E402
from kernelgym.verifier import VerifierConfig  # noqa: E402
from kernelgym.verifier.result import EvalResult  # noqa: E402


@dataclass(frozen=True)
class Args:
    """What to judge and how."""

    suite: str = "gpu"
    """task suite whose bundled answers are judged"""
    backends: tuple[str, ...] = ("cuda", "triton")
    """backends whose answers are judged"""
    tasks: tuple[str, ...] = ()
    """only these task ids (default: all)"""
    runs: int = 100
    """timed runs per program (median and IQR are reported)"""
    warmup: int = 10
    """untimed calls before timing"""
    compile_baseline: bool = True
    """also time torch.compile(Model)"""
    build_workers: int = 8
    """workers of the build-and-check pass (they share the GPU)"""
    out: str = str(REPO / "benchmarks" / "results")
    """folder of the report files"""
    commit: str = ""
    """commit to record when this tree is not a git checkout"""


def parse_args(argv: list[str] | None = None) -> Args:
    """Command-line flags named after the fields of :class:`Args`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Args()
    parser.add_argument("--suite", default=defaults.suite)
    parser.add_argument("--backends", nargs="+", default=list(defaults.backends))
    parser.add_argument("--tasks", nargs="*", default=[])
    parser.add_argument("--runs", type=int, default=defaults.runs)
    parser.add_argument("--warmup", type=int, default=defaults.warmup)
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false")
    parser.add_argument("--build-workers", type=int, default=defaults.build_workers)
    parser.add_argument("--out", default=defaults.out)
    parser.add_argument("--commit", default=defaults.commit)
    ns = parser.parse_args(argv)
    return Args(ns.suite, tuple(ns.backends), tuple(ns.tasks), ns.runs, ns.warmup,
                ns.compile_baseline, ns.build_workers, ns.out, ns.commit)


def command_output(command: list[str]) -> str:
    """First line of a command's output, or '' when it cannot run."""
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.splitlines()[0] if out else ""


def nvcc_release() -> str:
    """nvcc's version line ("Cuda compilation tools, release 13.0, V13.0.88"), or ''."""
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.strip() for line in out.splitlines() if "release" in line), "")


def commit_of_tree(fallback: str) -> str:
    """``git describe``-style commit of this tree, marked when it has uncommitted changes."""
    head = command_output(["git", "rev-parse", "--short", "HEAD"])
    if not head:
        return fallback or os.environ.get("KERNELGYM_COMMIT", "unknown (not a git checkout)")
    dirty = command_output(["git", "status", "--porcelain", "--untracked-files=no"])
    return head + (" + uncommitted changes" if dirty else "")


def machine() -> dict[str, Any]:
    """The GPU, its driver and toolkit, the software versions and the CPU."""
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "python": platform.python_version(),
        "os": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        major, minor = torch.cuda.get_device_capability(0)
        info["compute_capability"] = f"{major}.{minor}"
    info["driver"] = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    info["nvcc"] = nvcc_release()
    cpu = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")]
    info["cpu"] = cpu[0] if cpu else platform.processor()
    return info


def row(result: EvalResult) -> dict[str, Any]:
    """The report's fields of one result."""
    keep = ("task_id", "backend", "status", "correct", "runtime_ms", "runtime_spread_ms", "ref_eager_ms", "ref_compile_ms",
            "speedup_eager", "speedup_compile", "faster", "timing_meaningful", "max_abs_error", "max_rel_error",
            "flags", "device", "custom_kernel_calls")
    data = result.to_dict()
    out = {key: data[key] for key in keep}
    if result.status.value != "ok":
        out["feedback"] = result.feedback
    return out


def timing_config(args: Args) -> VerifierConfig:
    """The timing pass's judge settings (every timed call takes fresh inputs: docs/gpu.md)."""
    return VerifierConfig(runs=args.runs, warmup=args.warmup, compile_baseline=args.compile_baseline)


def judge(args: Args, backend: str, pairs: list[tuple[Any, str]]) -> list[EvalResult]:
    """Build and check in parallel, then time what passed with one worker per GPU."""
    check_config = VerifierConfig(timing=False)
    print(f"[{backend}] building and checking {len(pairs)} answers with {args.build_workers} workers", flush=True)
    with Verifier(backend=backend, num_workers=args.build_workers, config=check_config) as verifier:
        checked = verifier.evaluate_many(pairs)
    passed = [i for i, r in enumerate(checked) if r.status.value == "ok"]
    time_config = timing_config(args)
    print(f"[{backend}] timing {len(passed)} correct answers", flush=True)
    with Verifier(backend=backend, config=time_config) as verifier:
        timed = verifier.evaluate_many([pairs[i] for i in passed])
    results = list(checked)
    for i, result in zip(passed, timed, strict=True):
        results[i] = result
        print(f"[{backend}] {result.task_id}: {result.status.value}, speedup {result.speedup_eager}", flush=True)
    return results


def geomean(values: list[float]) -> float | None:
    """Geometric mean of positive values (``None`` when there are none)."""
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(rows: list[dict[str, Any]], backends: tuple[str, ...]) -> dict[str, Any]:
    """Per backend: answers, how many are correct and faster, geometric-mean speedups."""
    summary = {}
    for backend in backends:
        mine = [r for r in rows if r["backend"] == backend]
        summary[backend] = {
            "answers": len(mine),
            "ok": sum(r["status"] == "ok" for r in mine),
            "faster": sum(bool(r["faster"]) for r in mine),
            "geomean_speedup_eager": geomean([r["speedup_eager"] for r in mine]),
            "geomean_speedup_compile": geomean([r["speedup_compile"] for r in mine]),
        }
    return summary


def number(value: float | None, digits: int = 3) -> str:
    """A table cell."""
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown page."""
    m, c = report["machine"], report["config"]
    lines = [
        f"# GPU report {report['date'][:10]}",
        "",
        f"- Machine: {', '.join(m.get('gpus') or ['no GPU'])} (compute capability {m.get('compute_capability')}), "
        f"driver {m['driver'] or '?'}, {m['nvcc'] or 'nvcc ?'}; {m['cpu_count']} x {m['cpu']}",
        f"- Software: torch {m['torch']} (CUDA {m['cuda_runtime']}), Triton {m['triton']}, Python {m['python']}, {m['os']}",
        f"- Date: {report['date']}",
        f"- Commit: {report['commit']}",
        f"- Timing: median and IQR of {c['runs']} runs after {c['warmup']} warm-up calls, fresh inputs "
        f"for every call, L2 flushed before each run, CUDA events; `faster` = speedup over eager > {c['faster_threshold']}",
        "",
    ]
    for backend, s in report["summary"].items():
        lines += [
            f"## {backend}: {s['ok']}/{s['answers']} correct, {s['faster']} faster than eager; geometric-mean speedup "
            f"{number(s['geomean_speedup_eager'])}x vs eager, {number(s['geomean_speedup_compile'])}x vs torch.compile",
            "",
            "| task | status | runtime ms (IQR) | eager ms | compile ms | speedup vs eager | vs compile | faster |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in (r for r in report["results"] if r["backend"] == backend):
            runtime = "-" if r["runtime_ms"] is None else f"{r['runtime_ms']:.4f} ({r['runtime_spread_ms']:.4f})"
            lines.append(
                f"| {r['task_id']} | {r['status']} | {runtime} | {number(r['ref_eager_ms'], 4)} | "
                f"{number(r['ref_compile_ms'], 4)} | {number(r['speedup_eager'])} | {number(r['speedup_compile'])} | "
                f"{'yes' if r['faster'] else 'no'} |"
            )
        lines.append("")
    failures = [r for r in report["results"] if r["status"] != "ok"]
    if failures:
        lines += ["## Failures", ""]
        lines += [f"- {r['backend']} {r['task_id']}: {r['status']}: {r['feedback'][:400]}" for r in failures]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Judge, time and write the report; return it."""
    args = parse_args(argv)
    suite = load_suite(args.suite)
    tasks = [suite[t] for t in args.tasks] if args.tasks else list(suite)
    now = datetime.datetime.now(datetime.timezone.utc)
    report: dict[str, Any] = {
        "date": now.isoformat(timespec="seconds"),
        "commit": commit_of_tree(args.commit),
        "machine": machine(),
        "config": asdict(args) | {"faster_threshold": VerifierConfig().faster_threshold},
        "summary": {},
        "results": [],
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"gpu-{now.date().isoformat()}"
    for backend in args.backends:
        pairs = [(task, task.solution(backend)) for task in tasks if backend in task.solutions]
        report["results"] += [row(r) for r in judge(args, backend, pairs)] if pairs else []
        done = tuple(b for b in args.backends if any(r["backend"] == b for r in report["results"]))
        report["summary"] = summarize(report["results"], done)
        # Written after each backend, so an interrupted run still leaves what it measured.
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown(report))
        print(f"wrote {stem}.md and {stem}.json", flush=True)
    return report


if __name__ == "__main__":
    main()
