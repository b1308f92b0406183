"""The warm cost of judging one answer at two commits, side by side on one machine.

    python benchmarks/warm_cost.py --base 2b6233b --tasks level1/1_ReLU,level1/10_Softmax --rounds 3 --out DIR

Each commit is checked out into a git worktree and run in a process of its own (its own code,
its own build cache under ``--out``): one ``Verifier(backend="cpp", num_workers=1)`` judges
the bundled ``cpu`` suite solutions of ``--tasks`` once to fill the cache and start the worker,
then ``--rounds`` times more, each judgement timed end to end (``evaluate``: static stages,
request, worker, candidate process, verdict). The commits take turns in blocks (base, head,
base, head, ...), so a change in the machine's load falls on both. One JSON line per
judgement goes to ``<out>/warm-cost.jsonl`` as it comes; ``<out>/warm-cost.md`` holds the
medians per task and overall, and the ratio head / base.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
from kernelgym import Verifier
from kernelgym.tasks import load_suite
from kernelgym.verifier import VerifierConfig

tasks, rounds, cache, label, block = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
suite = load_suite("cpu")
with Verifier(backend="cpp", num_workers=1, cache_dir=cache, config=VerifierConfig()) as verifier:
    for task_id in tasks:  # fills the cache, starts the worker
        verifier.evaluate(suite[task_id], suite[task_id].solution("cpp"))
    for round_ in range(rounds):
        for task_id in tasks:
            start = time.perf_counter()
            result = verifier.evaluate(suite[task_id], suite[task_id].solution("cpp"))
            print(json.dumps({"commit": label, "block": block, "round": round_, "task": task_id, "status": result.status.value,
                              "seconds": round(time.perf_counter() - start, 4), "cache_hit": result.cache_hit,
                              "stages": {k: round(v, 4) for k, v in (vars(result.seconds) if hasattr(result, "seconds") else {}).items()}}), flush=True)
"""


def worktree(commit: str, root: Path) -> Path:
    """A checkout of ``commit`` under ``root`` (made once)."""
    sha = subprocess.run(["git", "rev-parse", commit], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()
    path = root / f"worktree-{sha[:10]}"
    if not path.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), sha], cwd=REPO, check=True, capture_output=True)
    return path


def summary(records: list[dict], labels: tuple[str, str]) -> list[str]:
    """Median seconds per task and commit, and the overall ratio of the second commit to the first.

    Example:
        >>> recs = [{"commit": c, "task": "t", "seconds": s, "status": "ok"} for c, s in (("a", 1.0), ("b", 1.1), ("a", 1.0), ("b", 1.2))]
        >>> summary(recs, ("a", "b"))[-1]
        '| all | 1.000 | 1.150 | 1.15x |'
    """
    tasks = sorted({r["task"] for r in records})
    lines = [f"| task | {labels[0]} median s | {labels[1]} median s | ratio |", "| --- | --- | --- | --- |"]
    for task in [*tasks, "all"]:
        medians = [statistics.median(r["seconds"] for r in records if r["commit"] == label and task in (r["task"], "all"))
                   for label in labels]
        lines.append(f"| {task} | {medians[0]:.3f} | {medians[1]:.3f} | {medians[1] / medians[0]:.2f}x |")
    stages = sorted({stage for r in records for stage in r.get("stages", {})})
    if stages:
        lines += ["", "| stage (all tasks) | " + " | ".join(f"{label} median s" for label in labels) + " |", "| --- | --- | --- |"]
        for stage in stages:
            medians = [statistics.median([r["stages"].get(stage, 0.0) for r in records if r["commit"] == label] or [0.0])
                       for label in labels]
            lines.append(f"| {stage} | {medians[0]:.3f} | {medians[1]:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--head", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--tasks", default="level1/1_ReLU,level1/10_Softmax,level1/12_LayerNorm,level1/16_Conv1D,level2/1_Linear_ReLU",
                        help="bundled cpu suite tasks, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="timed judgements of each task per block")
    parser.add_argument("--blocks", type=int, default=2, help="turns each commit takes")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    labels = (args.base, args.head)
    trees = {label: worktree(label, args.out) for label in labels}
    records: list[dict] = []
    with open(args.out / "warm-cost.jsonl", "a") as sink:
        for block in range(args.blocks):
            for label in labels:
                env = dict(os.environ, PYTHONPATH=str(trees[label]))
                done = subprocess.run([sys.executable, "-c", _CHILD, args.tasks, str(args.rounds), str(args.out / f"cache-{label}"),
                                       label, str(block)], cwd=trees[label], env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    return 1
                for line in done.stdout.splitlines():
                    if line.startswith("{"):
                        sink.write(line + "\n")
                        sink.flush()
                        records.append(json.loads(line))
                print(f"block {block} {label}: {len(records)} judgements so far", flush=True)
    meta = f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    (args.out / "warm-cost.md").write_text("\n".join([f"# Warm cost per judged answer: {labels[0]} vs {labels[1]}", "", meta, "",
                                                      *summary(records, labels), ""]))
    print("\n".join(summary(records, labels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
