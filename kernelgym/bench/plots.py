"""The figures of a benchmark run (needs ``pip install 'kernelgym[plots]'``).

Holds:
    write_plots: the speedup, per-level and per-turn figures of a run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from kernelgym.bench.config import BenchSummary
from kernelgym.bench.metrics import (
    Attempt,
    MetricSet,
    best_attempt,
    group_episodes,
)
from kernelgym.bench.runs import PLOT_FILES
from kernelgym.errors import require_extra

__all__ = ["write_plots"]


def write_plots(summary: BenchSummary, attempts: Sequence[Attempt], out_dir: str | Path) -> list[Path]:
    """Write the figures of a run into ``out_dir``; return their paths.

    ``speedup_distribution.png``: the speedup of every task's fastest correct best-turn answer, one named bar per task.
    ``metrics_per_level.png``: best-turn pass@1, pass@k, faster rate and hack rate per level.
    ``metrics_per_turn.png`` (only with more than one turn): the same metrics when each episode is
    judged by its first ``t`` turns.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    require_extra("matplotlib", "plots")
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    out_dir = Path(out_dir)
    metrics = summary.metrics
    paths = [out_dir / name for name in PLOT_FILES]

    wanted = set(summary.task_ids)
    fastest: dict[str, dict[str, float]] = {}
    for key, group in group_episodes(attempts).items():
        best = best_attempt(group)
        if key[0] not in wanted or best is None or not best.ok:
            continue
        for label, value in (("vs eager", best.speedup_eager), ("vs torch.compile", best.speedup_compile)):
            if value:
                task = fastest.setdefault(label, {})
                task[key[0]] = max(value, task.get(key[0], 0.0))
    names = [t for t in summary.task_ids if any(t in by_task for by_task in fastest.values())]
    figure = Figure(figsize=(7, max(3.0, 1.5 + 0.28 * len(names) * max(1, len(fastest)))), layout="constrained")
    axes = figure.subplots()
    values = [v for by_task in fastest.values() for v in by_task.values()]
    if values:
        height = 0.8 / len(fastest)
        for i, (label, by_task) in enumerate(fastest.items()):
            rows = [(y, by_task[t]) for y, t in enumerate(names) if t in by_task]
            axes.barh([y + i * height for y, _ in rows], [v for _, v in rows], height, label=f"{label} (n={len(rows)})")
        axes.set_yticks([y + height * (len(fastest) - 1) / 2 for y in range(len(names))], names,
                        fontsize=8 if len(names) <= 40 else 6)
        axes.invert_yaxis()
        low, high = min(values + [1.0]) / 1.2, max(values + [1.0]) * 1.2
        axes.set_xscale("log")
        axes.set_xlim(low, high)
        first, last = math.floor(math.log2(low)), math.ceil(math.log2(high))
        step = max(1, math.ceil((last - first + 1) / 9))
        axes.xaxis.set_major_locator(FixedLocator([2.0**p for p in range(first, last + 1, step)]))
        axes.xaxis.set_major_formatter(FuncFormatter(_speedup_label))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.axvline(1.0, color="black", linewidth=1)
        axes.axvline(metrics.faster_threshold, color="gray", linestyle="--", linewidth=1,
                     label=f"faster threshold {metrics.faster_threshold:g}x")
        axes.legend(fontsize=8)
    else:
        axes.text(0.5, 0.5, "no correct, timed answers", ha="center", va="center", transform=axes.transAxes)
        axes.set_yticks([])
    # Long task names narrow the axes; a label centred under them would run off the figure's right edge.
    axes.set_xlabel("speedup (reference time / candidate time),\nfastest correct answer per task", loc="right")
    axes.set_title(f"{summary.agent} on {summary.suite}: {len(names)} of {len(summary.task_ids)} tasks correct and timed")
    figure.savefig(paths[0], dpi=120, bbox_inches="tight")

    bars = _plotted_metrics(summary.k)
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    levels = sorted(metrics.per_level)
    width = 0.8 / len(bars)
    for i, (label, name) in enumerate(bars):
        heights = [_metric_value(metrics.per_level[level]["best_turn"], name) or 0.0 for level in levels]
        axes.bar([x + i * width for x in range(len(levels))], heights, width, label=label)
    axes.set_xticks([x + width * (len(bars) - 1) / 2 for x in range(len(levels))], [f"level {lv}" for lv in levels])
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("rate (best turn)")
    axes.set_title(f"{summary.agent} on {summary.suite}: metrics per level")
    axes.legend()
    figure.savefig(paths[1], dpi=120, bbox_inches="tight")
    if len(metrics.per_turn) < 2:
        return paths[:2]

    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    turns = list(range(1, len(metrics.per_turn) + 1))
    for label, name in bars:
        axes.plot(turns, [_metric_value(m, name) or 0.0 for m in metrics.per_turn], marker="o", label=label)
    axes.set_xticks(turns)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("turns allowed (each episode judged by its best attempt so far)")
    axes.set_ylabel("rate")
    axes.set_title(f"{summary.agent} on {summary.suite}: metrics per turn")
    axes.legend()
    figure.savefig(paths[2], dpi=120, bbox_inches="tight")
    return paths


def _speedup_label(value: float, _position: float) -> str:
    return f"{value:g}x" if value >= 1 else f"1/{round(1 / value)}x"


def _plotted_metrics(k: int) -> list[tuple[str, str]]:
    names = [("pass@1", "pass_at_1")]
    if k > 1:
        names.append((f"pass@{k}", "pass_at_k"))
    return names + [("faster vs eager", "faster_eager"), ("fast_1", "fast_1"), ("hack rate", "hack_rate")]


def _metric_value(metrics: MetricSet, name: str) -> float | None:
    return metrics.fast_p[name] if name in metrics.fast_p else getattr(metrics, name)
