"""KernelEnv and KernelVectorEnv with the real verifier on the bundled CPU suite.

Only the bundled level1/1_ReLU solution is ever built, through the shared build cache, so the
build happens once however many tests submit it; every other answer fails in the verifier's
static stages (format_error, illegal), which run in this process and cost milliseconds.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AsyncVectorEnv

import kernelgym  # noqa: F401  (registers the environments)
from kernelgym import Verifier
from kernelgym.envs import KernelEnv, KernelVectorEnv
from kernelgym.errors import BackendUnavailableError
from kernelgym.verifier import RewardSpec, VerifierConfig

FAST = VerifierConfig(warmup=1, runs=5)
TASK_ID = "level1/1_ReLU"

NO_MODELNEW = """Here is a faster ReLU:

```python
import torch.nn as nn

class FastReLU(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
```
"""

TORCH_FALLBACK = """```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
```
"""


@pytest.fixture(scope="module")
def relu_solution() -> str:
    return gym.make("kernelgym/CPU-v0").unwrapped.suite[TASK_ID].solution("cpp")


def test_check_env_with_the_real_verifier():
    # Random text from the action space fails extraction at once: no build, no worker.
    env = gym.make("kernelgym/CPU-v0", verifier_config=FAST)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.slow
def test_broken_broken_repaired_episode(relu_solution):
    env = gym.make("kernelgym/CPU-v0", max_turns=3, success_speedup=0.0, verifier_config=FAST)
    env.reset(seed=0, options={"task_id": TASK_ID})
    steps = [env.step(answer) for answer in (NO_MODELNEW, TORCH_FALLBACK, relu_solution)]
    env.close()

    assert [info["status"] for *_, info in steps] == ["format_error", "illegal", "ok"]
    assert [reward for _, reward, *_ in steps[:2]] == [0.0, 0.0]
    reward = steps[2][1]
    spec = RewardSpec()
    assert reward >= spec.compile_weight + spec.correct_weight
    assert reward == steps[2][4]["result"]["score"]
    assert [terminated for _, _, terminated, _, _ in steps] == [False, False, True]
    assert not any(truncated for *_, truncated, _ in steps)
    feedback_after_illegal = steps[1][0]["feedback"]
    assert feedback_after_illegal and steps[1][4]["result"]["violations"]
    assert steps[2][0]["metrics"][:4].tolist() == [1.0, 1.0, 1.0, 1.0]


def test_budget_of_two_truncates_with_the_real_verifier():
    env = gym.make("kernelgym/CPU-v0", max_turns=2, success_speedup=0.0, verifier_config=FAST)
    env.reset(seed=0, options={"task_id": TASK_ID})
    first = env.step(NO_MODELNEW)
    second = env.step(TORCH_FALLBACK)
    env.close()
    assert (first[2], first[3]) == (False, False)
    assert (second[2], second[3]) == (False, True)
    assert (first[1], second[1]) == (0.0, 0.0)


@pytest.mark.slow
def test_vector_env_statuses_match_single_envs(relu_solution):
    actions = ("not code at all", TORCH_FALLBACK, relu_solution, relu_solution)
    envs = gym.make_vec("kernelgym/CPU-v0", num_envs=4, success_speedup=0.0, verifier_config=FAST)
    assert isinstance(envs.unwrapped, KernelVectorEnv)
    envs.reset(seed=0, options={"task_id": TASK_ID})
    _, rewards, terminated, truncated, infos = envs.step(actions)
    envs.close()

    singles = []
    with Verifier(backend="cpp", config=FAST) as verifier:  # one worker pool for the four single envs
        for action in actions:
            env = KernelEnv("cpu", success_speedup=0.0, verifier=verifier)
            env.reset(seed=0, options={"task_id": TASK_ID})
            singles.append(env.step(action))

    assert infos["status"].tolist() == [info["status"] for *_, info in singles] == [
        "format_error", "illegal", "ok", "ok"]
    assert terminated.tolist() == [t for _, _, t, _, _ in singles] == [False, False, True, True]
    assert not truncated.any()
    assert rewards[:2].tolist() == [0.0, 0.0] and (rewards[2:] > 0).all()


def test_async_vector_env_with_the_real_verifier():
    def make() -> gym.Env:
        return gym.make("kernelgym/CPU-v0", verifier_config=FAST)

    envs = AsyncVectorEnv([make, make], shared_memory=False)
    try:
        obs, _ = envs.reset(seed=0, options={"task_id": TASK_ID})
        assert len(obs["prompt"]) == 2 and "ModelNew" in obs["prompt"][0]
        obs, rewards, *_, infos = envs.step((NO_MODELNEW, TORCH_FALLBACK))
    finally:
        envs.close()
    assert infos["status"].tolist() == ["format_error", "illegal"]
    assert np.array_equal(rewards, [0.0, 0.0])
    assert obs["turn"].tolist() == [1, 1]


def test_gpu_env_without_a_gpu_fails_at_the_first_step():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    # The cpu suite's tasks stand in for the gpu suite's: what is tested is the cuda backend's refusal.
    env = gym.make("kernelgym/GPU-v0", suite="cpu")
    env.reset(seed=0)
    with pytest.raises(BackendUnavailableError):
        env.step("not code")
    env.close()
