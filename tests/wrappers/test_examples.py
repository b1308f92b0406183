"""Smoke test of examples/wrappers_cpu.py: a tiny budget in a subprocess, on the real CPU env."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wrappers_cpu_example_recovers_a_failed_group():
    command = [
        sys.executable,
        str(ROOT / "examples" / "wrappers_cpu.py"),
        *("--groups", "2", "--group-size", "1", "--max-turns", "1", "--num-tasks", "1"),
        *("--struggle", "1.0", "--mix-ratio", "1.0"),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    episodes = [line for line in lines if line.startswith("group ")]
    assert len(episodes) == 2
    assert " fresh " in episodes[0] and " repair " in episodes[1]
    assert "pushed 1" in lines[1] and "recovered 1" in lines[-2], done.stdout
