"""All four wrappers stacked on the real KernelEnv (bundled CPU suite), judged by a scripted verifier."""

from __future__ import annotations

import json

from kernelgym.envs import KernelEnv
from kernelgym.wrappers import (
    BufferedDynamicRetry,
    ChatObservation,
    PrimeEcho,
    RecordEpisodes,
    prime_echo_rewards,
)
from kernelgym.wrappers.retry import PREVIOUS_ATTEMPT_HEADER

from .fakes import FakeVerifier, play


def policy(obs, turn) -> str:
    if PREVIOUS_ATTEMPT_HEADER in obs["prompt"]:
        return "ok repaired"
    return f"incorrect \u2018typographic\u2019 attempt {turn}"


def test_stacked_wrappers_on_kernel_env(tmp_path):
    path = tmp_path / "episodes.jsonl"
    env = KernelEnv(suite="cpu", verifier=FakeVerifier(), max_turns=2)
    env = BufferedDynamicRetry(env, group_size=2, mix_ratio=1.0)
    env = RecordEpisodes(ChatObservation(PrimeEcho(env, alpha=0.5, gamma=0.9)), path)

    episodes = [play(env, policy, seed=0 if i == 0 else None) for i in range(4)]
    env.close()

    fresh, repair = episodes[:2], episodes[2:]
    assert len({e[1]["task_id"] for e in episodes}) == 1
    assert not any(e[1]["retry"]["repair"] for e in fresh) and all(e[1]["retry"]["repair"] for e in repair)
    for first_obs, first_info, steps in episodes:
        assert env.observation_space.contains(first_obs)
        assert all(env.observation_space.contains(s.obs) for s in steps)
        assert first_info["messages"][1]["content"] == first_obs["prompt"]
        scores = [s.info["score"] for s in steps]
        assert [s.reward for s in steps] == list(prime_echo_rewards(scores, 0.5, 0.9).step_rewards)
    repair_prompt = repair[0][0]["prompt"]
    assert "incorrect 'typographic' attempt" in repair_prompt
    assert fresh[0][0]["prompt"] in repair_prompt
    assert repair[-1][2][-1].info["retry"]["recovered"] == 1

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == sum(len(steps) for _, _, steps in episodes)
    assert [line["result"]["status"] for line in lines[-2:]] == ["ok", "ok"]
