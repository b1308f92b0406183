"""Run examples/grpo_local.py for several seeds, one after another, and write the learning curve (PNG + Markdown).

The Markdown file holds the machine, date, commit and settings, the first-five vs last-five
mean first-turn verifier score of each seed (the issue's bar: +0.2), and a per-step table of
every logged metric averaged over the seeds; the PNG plots the score, MirrorPop and Buffered
Dynamic Retry metrics per step. With ``--reuse`` the JSONL files already in ``--runs-dir`` are
plotted without training again.

    python benchmarks/grpo_local_curve.py --seeds 0 1 2 --steps 40
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 5
TABLE_COLUMNS = (
    ("score", "score (first turn)"),
    ("best_turn_score", "best turn"),
    ("prime_echo_reward", "PrimeEcho reward"),
    ("mirrorpop/popped_fraction", "popped"),
    ("mirrorpop/d_p50", "d p50"),
    ("mirrorpop/d_p90", "d p90"),
    ("mirrorpop/d_max", "d max"),
    ("retry/size", "BDR size"),
    ("retry/draws", "BDR draws"),
    ("retry/recovered", "BDR recovered"),
    ("expression_entropy", "entropy"),
    ("judge/judged", "judged"),
    ("seconds/step", "s/step"),
)


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (else the platform's)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def git_commit() -> str:
    """Short hash of HEAD, with ``+dirty`` when the tree has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def load(path: Path) -> list[dict]:
    """The step records of one run."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--runs-dir", default="runs/grpo-local")
    parser.add_argument("--out-dir", default="benchmarks/results")
    parser.add_argument("--out-name", default="grpo-local-learning-curve")
    parser.add_argument("--reuse", action="store_true", help="plot the runs already in --runs-dir")
    parser.add_argument("example_args", nargs="*", help="more options for examples/grpo_local.py (after --)")
    args = parser.parse_args()

    runs_dir = Path(args.runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    wall = {}
    for seed in args.seeds:
        path = runs_dir / f"seed{seed}.jsonl"
        if args.reuse:
            continue
        start = time.perf_counter()
        command = [sys.executable, str(ROOT / "examples" / "grpo_local.py"), "--seed", str(seed),
                   "--steps", str(args.steps), "--out", str(path), *args.example_args]
        subprocess.run(command, check=True, cwd=ROOT)
        wall[seed] = time.perf_counter() - start

    runs = {seed: load(runs_dir / f"seed{seed}.jsonl") for seed in args.seeds}
    steps = min(len(r) for r in runs.values())
    verdicts = []
    for seed, records in runs.items():
        scores = [r["score"] for r in records[:steps]]
        first, last = float(np.mean(scores[:WINDOW])), float(np.mean(scores[-WINDOW:]))
        seconds = records[steps - 1]["seconds/total"]
        verdicts.append((seed, first, last, last - first, seconds))

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(1, steps + 1)
    panels = (
        ("mean first-turn verifier score", ("score",)),
        ("best-turn score / PrimeEcho reward", ("best_turn_score", "prime_echo_reward")),
        ("MirrorPop popped fraction", ("mirrorpop/popped_fraction",)),
        ("MirrorPop deviation d (p50, p90)", ("mirrorpop/d_p50", "mirrorpop/d_p90")),
        ("BDR buffer size", ("retry/size",)),
        ("BDR draws / recovered (cumulative)", ("retry/draws", "retry/recovered")),
    )
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for ax, (title, keys) in zip(axes.flat, panels, strict=True):
        for key, style in zip(keys, ("-", "--"), strict=False):
            for seed, records in runs.items():
                ax.plot(x, [r[key] for r in records[:steps]], style, lw=1.2, alpha=0.8,
                        label=f"{key.split('/')[-1]} seed {seed}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.legend(fontsize=6)
    fig.suptitle("GRPO + MirrorPop + BDR through kernelgym (examples/grpo_local.py), real cpp verifier")
    fig.tight_layout()
    fig.savefig(out / f"{args.out_name}.png", dpi=110)

    settings = runs[args.seeds[0]]
    lines = [
        "# GRPO through kernelgym on 2 CPU cores: learning curve",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; commit {git_commit()}",
        f"- machine: {cpu_name()}, {os.cpu_count()} cores (shared with other jobs; load average "
        f"{os.getloadavg()[0]:.1f} at the end), no GPU",
        f"- run: `python benchmarks/grpo_local_curve.py --seeds {' '.join(map(str, args.seeds))} --steps {steps}"
        + (f" -- {' '.join(args.example_args)}" if args.example_args else "") + "` (seeds run one after another)",
        "- model: 2-layer Qwen2 (hidden 64), random init, word-level tokenizer whose tokens include the pieces of a "
        "C++ kernel program; tasks level1/1_ReLU, 2_Sigmoid, 3_Tanh, 4_GELU of the bundled cpu suite",
        "- judge: kernelgym `Verifier(\"cpp\")`, 3 correctness trials, timing off, shape variants off (score 0.6 = "
        "correct, 0.1 = compiled but wrong, 0 = illegal); each distinct (task, answer) judged once per run",
        f"- MirrorPop tau {settings[0]['mirrorpop/tau']}; defaults of examples/grpo_local.py otherwise",
        "",
        f"## Done criterion: mean score of the last {WINDOW} steps minus the first {WINDOW} (bar: +0.2)",
        "",
        "| seed | first 5 | last 5 | gain | passes | training-loop time |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for seed, first, last, gain, seconds in verdicts:
        lines.append(f"| {seed} | {first:.3f} | {last:.3f} | {gain:+.3f} | {'yes' if gain >= 0.2 else 'no'} | "
                     f"{seconds / 60:.1f} min |")
    lines += [
        "",
        f"![learning curve]({args.out_name}.png)",
        "",
        f"## Per step, mean over seeds {', '.join(map(str, args.seeds))}",
        "",
        "| step | " + " | ".join(label for _, label in TABLE_COLUMNS) + " |",
        "| --- " * (len(TABLE_COLUMNS) + 1) + "|",
    ]
    for i in range(steps):
        cells = [f"{np.mean([runs[s][i][key] for s in args.seeds]):.3f}" for key, _ in TABLE_COLUMNS]
        lines.append(f"| {i + 1} | " + " | ".join(cells) + " |")
    lines += ["", "Per-step JSON lines of every seed: `" + str(runs_dir) + "/seed<N>.jsonl` (copied next to this file)."]
    (out / f"{args.out_name}.md").write_text("\n".join(lines) + "\n")
    for seed in args.seeds:
        (out / f"{args.out_name}-seed{seed}.jsonl").write_text((runs_dir / f"seed{seed}.jsonl").read_text())
    for seed, first, last, gain, seconds in verdicts:
        print(f"seed {seed}: first5 {first:.3f} last5 {last:.3f} gain {gain:+.3f} ({seconds / 60:.1f} min)")


if __name__ == "__main__":
    main()
