"""A judge error is never paid out: the env judges the answer again, then raises; the benchmark records it and re-judges it on resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kernelgym.agents.base import AgentRequest
from kernelgym.bench import BenchConfig, run_bench
from kernelgym.envs import KernelEnv
from kernelgym.envs.kernel_env import step_batch
from kernelgym.tasks.task import Task
from kernelgym.verifier.feedback import conclude
from kernelgym.verifier.result import EvalResult, JudgeError, Status

from .fakes import FakeVerifier, toy_suite


class FlakyJudge(FakeVerifier):
    """The fake verifier, whose judge fails ``failures`` times on every answer before it judges it."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.tries: dict[str, int] = {}

    def judge(self, task: Task, text: str) -> EvalResult:
        self.tries[text] = self.tries.get(text, 0) + 1
        if self.tries[text] <= self.failures:
            return conclude(task.id, "fake", Status.JUDGE_ERROR, details=["the worker could not start: boom"])
        return super().judge(task, text)


def test_the_env_judges_again_and_pays_only_the_real_verdict() -> None:
    env = KernelEnv(toy_suite(), verifier=FlakyJudge(failures=2), judge_retries=2)
    env.reset(options={"task_id": "level1/1_ReLU"})
    obs, reward, terminated, _, info = env.step("ok 2.0")
    assert info["status"] == "ok" and reward > 0 and terminated and obs["turn"] == 1
    assert env.unwrapped.verifier.tries["ok 2.0"] == 3


def test_a_judge_error_that_persists_raises_and_uses_no_turn() -> None:
    judge = FlakyJudge(failures=3)
    env = KernelEnv(toy_suite(), verifier=judge, judge_retries=2)
    env.reset(options={"task_id": "level1/1_ReLU"})
    with pytest.raises(JudgeError, match="boom") as raised:
        env.step("ok 2.0")
    assert raised.value.result.judge_error and "boom" not in raised.value.result.feedback
    assert judge.tries["ok 2.0"] == 3
    obs, reward, *_ = env.step("ok 2.0")  # the fourth try is judged; the episode was where it was
    assert obs["turn"] == 1 and reward > 0


def test_step_batch_keeps_a_judge_error_apart_when_asked() -> None:
    suite = toy_suite()
    envs = [KernelEnv(suite, verifier=FakeVerifier(), judge_retries=1) for _ in range(2)]
    for env in envs:
        env.reset(options={"task_id": "level1/1_ReLU"})
    stepped = step_batch(envs, ["judge_error", "incorrect"], envs[0].verifier, keep_judge_errors=True)
    assert [r.status.value for r, _ in stepped] == ["judge_error", "incorrect"]
    assert stepped[0][1] is None and stepped[1][1] is not None and envs[0].unwrapped._turn == 0
    with pytest.raises(JudgeError):
        step_batch(envs, ["judge_error", "incorrect"], envs[0].verifier)


class CountingAgent:
    """Answers ``ok`` and counts the requests it was asked."""

    name = "counting"

    def __init__(self) -> None:
        self.asked = 0

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        self.asked += len(requests)
        return ["ok 2.0" for _ in requests]


class BrokenJudge(FakeVerifier):
    """The fake verifier whose judge always fails on one task."""

    def judge(self, task: Task, text: str) -> EvalResult:
        if task.id == "level1/2_Sigmoid":
            return conclude(task.id, "fake", Status.JUDGE_ERROR, details=["the worker could not start"])
        return super().judge(task, text)


def test_bench_counts_judge_errors_apart_and_resume_judges_them_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelgym.bench import runner

    suite = toy_suite()
    monkeypatch.setattr(runner, "resolve_suite", lambda *_a, **_k: suite)  # the toy suite stands in for a named one
    config = BenchConfig(suite="toy", out_dir=str(tmp_path), plots=False, progress=False)
    agent = CountingAgent()
    first = run_bench(config, agent=agent, verifier=BrokenJudge())
    records = [json.loads(line) for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok", "judge_error", "ok"] and not records[1]["final"]
    assert first.metrics.best_turn.judge_errors == 1 and not first.complete and agent.asked == 3
    resumed = run_bench(BenchConfig(**{**vars(config), "resume": True}), agent=agent, verifier=FakeVerifier())
    assert agent.asked == 3  # the recorded answer was judged again; the agent was not asked for another
    assert resumed.complete and resumed.metrics.best_turn.judge_errors == 0 and resumed.metrics.best_turn.passed == 3
    statuses = [json.loads(line)["status"] for line in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    assert sorted(statuses) == ["ok", "ok", "ok"]
