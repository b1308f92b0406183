"""``benchmarks/kernel_lm_report.py`` on a run folder written by hand: pass rates, RL rows and the raw lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO / "benchmarks"))  # a folder of scripts, not a package

import kernel_lm_report  # noqa: E402


def _attempts(folder: Path, rows: list[tuple[str, str, float]]) -> None:
    """An ``attempts.jsonl`` as ``kernelgym bench`` writes it (the fields the report reads), samples numbered per task."""
    folder.mkdir(parents=True)
    samples: dict[str, int] = {}
    lines = []
    for task, status, speedup in rows:
        sample = samples[task] = samples.get(task, -1) + 1
        lines.append(json.dumps({"task_id": task, "level": 1, "sample": sample, "turn": 1, "final": True,
                                 "status": status, "speedup_eager": speedup}) + "\n")
    (folder / "attempts.jsonl").write_text("".join(lines))


def test_pass_rates_count_only_tasks_with_every_sample_judged(tmp_path):
    _attempts(tmp_path / "ev", [
        ("a", "ok", 1.5), ("a", "incorrect", None), ("a", "incorrect", None), ("a", "ok", 0.9),
        ("b", "format_error", None), ("b", "incorrect", None), ("b", "incorrect", None), ("b", "incorrect", None),
        ("c", "ok", 2.0),  # one of four samples judged when the run was cut: left out
    ])
    e = kernel_lm_report.evaluation(tmp_path / "ev")
    assert (e["tasks"], e["k"]) == (2, 4)
    assert e["pass_at_1"] == (2 / 4 + 0) / 2
    assert e["pass_at_k"] == 0.5
    assert e["fast_1"] == (1 / 4) / 2
    assert e["solved"] == ["a"]
    assert e["statuses"] == {"ok": 2, "incorrect": 5, "format_error": 1}


def test_the_report_reads_a_run_folder_and_writes_the_raw_lines_and_plot(tmp_path):
    run = tmp_path / "run"
    _attempts(run / "ev_start_greedy_ho", [("a", "ok", 1.2), ("b", "incorrect", None)])
    step = {"score": 0.1, "solved_fraction": 0.25, "mirrorpop/popped_fraction": 0.0, "fresh_trajectories": 24,
            "repair_trajectories": 8, "seconds/step": 60.0, "judge/judged": 30, "judge/reused": 2}
    (run / "rl_full0.jsonl").write_text("".join(json.dumps({"step": i, **step}) + "\n" for i in (1, 2)))
    (run / "train.log").write_text('{"parameters": 10, "size": {}, "items": 3, "pretrain_steps": 2, '
                                   '"pretrain_loss": 1.5, "finetune_steps": 2, "finetune_loss": 0.5}\nrc=0 at 9\n')
    out = tmp_path / "kernel-lm"
    printed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "kernel_lm_report.py"), "--run", str(run), "--out", str(out),
         "--commit", "abc", "--machine", "cpu", "--date", "2026-01-01"],
        capture_output=True, text=True, check=True).stdout
    assert "| start_greedy_ho | 2 / - | 1 | 0.500 | 0.500 | 0.500 | a |" in printed
    assert "| full0 | MirrorPop + BDR | 2 | 60.0 | 0.100 / 0.100 | 0.25 / 0.25 | 0.000 | 0.250 | 60 / 4 |" in printed
    kinds = [json.loads(line)["kind"] for line in out.with_suffix(".jsonl").read_text().splitlines()]
    assert kinds == ["rl_step", "rl_step", "evaluation", "training"]
    assert out.with_suffix(".png").stat().st_size > 0
