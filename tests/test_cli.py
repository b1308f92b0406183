"""The ``kernelgym`` command line, run as a user would (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ILLEGAL = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
'''


def kernelgym(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelgym.cli", *args], capture_output=True, text=True, timeout=900, cwd=cwd)


def test_tasks_lists_the_cpu_suite() -> None:
    out = kernelgym("tasks", "--suite", "cpu")
    assert out.returncode == 0, out.stderr
    assert "level1/1_ReLU" in out.stdout and "23 tasks" in out.stdout


def test_eval_json_reports_violations(tmp_path: Path) -> None:
    answer = tmp_path / "answer.py"
    answer.write_text(ILLEGAL)
    out = kernelgym("eval", "--task", "level1/1_ReLU", "--json", str(answer))
    assert out.returncode == 1
    data = json.loads(out.stdout)
    for key in ("status", "compiled", "correct", "legal", "speedup", "violations", "feedback", "score"):
        assert key in data
    assert data["status"] == "illegal" and data["legal"] is False and data["score"] == 0.0
    assert data["violations"] and {"rule", "line", "message"} <= set(data["violations"][0])
    line = ILLEGAL.strip().splitlines().index("        return torch.relu(x)") + 1
    assert {"rule": "torch-compute-in-forward", "line": line} in [{"rule": v["rule"], "line": v["line"]} for v in data["violations"]]


def test_eval_accepts_a_task_file(tmp_path: Path) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text("Here is my idea, no code yet.")
    task_file = Path(__file__).resolve().parents[1] / "kernelgym/tasks/suites/cpu/level1/1_ReLU.py"
    out = kernelgym("eval", "--task", str(task_file), str(answer))
    assert out.returncode == 1
    assert "format_error" in out.stdout


def test_unknown_task_is_a_clear_error(tmp_path: Path) -> None:
    answer = tmp_path / "a.py"
    answer.write_text(ILLEGAL)
    out = kernelgym("eval", "--task", "level9/404_Nothing", str(answer))
    assert out.returncode == 2
    assert "kernelgym tasks" in out.stderr


@pytest.mark.slow
def test_eval_table_for_a_bundled_solution(cache_dir: Path) -> None:
    solution = Path(__file__).resolve().parents[1] / "kernelgym/tasks/suites/cpu/solutions/cpp/level1/5_Add.py"
    out = kernelgym("eval", "--task", "level1/5_Add", "--runs", "3", "--cache-dir", str(cache_dir), str(solution))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "status" in out.stdout and "ok" in out.stdout and "speedup vs eager" in out.stdout
