"""The ``kernelgym`` agent loop, run through verl's real AgentLoopWorker on a CPU.

A tiny random Qwen2 answers (garbage, or a scripted answer), the real ``cpp``
verifier judges, and verl pads, masks and scores the trajectories as in training.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402

import kernelgym.training.verl_plugin  # noqa: E402,F401  (registers the agent loop)
from kernelgym.training.advantage import turn_index  # noqa: E402
from kernelgym.training.agent_loop import OUTCOME_FIELD, TURN_REWARDS_FIELD, TrajectoryOutcome  # noqa: E402
from kernelgym.training.reward import set_shared_verifier  # noqa: E402
from kernelgym.wrappers.prime_echo import prime_echo_rewards  # noqa: E402

from .tiny_lm import LocalGenerateClient, build_tiny_lm, compose_verl_config  # noqa: E402

TASK = "level1/1_ReLU"
ALPHA, GAMMA = 0.5, 0.9


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(autouse=True)
def session_verifier(cpu_verifier):
    set_shared_verifier("cpp", cpu_verifier)
    yield cpu_verifier
    set_shared_verifier("cpp", None)


def make_worker(model_dir, tmp_path, client, *, max_turns, response_length=2048, success_speedup=0.0):
    loops = tmp_path / "agent_loop.yaml"
    loops.write_text(
        "- name: kernelgym\n"
        "  _target_: kernelgym.training.agent_loop.KernelGymAgentLoop\n"
        f"  max_turns: {max_turns}\n  alpha: {ALPHA}\n  gamma: {GAMMA}\n  success_speedup: {success_speedup}\n"
        "  max_feedback_chars: 600\n"
    )
    config = compose_verl_config(
        [
            f"actor_rollout_ref.model.path={model_dir}",
            "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.prompt_length=256",
            f"actor_rollout_ref.rollout.response_length={response_length}",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "actor_rollout_ref.rollout.agent.default_agent_loop=kernelgym",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        ]
    )
    return AgentLoopWorker(config, client)


def batch_of(n: int) -> DataProto:
    messages = [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "Write ModelNew for ReLU."},
    ]
    raw = np.empty(n, dtype=object)
    raw[:] = [messages] * n
    info = np.empty(n, dtype=object)
    info[:] = [{"task_id": TASK, "suite": "cpu", "backend": "cpp", "split": "train", "index": i} for i in range(n)]
    return DataProto.from_dict(
        tensors={"dummy_tensor": torch.zeros(n, 1, dtype=torch.uint8)},
        non_tensors={"raw_prompt": raw, "extra_info": info, "index": np.arange(n)},
    )


def spans(mask: list[int]) -> list[tuple[int, int]]:
    """(value, length) runs of a 0/1 mask, trailing padding dropped."""
    runs: list[tuple[int, int]] = []
    for value in mask:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs[:-1] if runs and runs[-1][0] == 0 else runs


def test_feedback_turns_are_masked_and_scores_are_prime_echo(model_dir, tmp_path):
    client = LocalGenerateClient(model_dir)
    worker = make_worker(model_dir, tmp_path, client, max_turns=2)
    out = asyncio.run(worker.generate_sequences(batch_of(2)))

    tokenizer = client.tokenizer
    for i in range(2):
        mask = out.batch["response_mask"][i].tolist()
        assert [value for value, _ in spans(mask)] == [1, 0, 1]  # answer, feedback (not trained on), repair
        feedback_start = spans(mask)[0][1]
        feedback_ids = out.batch["responses"][i, feedback_start : feedback_start + spans(mask)[1][1]].tolist()
        assert "<|im_start|>user" in tokenizer.decode(feedback_ids)
        outcome = TrajectoryOutcome.from_dict(out.non_tensor_batch[OUTCOME_FIELD][i])
        assert outcome.failure is not None and outcome.failure.result.status.value == "format_error"
        assert list(out.non_tensor_batch["turn_scores"][i]) == list(outcome.scores) == [0.0, 0.0]
        assert float(out.batch["rm_scores"][i].sum()) == prime_echo_rewards([0.0, 0.0], ALPHA, GAMMA).trajectory_reward
        # one step reward per turn, and as many turns in the mask, for turn-level advantages (TRLOO)
        assert list(out.non_tensor_batch[TURN_REWARDS_FIELD][i]) == [0.0, 0.0]
        assert int(turn_index(out.batch["response_mask"][i : i + 1]).max()) + 1 == 2
        assert out.non_tensor_batch["__num_turns__"][i] == 4
        logprobs = out.batch["rollout_log_probs"][i]
        assert torch.all(logprobs[torch.tensor(mask) == 0] == 0) and torch.all(logprobs[torch.tensor(mask) == 1] < 0)
    # every turn may generate what is left of the response length
    for request_id in {r["request_id"] for r in client.requests}:
        first, second = [r for r in client.requests if r["request_id"] == request_id]
        used = len(second["prompt_ids"]) - len(first["prompt_ids"])
        assert first["max_tokens"] == 2048 and second["max_tokens"] == 2048 - used


@pytest.mark.slow
def test_repair_turn_that_solves_is_paid_with_prime_echo(model_dir, tmp_path, cpu_suite):
    solution = cpu_suite[TASK].solution("cpp")
    client = LocalGenerateClient(model_dir, scripted=[None, solution])
    worker = make_worker(model_dir, tmp_path, client, max_turns=3, response_length=4096)
    out = asyncio.run(worker.generate_sequences(batch_of(1)))

    outcome = TrajectoryOutcome.from_dict(out.non_tensor_batch[OUTCOME_FIELD][0])
    assert outcome.solved and len(outcome.scores) == 2  # the correct repair ends the episode
    assert outcome.scores[0] == 0.0 and outcome.scores[1] > 0.5
    expected = prime_echo_rewards(outcome.scores, ALPHA, GAMMA)
    assert float(out.batch["rm_scores"][0].sum()) == pytest.approx(expected.trajectory_reward)
    assert list(out.non_tensor_batch[TURN_REWARDS_FIELD][0]) == pytest.approx(expected.step_rewards)
    assert sum(out.non_tensor_batch[TURN_REWARDS_FIELD][0]) == pytest.approx(expected.trajectory_reward)
    assert out.non_tensor_batch["solved"][0] == 1.0 and out.non_tensor_batch["best_score"][0] == outcome.scores[1]


def test_outputs_are_cut_to_the_response_length(model_dir, tmp_path):
    client = LocalGenerateClient(model_dir, max_new_tokens=48)
    worker = make_worker(model_dir, tmp_path, client, max_turns=3, response_length=64)
    out = asyncio.run(worker.generate_sequences(batch_of(1)))

    assert out.batch["responses"].shape[1] == 64
    mask = out.batch["response_mask"][0].tolist()
    # the feedback of the first attempt does not fit in 64 tokens, so the episode stops after one attempt
    assert spans(mask) == [(1, sum(mask))]
    assert len(out.non_tensor_batch["turn_scores"][0]) == 1
