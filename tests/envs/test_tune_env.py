"""KernelTuneEnv, its templates, and the SB3 examples.

Fast tests use the templates' static checks and a small table-driven verifier. Slow tests use the
real ``cpp`` verifier on one task (level1/14_Small_Matmul, 9 configurations): the grid is built
once per session through the shared build cache, after which every step is a cache hit plus
correctness checks and timing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from kernelgym.envs.templates import KernelTemplate, TemplateParam, get_template, templates_for
from kernelgym.envs.tune_env import (
    MAX_DIMS,
    TUNE_ENV_IDS,
    KernelTuneEnv,
    MultiDiscreteToDiscrete,
    mean_step_reward,
    register_tune_envs,
    tune_reward,
)
from kernelgym.errors import BackendUnavailableError, KernelGymError, TaskError
from kernelgym.tasks import Task, load_suite
from kernelgym.verifier import EvalResult, Status, VerifierConfig
from kernelgym.verifier.extract import extract_program
from kernelgym.verifier.inspect import inspect_program

ROOT = Path(__file__).resolve().parents[2]
MATMUL = "level1/14_Small_Matmul"
# Enough timed calls that the median separates configurations several times apart on a busy 2-core machine.
TIMING = VerifierConfig(warmup=2, runs=10)


class TableVerifier:
    """Judges a rendered configuration by looking its text up in a table of results (a small real fake)."""

    def __init__(self, template: KernelTemplate, outcomes: dict[tuple[int, ...], tuple[Status, float | None]]) -> None:
        self.table = {template.render(c): outcome for c, outcome in outcomes.items()}
        self.calls = 0

    def evaluate(self, task: Task, text: str) -> EvalResult:
        self.calls += 1
        status, speedup = self.table[text]
        ok = status is Status.OK
        return EvalResult(task.id, "cpp", status, parsed=True, legal=True, compiled=ok or status is Status.INCORRECT,
                          correct=ok, speedup_eager=speedup if ok else None)

    def evaluate_many(self, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
        return [self.evaluate(task, text) for task, text in pairs]

    def close(self) -> None:
        pass


def table_env(**kwargs) -> tuple[KernelTuneEnv, TableVerifier]:
    template = get_template(MATMUL, "cpp")
    outcomes = {c: (Status.OK, 0.5 * (1 + c[1])) for c in template.grid()}
    outcomes[(0, 0)] = (Status.COMPILE_ERROR, None)
    outcomes[(2, 2)] = (Status.INCORRECT, None)
    verifier = TableVerifier(template, outcomes)
    return KernelTuneEnv(task_id=MATMUL, verifier=verifier, **kwargs), verifier


# --- templates -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_every_configuration_is_a_legal_program(backend):
    for template in templates_for(backend):
        for config in template.grid():
            code = extract_program(template.render(config))
            assert "class ModelNew" in code
            assert not inspect_program(code, backend), (template.task_id, template.config(config))


def test_templates_cover_bundled_tasks():
    cpp, triton = templates_for("cpp"), templates_for("triton")
    assert {t.task_id for t in cpp} == {
        "level1/14_Small_Matmul", "level1/7_Sum_Reduction_Over_Dim", "level1/10_Softmax", "level2/2_Scale_Tanh_Add",
    }
    assert len(triton) >= 3
    for template in cpp + triton:
        task = load_suite(template.suite)[template.task_id]
        assert all(re.search(rf"^{name} = \d+$", task.source, re.M) for name in template.dims)
        assert 2 <= template.size <= 32
        assert len({template.render(c) for c in template.grid()}) == template.size


def test_template_rejects_mismatched_placeholders_and_foreign_configurations():
    with pytest.raises(ValueError, match="placeholders"):
        KernelTemplate("t", "cpu", "cpp", "${A} ${B}", (TemplateParam("A", (1, 2)),))
    with pytest.raises(ValueError, match="one code text per value"):
        TemplateParam("A", (1, 2), ("x",))
    nested = (TemplateParam("A", ("p", "q"), ("${B}+1", "2")), TemplateParam("B", (7, 8)))
    template = KernelTemplate("t", "cpu", "cpp", "${A}", nested)
    assert template.render((0, 1)) == "8+1"
    with pytest.raises(KernelGymError, match="outside the grid"):
        template.render((2, 0))
    with pytest.raises(TaskError, match="no 'cpp' tuning template"):
        get_template("level1/1_ReLU", "cpp")


# --- env with a table verifier --------------------------------------------------------------------


def test_tune_reward_is_clipped_log_of_the_median_and_fails_on_any_failure():
    ok = [EvalResult("t", "cpp", Status.OK, correct=True, speedup_eager=s) for s in (100.0, 0.9, 1.2)]
    assert tune_reward(ok, clip=3.0, penalty=-4.0) == (pytest.approx(np.log(1.2)), 1.2)
    assert tune_reward(ok[:1], clip=3.0, penalty=-4.0) == (3.0, 100.0)
    wrong = EvalResult("t", "cpp", Status.INCORRECT, compiled=True)
    assert tune_reward([*ok, wrong], clip=3.0, penalty=-4.0) == (-4.0, None)
    untimed = EvalResult("t", "triton", Status.OK, correct=True)
    assert tune_reward([untimed], clip=3.0, penalty=-4.0) == (0.0, None)


def test_spaces_observations_rewards_and_truncation():
    env, verifier = table_env(max_steps=3, repeats=3)
    assert env.action_space == gym.spaces.MultiDiscrete([3, 3])
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.array([1, 2]))
    obs, info = env.reset(seed=1)
    assert env.observation_space.contains(obs) and info == {"task_id": MATMUL, "step": 0}
    assert obs["dims"][:3] == pytest.approx([np.log2(129)] * 3) and obs["dims"][3:].tolist() == [0.0] * (MAX_DIMS - 3)

    obs, reward, terminated, truncated, info = env.step(np.array([1, 2]))
    assert reward == pytest.approx(np.log(1.5)) and info["speedup"] == pytest.approx(1.5)
    assert info["config"] == {"ORDER": "ikj", "TILE": 128} and verifier.calls == 3
    assert obs["config"].tolist() == [0.5, 1.0] and obs["status"].tolist() == [1.0, 1.0]
    assert (terminated, truncated) == (False, False)

    obs, reward, _, _, info = env.step(np.array([0, 0]))
    assert reward == env.failure_penalty == -4.0 and info["status"] == "compile_error"
    assert obs["status"].tolist() == [0.0, 0.0] and obs["log_speedup"].tolist() == [0.0]
    assert info["best_config"] == {"ORDER": "ikj", "TILE": 128}

    obs, reward, terminated, truncated, info = env.step(np.array([2, 2]))
    assert reward == -4.0 and info["status"] == "incorrect" and obs["status"].tolist() == [1.0, 0.0]
    assert (terminated, truncated) == (False, True) and obs["step"].tolist() == [1.0]
    assert env.observation_space.contains(obs)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.array([1, 1]))
    env.reset()
    with pytest.raises(KernelGymError, match="outside the grid"):
        env.step(np.array([3, 0]))


def test_gymnasium_and_sb3_check_env_on_the_table_env():
    env, _ = table_env(max_steps=4)
    check_env(env, skip_render_check=True)  # render modes are checked in test_prebuild_judges_the_whole_grid_and_render_reports
    sb3_env_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_env_checker.check_env(env, warn=True)


def test_prebuild_judges_the_whole_grid_and_render_reports():
    env, verifier = table_env(render_mode="ansi")
    results = env.prebuild()
    assert len(results) == verifier.calls == 9
    assert [r.status for r in results].count(Status.OK) == 7
    env.reset()
    env.step(np.array([1, 1]))
    assert "speedup 1.000x" in env.render() and "best so far" in env.render()


def test_multidiscrete_to_discrete_numbers_the_grid_in_order():
    env, _ = table_env()
    flat = MultiDiscreteToDiscrete(env)
    assert flat.action_space == gym.spaces.Discrete(9)
    assert [tuple(flat.action(a)) for a in range(9)] == list(env.template.grid())
    flat.reset(seed=0)
    assert flat.step(5)[4]["config"] == {"ORDER": "ikj", "TILE": 128}
    with pytest.raises(TypeError):
        MultiDiscreteToDiscrete(gym.make("CartPole-v1"))


def test_registration_and_gpu_env_without_a_gpu():
    register_tune_envs()
    assert all(env_id in gym.registry and gym.spec(env_id).nondeterministic for env_id in TUNE_ENV_IDS)
    env = gym.make("kernelgym/Tune-GPU-v0", max_steps=2)
    assert env.unwrapped.task.id == templates_for("triton")[0].task_id
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(BackendUnavailableError, match="cannot time kernels"):
            env.step(env.action_space.sample())
    env.close()


# --- the real env (cpp verifier, matmul grid) -------------------------------------------------------


@pytest.fixture(scope="module")
def tune_verifier(cache_dir):
    from kernelgym import Verifier

    verifier = Verifier(backend="cpp", num_workers=2, cache_dir=cache_dir, config=TIMING)
    yield verifier
    verifier.close()


@pytest.fixture(scope="module")
def matmul_grid(tune_verifier):
    """Every matmul configuration, judged once (this is where the 9 builds happen, in parallel)."""
    env = KernelTuneEnv(task_id=MATMUL, verifier=tune_verifier)
    return env.prebuild()


@pytest.mark.slow
@pytest.mark.extended  # the grid is 9 builds; the env's API is checked on the table env in the default run
def test_every_matmul_configuration_is_correct_and_timed(matmul_grid):
    assert all(r.ok and r.speedup is not None for r in matmul_grid), [r.feedback for r in matmul_grid if not r.ok]


@pytest.mark.slow
@pytest.mark.extended
def test_gymnasium_and_sb3_check_env(cache_dir, matmul_grid):
    register_tune_envs()
    # The env builds its own verifier: check_env remakes the env from its spec, which deep-copies the kwargs.
    env = gym.make("kernelgym/Tune-CPU-v0", task_id=MATMUL, max_steps=4, verifier_config=TIMING, num_workers=1,
                   cache_dir=str(cache_dir))
    check_env(env.unwrapped)
    sb3_env_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_env_checker.check_env(env.unwrapped, warn=True)
    env.reset(seed=0)
    obs, reward, _, _, info = env.step(env.action_space.sample())
    assert info["cache_hit"] and info["status"] == "ok"
    assert -env.unwrapped.reward_clip <= reward <= env.unwrapped.reward_clip
    env.close()


def run_example(name: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                          capture_output=True, text=True, timeout=900, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.extended
@pytest.mark.slow
def test_ppo_beats_a_uniform_random_policy(matmul_grid, tmp_path):
    """On the real env: PPO after 256 steps has a higher greedy mean reward than uniform random, on the same seeds."""
    pytest.importorskip("stable_baselines3")
    out = run_example("sb3_ppo_tune.py", "--total-timesteps", "256", "--eval-episodes", "3", "--out-dir", str(tmp_path))
    found = re.search(r"ppo_mean_reward=(-?[\d.]+) random_mean_reward=(-?[\d.]+)", out)
    assert found, out
    ppo, random = map(float, found.groups())
    assert ppo > random, out
    assert (tmp_path / "tune-ppo-learning-curve.png").stat().st_size > 0
    assert "| uniform random" in (tmp_path / "tune-ppo-learning-curve.md").read_text()


@pytest.mark.extended
@pytest.mark.slow
def test_dqn_example_runs(matmul_grid):
    pytest.importorskip("stable_baselines3")
    out = run_example("sb3_dqn_tune.py", "--total-timesteps", "40", "--learning-starts", "16", "--eval-episodes", "1")
    assert "prebuilt 9 configurations" in out and "(0 failed)" in out
    assert re.search(r"greedy configuration: #\d = \{'ORDER': '\w+', 'TILE': \d+\}", out), out


@pytest.mark.gpu
def test_gpu_env_check_env_and_triton_grids():
    register_tune_envs()
    env = gym.make("kernelgym/Tune-GPU-v0", task_id="level1/1_ReLU", max_steps=4, verifier_config=TIMING)
    results = env.unwrapped.prebuild()
    assert all(r.ok and r.speedup is not None for r in results), [r.feedback for r in results if not r.ok]
    check_env(env.unwrapped)
    sb3_env_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    sb3_env_checker.check_env(env.unwrapped, warn=True)
    env.close()


def test_mean_step_reward_on_the_table_env():
    env, _ = table_env(max_steps=2)
    assert mean_step_reward(env, lambda _obs: np.array([1, 2]), episodes=2, seed=0) == pytest.approx(np.log(1.5))
