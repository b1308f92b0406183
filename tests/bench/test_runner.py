"""The benchmark runner on the bundled CPU suite: files, pass@1 of the solutions, interruption and resume, skipped tasks, dry runs.

Tests marked ``slow`` build the first two C++ solutions of the cpu suite; builds go through the
verifier's shared cache (``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``), so later runs reuse them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelgym.agents.base import AgentError, AgentRequest, BaseAgent, agent_names, make_agent
from kernelgym.agents.random_agent import RandomAgent
from kernelgym.agents.solutions import SolutionsAgent
from kernelgym.bench import (
    ATTEMPTS_FILE,
    PLOT_FILES,
    RUN_FILE,
    SUMMARY_FILE,
    BenchConfig,
    add_bench_arguments,
    bench_main,
    plan_bench,
    read_attempts,
    run_bench,
)
from kernelgym.errors import KernelGymError
from kernelgym.tasks import load_suite
from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig

REPO = Path(__file__).resolve().parents[2]
CHEAP_JUDGE = VerifierConfig(runs=3, warmup=1)
LIMIT = 2  # two answers already built for other tests (the first two of the cpu suite)
# What must not change when a run is interrupted and resumed (timings may).
STABLE = ("tasks", "episodes", "attempts", "passed", "pass_at_1", "pass_at_k", "avg_at_k", "hack_rate")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return add_bench_arguments(argparse.ArgumentParser(prog="kernelgym bench")).parse_args(list(argv))


def stable(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: metrics[key] for key in STABLE}


class InterruptedSolutions(SolutionsAgent):
    """The solutions agent, until its ``interrupt_at``-th call, which raises KeyboardInterrupt (a Ctrl-C)."""

    def __init__(self, interrupt_at: int) -> None:
        self.interrupt_at = interrupt_at
        self.calls = 0

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        self.calls += 1
        if self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        return super().act(requests)


class RecordingSolutions(SolutionsAgent):
    """The solutions agent, recording every request."""

    def __init__(self) -> None:
        self.requests: list[AgentRequest] = []

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        self.requests.extend(requests)
        return super().act(requests)


class RepairingAgent(BaseAgent):
    """No code at turn 1, the bundled solution from turn 2 on (after having seen feedback)."""

    name = "repairing"

    def __init__(self, interrupt_at: int | None = None) -> None:
        self.interrupt_at = interrupt_at
        self.requests: list[AgentRequest] = []

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        if self.interrupt_at is not None and len(self.requests) + 1 >= self.interrupt_at:
            raise KeyboardInterrupt
        self.requests.extend(requests)
        return ["no code yet" if r.turn == 1 else r.task.solution(r.backend) for r in requests]


@pytest.fixture(scope="module")
def solutions_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    """``kernelgym bench --suite cpu --agent solutions --out DIR --limit 3``, run once for the module."""
    out = tmp_path_factory.mktemp("bench") / "solutions"
    code = bench_main(parse(["--suite", "cpu", "--agent", "solutions", "--out", str(out), "--limit", str(LIMIT),
                             "--runs", "3", "--warmup", "1", "--quiet"]))
    return code, out


@pytest.mark.slow
def test_solutions_pass_everything_and_the_run_files_are_written(solutions_run: tuple[int, Path]) -> None:
    code, out = solutions_run
    assert code == 0
    summary = json.loads((out / SUMMARY_FILE).read_text())
    assert summary["complete"] and summary["episodes"] == LIMIT and summary["agent"] == "solutions"
    assert summary["backend"] == "cpp"
    for turn in ("first_turn", "best_turn"):
        assert summary["metrics"][turn]["pass_at_1"] == 1.0
        assert summary["metrics"][turn]["hack_rate"] == 0.0
    assert summary["metrics"]["best_turn"]["fast_p"]["fast_0"] == 1.0  # every correct answer was timed
    one_turn_plots = [name for name in PLOT_FILES if name != "metrics_per_turn.png"]  # one turn: no per-turn curve
    assert set(summary["files"]) == {ATTEMPTS_FILE, RUN_FILE, SUMMARY_FILE, *one_turn_plots}
    for name in one_turn_plots:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "metrics_per_turn.png").exists()
    records = read_attempts(out / ATTEMPTS_FILE)
    assert [r["task_id"] for r in records] == ["level1/1_ReLU", "level1/2_Sigmoid"]
    for record in records:
        assert record["status"] == "ok" and record["correct"] and record["legal"] and record["final"]
        assert record["speedup_eager"] > 0 and record["runtime_ms"] > 0 and 0 < record["score"] <= 1
        assert "ModelNew" in record["response"] and record["level"] == 1 and record["sample"] == 0
    run = json.loads((out / RUN_FILE).read_text())
    assert (run["suite"], run["k"], run["turns"], run["verifier"]["runs"]) == ("cpu", 1, 1, 3)


@pytest.mark.slow
def test_an_interrupted_run_resumes_to_the_same_summary(solutions_run: tuple[int, Path], tmp_path: Path) -> None:
    _, reference_out = solutions_run
    reference = json.loads((reference_out / SUMMARY_FILE).read_text())["metrics"]
    config = BenchConfig(suite="cpu", agent="solutions", limit=LIMIT, out_dir=str(tmp_path), verifier=CHEAP_JUDGE,
                         batch_size=1, plots=False, progress=False)

    with pytest.raises(KeyboardInterrupt):  # Ctrl-C while the agent works on the second episode
        run_bench(config, agent=InterruptedSolutions(interrupt_at=2))
    finished = read_attempts(tmp_path / ATTEMPTS_FILE)
    assert [r["task_id"] for r in finished] == ["level1/1_ReLU"]
    with (tmp_path / ATTEMPTS_FILE).open("a") as file:  # a kill in the middle of writing a line
        file.write('{"task_id": "level1/2_Sigmoid", "level": 1, "sam')

    with pytest.raises(KernelGymError, match="--resume"):
        run_bench(config)
    agent = RecordingSolutions()
    resumed = run_bench(replace(config, resume=True), agent=agent)
    assert [r.task_id for r in agent.requests] == ["level1/2_Sigmoid"]
    assert stable(resumed.metrics.first_turn.to_dict()) == stable(reference["first_turn"])
    assert stable(resumed.metrics.best_turn.to_dict()) == stable(reference["best_turn"])
    records = read_attempts(tmp_path / ATTEMPTS_FILE)
    assert [r["task_id"] for r in records] == ["level1/1_ReLU", "level1/2_Sigmoid"]
    assert records[0] == finished[0]  # kept, not judged again

    again = run_bench(replace(config, resume=True), agent=agent)  # nothing left to do
    assert len(agent.requests) == 1 and again.metrics == resumed.metrics


@pytest.mark.slow
def test_resume_continues_an_episode_in_the_middle(tmp_path: Path) -> None:
    config = BenchConfig(suite="cpu", agent="repairing", limit=2, turns=2, out_dir=str(tmp_path),
                         verifier=CHEAP_JUDGE, success_speedup=0.0, batch_size=1, plots=False, progress=False)
    # Calls: (ReLU, turn 1), (ReLU, turn 2), (Sigmoid, turn 1), then Ctrl-C before (Sigmoid, turn 2).
    with pytest.raises(KeyboardInterrupt):
        run_bench(config, agent=RepairingAgent(interrupt_at=4))
    before = read_attempts(tmp_path / ATTEMPTS_FILE)
    assert [(r["task_id"], r["turn"], r["final"]) for r in before] == [
        ("level1/1_ReLU", 1, False), ("level1/1_ReLU", 2, True), ("level1/2_Sigmoid", 1, False),
    ]

    agent = RepairingAgent()
    summary = run_bench(replace(config, resume=True), agent=agent)
    (request,) = agent.requests  # only the missing attempt is asked for
    assert (request.task_id, request.turn, len(request.history)) == ("level1/2_Sigmoid", 2, 1)
    assert request.history[0].response == "no code yet"
    assert request.history[0].feedback.strip()  # the recorded feedback, replayed into the env
    assert summary.metrics.first_turn.pass_at_1 == 0.0
    assert summary.metrics.best_turn.pass_at_1 == 1.0
    assert [m.pass_at_1 for m in summary.metrics.per_turn] == [0.0, 1.0]
    assert summary.attempts == 4 and summary.complete


def test_resume_refuses_other_settings(tmp_path: Path) -> None:
    config = BenchConfig(suite="cpu", agent="random", agent_options={"modes": ["garbage"]}, limit=1,
                         out_dir=str(tmp_path), plots=False, progress=False)
    summary = run_bench(config)
    assert summary.attempts == 1 and summary.metrics.best_turn.pass_at_1 == 0.0
    with pytest.raises(KernelGymError, match=r"different settings \(k: 1 -> 2\)"):
        run_bench(replace(config, resume=True, k=2))
    rerun = run_bench(replace(config, overwrite=True))
    assert rerun.attempts == 1 and len(read_attempts(tmp_path / ATTEMPTS_FILE)) == 1


def test_random_agent_is_the_floor(tmp_path: Path) -> None:
    config = BenchConfig(suite="cpu", agent="random", agent_options={"modes": ["garbage", "reference"], "seed": 1},
                         limit=4, k=2, out_dir=str(tmp_path), progress=False)
    summary = run_bench(config)
    best = summary.metrics.best_turn
    assert best.pass_at_1 == 0.0 and best.pass_at_k == 0.0 and summary.attempts == 8
    assert "ok" not in {r["status"] for r in read_attempts(tmp_path / ATTEMPTS_FILE)}
    assert set(summary.files) >= set(PLOT_FILES) - {"metrics_per_turn.png"}


def test_cli_reports_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(parse(["--suite", "no-such-suite", "--out", str(tmp_path)])) == 2
    assert "unknown task suite" in capsys.readouterr().err
    assert bench_main(parse(["--agent", "solutions", "--base-url", "http://x", "--out", str(tmp_path)])) == 2
    assert "takes no option 'base_url'" in capsys.readouterr().err


def test_agent_registry() -> None:
    assert {"solutions", "random", "openai", "hf"} <= set(agent_names())
    with pytest.raises(AgentError, match="unknown agent"):
        make_agent("no-such-agent")
    example = make_agent(f"{REPO / 'examples' / 'custom_agent.py'}:PyTorchFallbackAgent")
    assert example.name == "pytorch-fallback"


def test_custom_agent_example_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "custom_agent.py"), "--limit", "2", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    assert "hack rate" in result.stdout
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    assert summary["metrics"]["best_turn"]["hack_rate"] == 1.0
    assert summary["metrics"]["best_turn"]["pass_at_1"] == 0.0


class SkippingRandom(RandomAgent):
    """The random agent (garbage only), which cannot answer ``level1/2_Sigmoid``."""

    def skip_reason(self, task: Task, backend: str) -> str | None:
        return "not my kind of task" if task.id == "level1/2_Sigmoid" else None


def test_a_task_the_agent_cannot_answer_is_skipped_and_the_run_goes_on(tmp_path: Path) -> None:
    config = BenchConfig(suite="cpu", limit=3, out_dir=str(tmp_path), plots=False, progress=False)
    summary = run_bench(config, agent=SkippingRandom(modes=["garbage"]))
    assert summary.task_ids == ("level1/1_ReLU", "level1/3_Tanh") and summary.complete
    assert summary.skipped == {"level1/2_Sigmoid": "not my kind of task"}
    assert summary.metrics.best_turn.tasks == 2  # counted neither as passed nor as failed
    assert [r["task_id"] for r in read_attempts(tmp_path / ATTEMPTS_FILE)] == ["level1/1_ReLU", "level1/3_Tanh"]
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["skipped"] == summary.skipped
    assert "skipped 1 task(s), not counted above:\n  level1/2_Sigmoid: not my kind of task" in summary.report()


def test_a_run_of_only_skipped_tasks_is_refused(tmp_path: Path) -> None:
    config = BenchConfig(suite="cpu", task_ids=("level1/2_Sigmoid",), out_dir=str(tmp_path), progress=False)
    with pytest.raises(KernelGymError, match="can answer none of the selected tasks"):
        run_bench(config, agent=SkippingRandom(modes=["garbage"]))


def test_dry_run_lists_the_gpu_tasks_without_a_cuda_solution_as_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``kernelgym bench --suite gpu --agent solutions --backend cuda --dry-run``: needs no GPU, judges nothing.
    out = tmp_path / "run"
    assert bench_main(parse(["--suite", "gpu", "--agent", "solutions", "--backend", "cuda", "--dry-run",
                             "--out", str(out)])) == 0
    printed = capsys.readouterr().out
    assert "  skip  level1/7_RMSNorm: no bundled 'cuda' solution (it has: triton)" in printed
    assert "  run   level1/1_ReLU" in printed and "nothing judged" in printed
    assert not out.exists()
    plan = plan_bench(BenchConfig(suite="gpu", backend="cuda"), SolutionsAgent())
    gpu = load_suite("gpu")
    assert set(plan.skipped) == {task.id for task in gpu if "cuda" not in task.solutions}
    assert plan.suite.ids() == [task.id for task in gpu if "cuda" in task.solutions]
    assert plan_bench(BenchConfig(suite="gpu", backend="triton"), SolutionsAgent()).skipped.keys() == {
        task.id for task in gpu if "triton" not in task.solutions
    }


def test_the_progress_line_counts_answers_as_they_are_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = BenchConfig(suite="cpu", agent="random", agent_options={"modes": ["garbage"], "seed": 1},
                         limit=3, out_dir=str(tmp_path), plots=False, progress=True)
    run_bench(config)
    err = capsys.readouterr().err
    assert "judged 0/3 answers" in err and "judged 1/3 answers" in err and "judged 3/3 answers" in err
    assert "answers judged:" in err and "1/3" in err and "3/3" in err  # the answers' own bar advances per answer
