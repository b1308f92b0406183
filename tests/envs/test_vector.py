"""KernelVectorEnv with a scripted verifier: same results as single envs, one batch per step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from kernelgym.envs import KernelEnv, KernelVectorEnv, register_envs

from .fakes import FakeVerifier, toy_suite

# Per step, one answer per sub-environment: episodes end (ok / budget) at different steps, so
# next-step autoresets happen in some sub-environments while others are mid-episode.
SCRIPT = [
    ("ok 2.0", "illegal", "compile_error", "format_error"),
    ("anything", "incorrect", "ok 1.2", "runtime_error"),
    ("incorrect", "ok 0.5", "anything", "timeout"),
    ("ok 3.0", "incorrect", "illegal", "anything"),
    ("illegal", "ok 1.0", "ok 4.0", "incorrect"),
]


def run_script(envs, seed: int = 7) -> list:
    transcript = [envs.reset(seed=seed)]
    transcript += [envs.step(actions) for actions in SCRIPT]
    return transcript


def single_envs(verifier: FakeVerifier, max_turns: int = 3) -> SyncVectorEnv:
    # Gymnasium's own vectoriser over four independent KernelEnvs: the reference semantics.
    def make() -> KernelEnv:
        return KernelEnv(toy_suite(), max_turns=max_turns, success_speedup=1.0, verifier=verifier)

    return SyncVectorEnv([make] * 4, autoreset_mode=AutoresetMode.NEXT_STEP)


def test_make_vec_returns_the_batched_env():
    register_envs()
    envs = gym.make_vec("kernelgym/CPU-v0", num_envs=4, suite=toy_suite(), verifier=FakeVerifier())
    assert isinstance(envs.unwrapped, KernelVectorEnv)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert envs.num_envs == 4
    assert envs.single_observation_space == KernelEnv(toy_suite(), verifier=FakeVerifier()).observation_space
    envs.close()


def test_four_env_vector_equals_four_single_envs():
    batched_verifier, single_verifier = FakeVerifier(), FakeVerifier()
    batched = KernelVectorEnv(4, suite=toy_suite(), max_turns=3, success_speedup=1.0, verifier=batched_verifier)
    expected = run_script(single_envs(single_verifier))
    got = run_script(batched)

    assert len(got) == len(expected)
    for step, (got_step, expected_step) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_equal(got_step, expected_step, err_msg=f"step {step} differs")  # NaN == NaN here
        assert got_step[0] in batched.observation_space

    # Each step sends the answers of the sub-environments not being autoreset as one batch.
    _, _, terminated, truncated, _ = zip(*expected[1:], strict=True)
    resetting = [np.zeros(4, dtype=bool)] + [t | u for t, u in zip(terminated, truncated, strict=True)][:-1]
    assert batched_verifier.calls == [("evaluate_many", int((~mask).sum())) for mask in resetting]
    assert any(mask.any() for mask in resetting)  # the script does exercise autoreset
    assert all(name == "evaluate" for name, _ in single_verifier.calls)
    batched.close()
    assert not batched_verifier.closed


def test_batched_observations_are_tuples_of_strings_and_arrays():
    envs = KernelVectorEnv(4, suite=toy_suite(), verifier=FakeVerifier())
    obs, infos = envs.reset(seed=0)
    assert isinstance(obs["prompt"], tuple) and len(obs["prompt"]) == 4
    assert isinstance(obs["feedback"], tuple) and obs["feedback"] == ("",) * 4
    assert obs["turn"].shape == (4,) and obs["metrics"].shape == (4, 6)
    obs2, *_ = envs.step(("ok",) * 4)
    assert not np.shares_memory(obs["metrics"], obs2["metrics"])
    assert list(infos["task_id"]) == [env.task.id for env in envs.envs]


def test_reset_with_task_ids_and_mask():
    envs = KernelVectorEnv(3, suite=toy_suite(), verifier=FakeVerifier())
    ids = ["level1/3_Tanh", "level1/1_ReLU", "level1/2_Sigmoid"]
    _, infos = envs.reset(seed=0, options={"task_ids": ids})
    assert list(infos["task_id"]) == ids
    envs.step(("incorrect",) * 3)
    obs, infos = envs.reset(options={"reset_mask": np.array([False, True, False]), "task_id": "level1/1_ReLU"})
    assert obs["turn"].tolist() == [1, 0, 1]
    assert infos["_task_id"].tolist() == [False, True, False]
    with pytest.raises(ValueError):
        envs.reset(options={"task_ids": ids[:2]})
    with pytest.raises(ValueError):
        envs.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
    with pytest.raises(ValueError):
        envs.step(("ok",) * 2)


def test_attribute_access_and_render():
    envs = KernelVectorEnv(2, suite=toy_suite(), verifier=FakeVerifier(), render_mode="ansi", max_turns=5)
    envs.reset(seed=3)
    assert envs.get_attr("max_turns") == (5, 5)
    envs.set_attr("success_speedup", [0.0, 2.0])
    _, _, terminated, *_ = envs.step(("ok 1.0", "ok 1.0"))
    assert terminated.tolist() == [True, False]
    assert all("status ok" in text for text in envs.render())
    assert len(envs.np_random_seed) == 2


def test_async_vector_env_without_shared_memory():
    register_envs()

    def make() -> gym.Env:
        return gym.make("kernelgym/CPU-v0", suite=toy_suite(), verifier=FakeVerifier(), max_turns=3)

    async_envs = AsyncVectorEnv([make] * 4, shared_memory=False)
    try:
        got = run_script(async_envs)
    finally:
        async_envs.close()
    expected = run_script(single_envs(FakeVerifier()))
    for got_step, expected_step in zip(got, expected, strict=True):
        np.testing.assert_equal(got_step, expected_step)
