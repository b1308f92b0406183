"""Wall time of one batched 4-env step against 4 single-env steps, with the real verifier.

Both sides judge the bundled C++ solutions of the same four CPU tasks with the
same verifier settings and the verifier's default worker count; the only difference is that
``KernelVectorEnv`` hands the four answers to ``Verifier.evaluate_many`` as one
batch (the workers build, check and time them in parallel) while the single
envs submit them one after another.

Measured with a warm build cache and warm workers: a module fixture runs one
round of each side first, so the rounds time checking and timing, not
compiling (a cold C++ build takes 10-30 s on 2 cores and would swamp the
difference in stepping; a fresh cache per round is too slow to repeat).

    pytest benchmarks/test_vector_env.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import kernelgym  # noqa: F401  (registers the environments)
from kernelgym import Verifier
from kernelgym.envs import KernelEnv, KernelVectorEnv
from kernelgym.verifier import VerifierConfig

TASK_IDS = ("level1/1_ReLU", "level1/2_Sigmoid", "level1/3_Tanh", "level1/5_Add")
CONFIG = VerifierConfig()


@pytest.fixture(scope="module")
def solutions() -> tuple[str, ...]:
    suite = gym.make("kernelgym/CPU-v0").unwrapped.suite
    return tuple(suite[task_id].solution("cpp") for task_id in TASK_IDS)


@pytest.fixture(scope="module")
def batched(solutions):
    envs = gym.make_vec("kernelgym/CPU-v0", num_envs=len(TASK_IDS), success_speedup=0.0, verifier_config=CONFIG)
    assert isinstance(envs.unwrapped, KernelVectorEnv)
    batched_round(envs, solutions)  # builds (once per cache) and starts the workers
    yield envs
    envs.close()


@pytest.fixture(scope="module")
def sequential(solutions):
    verifier = Verifier(backend="cpp", config=CONFIG)
    envs = [KernelEnv("cpu", success_speedup=0.0, verifier=verifier) for _ in TASK_IDS]
    sequential_round(envs, solutions)
    yield envs
    verifier.close()


def batched_round(envs, solutions) -> list[str]:
    envs.reset(options={"task_ids": TASK_IDS})
    infos = envs.step(solutions)[-1]
    return infos["status"].tolist()


def sequential_round(envs, solutions) -> list[str]:
    statuses = []
    for env, task_id, solution in zip(envs, TASK_IDS, solutions, strict=True):
        env.reset(options={"task_id": task_id})
        statuses.append(env.step(solution)[-1]["status"])
    return statuses


@pytest.mark.benchmark(group="kernel-env-step-4-tasks")
def test_batched_vector_step(benchmark, batched, solutions):
    statuses = benchmark.pedantic(batched_round, args=(batched, solutions), rounds=3, iterations=1)
    assert statuses == ["ok"] * len(TASK_IDS)


@pytest.mark.benchmark(group="kernel-env-step-4-tasks")
def test_sequential_single_steps(benchmark, sequential, solutions):
    statuses = benchmark.pedantic(sequential_round, args=(sequential, solutions), rounds=3, iterations=1)
    assert statuses == ["ok"] * len(TASK_IDS)
