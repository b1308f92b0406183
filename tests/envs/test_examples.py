"""Smoke tests: the envs examples run end to end with tiny budgets, on the test run's own build cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.fixture
def run_example(cache_dir: Path):  # noqa: ANN201 (a function)
    """Run ``examples/<name> *args`` in a subprocess with the shared test cache (never the user's ``~/.cache``)."""

    def run(name: str, *args: str) -> str:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                   KERNELGYM_CACHE=str(cache_dir))
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / name), *args],
            capture_output=True, text=True, timeout=900, env=env, check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def test_random_agent(run_example):
    out = run_example("random_agent.py", "--episodes", "2", "--max-turns", "2")
    assert out.count("status=format_error reward=0.000") == 4
    assert out.count("terminated=False truncated=True") == 2


@pytest.mark.slow
def test_scripted_repair(run_example):
    out = run_example("scripted_repair.py")
    turns = [line for line in out.splitlines() if line.startswith("--- turn")]
    assert [line.split("status=")[1].split()[0] for line in turns] == ["format_error", "illegal", "ok"]
    assert "terminated=True" in turns[-1]


def test_every_option_of_every_example_has_help_text(run_example):
    for example in EXAMPLES:
        text = run_example(example.name, "--help")
        options = [line.split()[0] for line in text.splitlines() if line.startswith("  --") and line.split()[0] != "--help"]
        assert options, f"{example.name} has no options"
        for block in text.split("options:", 1)[1].split("\n  --")[1:]:
            help_text, default = block.split("(default:")  # the help, then the default argparse appends
            words = [w for w in help_text.split()[1:] if not (w.isupper() or w.startswith("--") or w == "|")]
            assert words and default.strip(), f"{example.name}: --{block.strip()} has no help text"


def test_the_ppo_example_writes_under_runs_by_default() -> None:
    source = (ROOT / "examples" / "sb3_ppo_tune.py").read_text()
    assert 'out_dir: str = "runs/' in source  # never into the committed benchmarks/results/ unless asked
