"""``benchmarks/rl_rate.py`` without judging: its report merges one-GPU and two-GPU calls into rates and a ratio,
with one row per number of judges per GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

sys.path.insert(0, str(REPO / "benchmarks"))  # a folder of scripts, not a package

import rl_rate  # noqa: E402


def _call(path: Path, devices: int, wall: dict[str, float], judges: int = 1) -> Path:
    """A results file as one call writes it: its ``call`` line, two verdicts and a ``totals`` line per phase."""
    call = f"c{devices}-{judges}"
    lines: list[dict[str, Any]] = [{"record": "call", "call": call, "meta": {"gpu": "H200", "commit": "abc", "backend": "triton"}}]
    for phase, seconds in wall.items():
        records = [{"phase": phase, "answer": f"train-0-{i}", "family": "softmax", "status": "ok", "seconds": 1.0 + i,
                    "at_s": seconds / 2 * (i + 1), "stage_seconds": {"build": 0.0, "check": 0.5, "time": 0.25},
                    "cache_hit": phase == "reuse", "call": call, "devices": devices, "judges_per_device": judges} for i in range(2)]
        done = rl_rate.Phase(phase, records, seconds, {"reused": 1} if phase == "judge-once" else {})
        totals = rl_rate.phase_totals(done, devices, [str(i) for i in range(devices)], devices * judges, cache_state="filled",
                                      judges_per_device=judges)
        lines += [*records, {"record": "totals", "call": call, **totals}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_report_merges_calls_into_rates_per_device_count_and_the_ratio(tmp_path: Path) -> None:
    one = _call(tmp_path / "one.jsonl", 1, {"cold": 2.0, "reuse": 1.0, "judge-once": 1.0})
    two = _call(tmp_path / "two.jsonl", 2, {"cold": 1.25, "reuse": 0.5})
    assert rl_rate.main(["report", "--inputs", str(one), str(two), "--out", str(tmp_path / "merged")]) == 0
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    rates = {(row["phase"], row["devices"]): row["answers_per_min"] for row in summary["rows"]}
    assert rates == {("cold", 1): 60.0, ("cold", 2): 96.0, ("reuse", 1): 120.0, ("reuse", 2): 240.0, ("judge-once", 1): 120.0}
    assert [(s["phase"], s["ratio"], s["meets"]) for s in summary["scaling"]] == [("cold", 1.6, False), ("reuse", 2.0, True)]
    cold = summary["rows"][0]
    assert (cold["meets_target"], cold["cache_hits"], cold["median_stage_s"]["check"]) == (True, 0, 0.5)
    assert summary["rows"][2]["cache_hits"] == 2 and summary["rows"][4]["reused"] == 1
    assert summary["meta"]["gpu"] == "H200"
    markdown = (tmp_path / "merged" / "summary.md").read_text()
    assert "| cold | 2 | 1 | 1.60x | no |" in markdown and "| reuse | 1 | 1 |" in markdown


def test_calls_with_more_judges_per_device_are_rows_of_their_own(tmp_path: Path) -> None:
    one = _call(tmp_path / "one.jsonl", 1, {"cold": 2.0})
    four = _call(tmp_path / "four.jsonl", 1, {"cold": 0.8}, judges=4)
    assert rl_rate.main(["report", "--inputs", str(one), str(four), "--out", str(tmp_path / "merged")]) == 0
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert [(row["judges_per_device"], row["workers"], row["answers_per_min"]) for row in summary["rows"]] == [(1, 1, 60.0), (4, 4, 150.0)]
    assert summary["scaling"] == []  # one device each: no ratio over device counts
    assert "| cold | 1 | 4 | 4 | 1 | 2 | 0.8 | 150.0 |" in (tmp_path / "merged" / "summary.md").read_text()
    assert rl_rate.parse_args(["--out", "x"]).judges_per_device == 1


def test_phases_are_checked() -> None:
    assert rl_rate.parse_args(["--out", "x"]).phases == ["cold", "reuse"]
    with pytest.raises(SystemExit):
        rl_rate.parse_args(["--out", "x", "--phases", "cold,warm"])
