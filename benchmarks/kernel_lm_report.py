"""The kernel-lm record from one run folder: training, the judge's RL rate, held-out pass rates, RL curves.

The folder is what a GPU run of the commands in docs/kernel_lm.md leaves (``benchmarks/kernel_lm_run.sh``):

    train.log                 the last line of ``python -m kernelgym.training.kernel_lm`` (its metadata) and ``rc=``
    rate1/, rate2/            ``benchmarks/rl_rate.py`` on one GPU and on two (``summary.json``)
    rl_<name>.jsonl           ``examples/kernel_lm_grpo.py``'s metrics, one line per step (name: full0, nomp1, ...)
    ev_<model>_<mode>_<set>/  ``kernelgym bench`` runs (``attempts.jsonl``): model start or an RL run's name, mode
                              greedy (k=1, temperature 0) or best4 (k=4), set ho (held-out compositions) or kb
                              (KernelBench level 1)

    python benchmarks/kernel_lm_report.py --run /tmp/b --out benchmarks/results/kernel-lm --commit 25df014 --machine "..."

Prints the tables (the record's prose is written around them); writes ``<out>.png`` (per step: first-turn score, solved share, MirrorPop's filtered share, BDR's retry
share, one line per run) and ``<out>.jsonl`` (the step lines and each evaluation's per-task statuses, tagged).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np

from kernelgym.bench.metrics import Attempt, summarize

GROUPS = {"full": "MirrorPop + BDR", "nomp": "no MirrorPop (tau 1e9)", "nobdr": "no BDR (mix ratio 0)"}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def evaluation(folder: Path) -> dict:
    """Per-task statuses of a bench folder and its metrics (``kernelgym.bench.metrics.summarize``: pass@1, pass@k,
    fast_1), on the tasks with every sample judged (a run cut short leaves some tasks part-judged)."""
    attempts = [a for a in read_jsonl(folder / "attempts.jsonl") if a.get("final", True)]
    by_task: dict[str, list[dict]] = collections.defaultdict(list)
    for a in attempts:
        by_task[a["task_id"]].append(a)
    k = max((len(v) for v in by_task.values()), default=0)
    done = {t: v for t, v in by_task.items() if len(v) == k}
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
    metrics = summarize([Attempt.from_dict(a) for v in done.values() for a in v],
                        {t: v[0]["level"] for t, v in done.items()}, k=max(k, 1), turns=1).first_turn
    return {
        "tasks": len(done), "planned": len(summary.get("task_ids", [])) or None, "k": k,
        "pass_at_1": metrics.pass_at_1, "pass_at_k": metrics.pass_at_k, "fast_1": metrics.fast_p.get("fast_1", 0.0),
        "solved": sorted(t for t, v in done.items() if any(a["status"] == "ok" for a in v)),
        "statuses": dict(collections.Counter(a["status"] for v in done.values() for a in v)),
        "per_task": {t: [a["status"] for a in v] for t, v in done.items()},
    }


def rate_rows(run: Path) -> list[dict]:
    rows = []
    for name in ("rate1", "rate2"):
        path = run / name / "summary.json"
        if path.is_file():
            for phase in json.loads(path.read_text()).get("rows", []):
                rows.append({"run": name, **phase})
    return rows


def plot(curves: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("score", "first-turn score"), ("solved_fraction", "solved share"),
              ("mirrorpop/popped_fraction", "MirrorPop filtered share"), ("retry_share", "BDR retry share")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2))
    for ax, (key, title) in zip(axes, panels, strict=True):
        for name, steps in sorted(curves.items()):
            style = {"full": "-", "nomp": "--", "nobdr": ":"}[name.rstrip("0123456789")]
            ax.plot([s["step"] for s in steps], [s[key] for s in steps], style, marker="o", ms=3, label=name)
        ax.set_title(title)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run folder")
    parser.add_argument("--out", required=True, help="output path without suffix")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--date", required=True)
    args = parser.parse_args()
    run, out = Path(args.run), Path(args.out)

    train_lines = (run / "train.log").read_text().splitlines() if (run / "train.log").is_file() else []
    train = next((json.loads(line) for line in reversed(train_lines) if line.startswith("{")), {})
    train_rc = next((line for line in reversed(train_lines) if line.startswith("rc=")), "")

    curves = {}
    for path in sorted(run.glob("rl_*.jsonl")):
        steps = read_jsonl(path)
        for s in steps:
            total = s["fresh_trajectories"] + s["repair_trajectories"]
            s["retry_share"] = s["repair_trajectories"] / total if total else 0.0
        curves[path.stem[3:]] = steps
    evals = {p.name[3:]: evaluation(p) for p in sorted(run.glob("ev_*")) if p.is_dir()}
    rates = rate_rows(run)

    with out.with_suffix(".jsonl").open("w") as raw:
        for name, steps in curves.items():
            for s in steps:
                raw.write(json.dumps({"kind": "rl_step", "run": name, "commit": args.commit, **s}) + "\n")
        for name, e in evals.items():
            raw.write(json.dumps({"kind": "evaluation", "run": name, "commit": args.commit, **e}) + "\n")
        for r in rates:
            raw.write(json.dumps({"kind": "rl_rate", "commit": args.commit, **r}) + "\n")
        raw.write(json.dumps({"kind": "training", "commit": args.commit, "rc": train_rc, **train}) + "\n")
    if curves:
        plot(curves, out.with_suffix(".png"))

    lines = [f"<!-- generated by benchmarks/kernel_lm_report.py from a run folder; {args.date}, {args.commit} -->", "",
             f"- machine: {args.machine}", f"- commit: {args.commit}, date: {args.date}", ""]
    if train:
        lines += ["### Training", "", f"- parameters: {train.get('parameters')}, size {train.get('size')}",
                  f"- corpus: {train.get('items')} items; pretrain {train.get('pretrain_steps')} steps (last loss "
                  f"{train.get('pretrain_loss'):.4f}), fine-tune {train.get('finetune_steps')} steps (last loss "
                  f"{train.get('finetune_loss'):.5f}); `{train_rc}` (seconds since the run began)", ""]
    if rates:
        lines += ["### The judge's RL rate (`benchmarks/rl_rate.py`)", "",
                  "| call | phase | judged | wall s | answers/min | steady/min | median check s | median time s |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in rates:
            stages = r.get("median_stage_s") or {}
            lines.append(f"| {r['run']} | {r.get('phase')} | {r.get('judged')} | {r.get('wall_s')} | "
                         f"{r.get('answers_per_min')} | {r.get('steady_per_min')} | {stages.get('check', '-')} | "
                         f"{stages.get('time', '-')} |")
        lines.append("")
    lines += ["### Held-out evaluation (`kernelgym bench`, triton backend)", "",
              "| model, decoding, tasks | tasks judged / planned | k | pass@1 | pass@k | fast_1 | solved | statuses |",
              "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for name, e in evals.items():
        lines.append(f"| {name} | {e['tasks']} / {e['planned'] or '-'} | {e['k']} | {e['pass_at_1']:.3f} | "
                     f"{e['pass_at_k']:.3f} | {e['fast_1']:.3f} | {', '.join(e['solved']) or '-'} | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(e['statuses'].items()))} |")
    lines += ["", "### RL runs (`examples/kernel_lm_grpo.py`)", "",
              "| run | method | steps | s/step (median) | first-turn score, first / last step | solved share, first / "
              "last | MirrorPop filtered share (mean) | BDR retry share (mean) | judged / reused |",
              "| --- | --- | ---: | ---: | --- | --- | ---: | ---: | --- |"]
    for name, steps in curves.items():
        if not steps:
            lines.append(f"| {name} | {GROUPS[name.rstrip('0123456789')]} | 0 | - | - | - | - | - | - |")
            continue
        first, last = steps[0], steps[-1]
        lines.append(
            f"| {name} | {GROUPS[name.rstrip('0123456789')]} | {len(steps)} | "
            f"{np.median([s['seconds/step'] for s in steps]):.1f} | {first['score']:.3f} / {last['score']:.3f} | "
            f"{first['solved_fraction']:.2f} / {last['solved_fraction']:.2f} | "
            f"{np.mean([s['mirrorpop/popped_fraction'] for s in steps]):.3f} | "
            f"{np.mean([s['retry_share'] for s in steps]):.3f} | "
            f"{sum(s['judge/judged'] for s in steps)} / {sum(s['judge/reused'] for s in steps)} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
