"""One conversation format: a training rollout starts from the messages the benchmark sends for the same task."""

from __future__ import annotations

from collections.abc import Sequence

from kernelgym.agents.base import AgentRequest, BaseAgent, chat_messages
from kernelgym.bench import BenchConfig, run_bench
from kernelgym.envs import KernelEnv
from kernelgym.training.launcher import task_rows
from kernelgym.wrappers.chat import ChatObservation

from ..envs.fakes import FakeVerifier

TASK = "level1/1_ReLU"


class RecordingAgent(BaseAgent):
    """Answers without code, and keeps the chat messages a chat agent would send for each request."""

    name = "recording"

    def __init__(self) -> None:
        self.sent: list[list[dict[str, str]]] = []

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        self.sent.extend(chat_messages(r) for r in requests)
        return [f"no code, turn {r.turn}" for r in requests]


def _bench_messages(tmp_path) -> list[list[dict[str, str]]]:
    agent = RecordingAgent()
    config = BenchConfig(suite="cpu", task_ids=(TASK,), turns=2, out_dir=str(tmp_path), plots=False, progress=False)
    run_bench(config, agent=agent, verifier=FakeVerifier())
    return agent.sent


def test_training_rows_start_with_the_benchmarks_first_messages(tmp_path) -> None:
    first_turn = _bench_messages(tmp_path)[0]
    row = next(r for r in task_rows("cpu", "cpp", "train") if r["extra_info"]["task_id"] == TASK)
    assert row["prompt"] == first_turn


def test_the_chat_wrapper_shows_the_benchmarks_repair_turn(tmp_path) -> None:
    second_turn = _bench_messages(tmp_path)[1]
    env = ChatObservation(KernelEnv("cpu", backend="cpp", max_turns=2, verifier=FakeVerifier()))
    env.reset(options={"task_id": TASK})
    _, _, _, _, info = env.step("no code, turn 1")
    assert info["messages"] == second_turn
    env.close()
