"""Smoke tests of examples/grpo_local.py: two training steps in a subprocess, judged by the real cpp verifier.

Checks that every metric the learning curve reports is logged at every step and is finite, with GRPO's
advantages and with TRLOO's. Those runs are skipped without verl (``pip install 'kernelgym[verl]'``);
CI's ``.[dev,ci]`` brings it, so CI runs them. Without verl the example ends in one line and status 2.
"""

from __future__ import annotations

import importlib.util
import json
import math

import pytest

from .example_runs import ROOT, run_example, run_without

EXAMPLE = ROOT / "examples" / "grpo_local.py"

METRICS = (
    "score", "first_turn_score", "best_turn_score", "solved_fraction", "prime_echo_reward", "attempts",
    "mirrorpop/popped_fraction", "mirrorpop/d_p50", "mirrorpop/d_p90", "mirrorpop/d_max", "mirrorpop/tau",
    "retry/size", "retry/pushed", "retry/draws", "retry/recovered", "retry/retried", "retry/dropped", "retry/shortened",
    "loss", "expression_entropy", "judge/judged", "judge/reused", "seconds/step",
)


def test_without_verl_the_example_ends_in_one_line():
    done = run_without("verl", EXAMPLE)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "grpo_local.py: error: 'verl' is not installed; install it with: pip install 'kernelgym[verl]'"
    ]


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl: pip install 'kernelgym[verl]'")
@pytest.mark.parametrize("advantage", ["grpo", "trloo"])
def test_two_steps_log_every_metric_finite(tmp_path, advantage):
    out = tmp_path / "metrics.jsonl"
    done = run_example(
        EXAMPLE, "--advantage", advantage, "--steps", "2", "--group-size", "2", "--mix-ratio", "1.0", "--out", str(out)
    )
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
