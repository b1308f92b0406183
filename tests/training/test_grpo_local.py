"""Smoke test of examples/grpo_local.py: two training steps in a subprocess, judged by the real cpp verifier.

Checks that every metric the learning curve reports is logged at every step and is finite.
Skipped without verl (``pip install 'kernelgym[verl]'``); CI's ``.[dev,ci]`` brings it, so CI runs it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

ROOT = Path(__file__).resolve().parents[2]

METRICS = (
    "score", "first_turn_score", "best_turn_score", "solved_fraction", "prime_echo_reward", "attempts",
    "mirrorpop/popped_fraction", "mirrorpop/d_p50", "mirrorpop/d_p90", "mirrorpop/d_max", "mirrorpop/tau",
    "retry/size", "retry/pushed", "retry/draws", "retry/recovered", "retry/retried", "retry/dropped",
    "loss", "expression_entropy", "judge/judged", "judge/reused", "seconds/step",
)


@pytest.mark.extended
@pytest.mark.slow
def test_two_steps_log_every_metric_finite(tmp_path):
    out = tmp_path / "metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, str(ROOT / "examples" / "grpo_local.py"),
        *("--steps", "2", "--group-size", "2", "--mix-ratio", "1.0", "--out", str(out)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-4000:]

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        missing = [name for name in METRICS if name not in record]
        assert not missing, missing
        assert all(math.isfinite(record[name]) for name in METRICS), record
        assert 0.0 <= record["score"] <= 1.0 and 0.0 <= record["mirrorpop/popped_fraction"] <= 1.0
    assert records[0]["judge/judged"] > 0  # the real verifier judged the first step's answers
    assert sum(1 for line in done.stdout.splitlines() if line.startswith("step ")) == 2
