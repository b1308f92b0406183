"""Smoke tests: the envs examples run end to end with tiny budgets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True, text=True, timeout=900, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_random_agent():
    out = run_example("random_agent.py", "--episodes", "2", "--max-turns", "2")
    assert out.count("status=format_error reward=0.000") == 4
    assert out.count("terminated=False truncated=True") == 2


@pytest.mark.slow
def test_scripted_repair():
    out = run_example("scripted_repair.py")
    turns = [line for line in out.splitlines() if line.startswith("--- turn")]
    assert [line.split("status=")[1].split()[0] for line in turns] == ["format_error", "illegal", "ok"]
    assert "terminated=True" in turns[-1]
