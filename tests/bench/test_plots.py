"""The run figures: tasks are named on the speedup plot, its axis label fits; the per-turn figure only exists with several turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym.bench import BenchSummary, write_plots
from kernelgym.bench.metrics import Attempt, summarize

matplotlib = pytest.importorskip("matplotlib", reason="the plots need matplotlib (kernelgym[plots])")
from matplotlib.figure import Figure  # noqa: E402

LEVELS = {"level1/1_ReLU": 1, "level1/2_Sigmoid": 1, "level2/1_Linear_ReLU": 2}


def run_summary(attempts: list[Attempt], turns: int) -> BenchSummary:
    metrics = summarize(attempts, LEVELS, k=1, turns=turns)
    return BenchSummary("cpu", "test", "cpp", 1, turns, tuple(LEVELS), len(LEVELS), len(attempts), True, "cpu", True,
                        metrics, "out")


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    figures: dict[str, Figure] = {}
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **_: figures.__setitem__(Path(path).name, self))
    return figures


def test_one_turn_has_no_per_turn_figure_and_the_speedups_name_their_tasks(saved: dict[str, Figure]) -> None:
    attempts = [
        Attempt("level1/1_ReLU", 1, 0, 1, "ok", speedup_eager=1.7),
        Attempt("level1/2_Sigmoid", 1, 0, 1, "incorrect"),
        Attempt("level2/1_Linear_ReLU", 2, 0, 1, "ok", speedup_eager=0.6),
    ]
    paths = write_plots(run_summary(attempts, turns=1), attempts, "out")
    assert [p.name for p in paths] == ["speedup_distribution.png", "metrics_per_level.png"]
    assert set(saved) == {p.name for p in paths}
    axes = saved["speedup_distribution.png"].axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["level1/1_ReLU", "level2/1_Linear_ReLU"]
    assert "2 of 3 tasks" in axes.get_title()


def test_several_turns_get_the_per_turn_figure(saved: dict[str, Figure]) -> None:
    attempts = [Attempt(t, lv, 0, turn, "ok" if turn == 2 else "incorrect", speedup_eager=1.2)
                for t, lv in LEVELS.items() for turn in (1, 2)]
    paths = write_plots(run_summary(attempts, turns=2), attempts, "out")
    assert [p.name for p in paths] == ["speedup_distribution.png", "metrics_per_level.png", "metrics_per_turn.png"]
    assert [tick for tick in saved["metrics_per_turn.png"].axes[0].get_xticks()] == [1, 2]


def test_the_speedup_axis_label_fits_in_the_figure_beside_long_task_names(saved: dict[str, Figure]) -> None:
    long_name = "level2/99_Conv3d_GroupNorm_Min_Clamp_Dropout_Softmax"  # KernelBench names are this long
    levels = {**LEVELS, long_name: 2}
    attempts = [Attempt(t, lv, 0, 1, "ok", speedup_eager=s) for (t, lv), s in zip(levels.items(), (0.3, 1.7, 9.0, 2.0), strict=True)]
    summary = BenchSummary("kb", "test", "cuda", 1, 1, tuple(levels), 4, 4, True, "gpu", True,
                           summarize(attempts, levels, k=1, turns=1), "out")
    write_plots(summary, attempts, "out")
    figure = saved["speedup_distribution.png"]
    figure.draw_without_rendering()
    label = figure.axes[0].xaxis.label.get_window_extent()
    assert figure.bbox.x0 <= label.x0 and label.x1 <= figure.bbox.x1 and figure.bbox.y0 <= label.y0
