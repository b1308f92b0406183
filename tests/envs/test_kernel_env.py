"""KernelEnv with a scripted verifier: API conformance, episode logic, observations."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from kernelgym.envs import KernelEnv, register_envs
from kernelgym.envs.kernel_env import METRIC_NAMES, SPEEDUP_CLIP, LazyVerifier, resolve_suite, step_batch
from kernelgym.envs.prompt import CODE_CHARSET
from kernelgym.errors import TaskError
from kernelgym.verifier.result import Status
from kernelgym.verifier.reward import RewardSpec

from .fakes import FakeVerifier, toy_suite


def make_env(**kwargs) -> KernelEnv:
    kwargs.setdefault("verifier", FakeVerifier())
    return KernelEnv(toy_suite(), **kwargs)


@pytest.mark.filterwarnings("ignore:.*Not able to test alternative render modes")
def test_check_env_passes_with_fake_verifier():
    # No spec: check_env also checks that seeded reset + the same action give the same step.
    env = make_env(render_mode="ansi")
    check_env(env)
    env.close()


def test_check_env_passes_on_registered_env_with_fake_verifier():
    register_envs()
    env = gym.make("kernelgym/CPU-v0", suite=toy_suite(), verifier=FakeVerifier())
    check_env(env.unwrapped)
    env.close()


def test_three_turn_episode_broken_broken_repaired():
    spec = RewardSpec()
    env = make_env(max_turns=3, success_speedup=1.5)
    obs, info = env.reset(seed=0, options={"task_id": "level1/1_ReLU"})
    assert (obs["turn"], info["turn"], info["status"], info["score"]) == (0, 0, "", 0.0)
    assert "result" not in info

    answers = ["illegal forward calls torch.relu", "incorrect off by one", "ok 2.0"]
    steps = [env.step(a) for a in answers]

    expected = [
        spec.score(Status.ILLEGAL, compiled=False, correct=False, speedup=None, timing_meaningful=True),
        spec.score(Status.INCORRECT, compiled=True, correct=False, speedup=None, timing_meaningful=True),
        spec.score(Status.OK, compiled=True, correct=True, speedup=2.0, timing_meaningful=True),
    ]
    assert [reward for _, reward, *_ in steps] == expected
    assert expected[0] < expected[1] < expected[2]
    assert [terminated for _, _, terminated, _, _ in steps] == [False, False, True]
    assert [truncated for *_, truncated, _ in steps] == [False, False, False]
    assert [info["status"] for *_, info in steps] == ["illegal", "incorrect", "ok"]
    assert [obs["turn"] for obs, *_ in steps] == [1, 2, 3]
    for (_, reward, _, _, info), answer in zip(steps, answers, strict=True):
        assert info["score"] == reward == info["result"]["score"]
        assert info["result"]["task_id"] == info["task_id"] == "level1/1_ReLU"
        assert answer in info["result"]["feedback"]
    with pytest.raises(gym.error.ResetNeeded):
        env.step("ok")


def test_budget_of_two_truncates():
    env = make_env(max_turns=2)
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step("compile_error missing semicolon")
    assert (terminated, truncated) == (False, False)
    _, _, terminated, truncated, info = env.step("incorrect still wrong")
    assert (terminated, truncated) == (False, True)
    assert info["turn"] == 2
    with pytest.raises(gym.error.ResetNeeded):
        env.step("ok")
    obs, info = env.reset()
    assert obs["turn"] == 0 and "result" not in info


@pytest.mark.parametrize(("success_speedup", "terminated"), [(0.0, True), (0.9, True), (1.0, False)])
def test_success_needs_the_target_speedup(success_speedup, terminated):
    env = make_env(success_speedup=success_speedup)
    env.reset(seed=0)
    assert env.step("ok 0.9")[2] is terminated


def test_metrics_follow_the_result():
    env = make_env()
    obs, _ = env.reset(seed=0)
    assert obs["metrics"].dtype == np.float32 and not obs["metrics"].any()
    obs, reward, *_ = env.step(f"ok {SPEEDUP_CLIP * 10}")
    metrics = dict(zip(METRIC_NAMES, obs["metrics"].tolist(), strict=True))
    assert metrics == {
        "parsed": 1.0, "legal": 1.0, "compiled": 1.0, "correct": 1.0, "speedup": SPEEDUP_CLIP,
        "score": pytest.approx(reward),
    }
    assert obs in env.observation_space


def test_feedback_is_sanitised_and_truncated():
    env = make_env(max_feedback_chars=200)
    env.reset(seed=0)
    answer = "incorrect \u00e9\u2018x\u2019\r\n" + "y" * 1000 + "TAIL"
    obs, _, _, _, info = env.step(answer)
    feedback = obs["feedback"]
    assert len(feedback) == 200
    assert set(feedback) <= set(CODE_CHARSET)
    assert feedback.startswith("[incorrect] on level1/")
    assert "?'x'\n" in feedback
    assert feedback.endswith("TAIL")
    assert "characters omitted" in feedback
    assert info["result"]["feedback"].endswith("TAIL") and len(info["result"]["feedback"]) > 1000
    assert obs in env.observation_space


def test_any_str_is_an_action_and_non_str_is_not():
    env = make_env()
    env.reset(seed=0)
    obs, *_ = env.step("\x00\u4f60\u597d not in the charset")
    assert obs in env.observation_space
    with pytest.raises(TypeError):
        env.step(b"bytes")


def test_task_choice_uses_np_random_and_options():
    env = make_env()
    drawn = [env.reset(seed=seed)[1]["task_id"] for seed in range(12)]
    assert drawn == [env.reset(seed=seed)[1]["task_id"] for seed in range(12)]
    assert set(drawn) == set(toy_suite().ids())
    obs, info = env.reset(options={"task_id": "level1/3_Tanh"})
    assert info["task_id"] == "level1/3_Tanh"
    assert "torch.tanh(x)" in obs["prompt"] and "ModelNew" in obs["prompt"]
    with pytest.raises(TaskError):
        env.reset(options={"task_id": "level9/nope"})


def test_level_filter_and_empty_suite():
    assert len(make_env(level=1).suite) == 3
    with pytest.raises(TaskError):
        make_env(level=2)


def test_render_ansi():
    env = make_env(render_mode="ansi")
    env.reset(seed=0, options={"task_id": "level1/2_Sigmoid"})
    assert "level1/2_Sigmoid" in env.render() and "no attempt yet" in env.render()
    env.step("ok 1.5")
    text = env.render()
    assert "status ok" in text and "1.50x" in text and "turn 1/4" in text
    with pytest.warns(UserWarning, match="render_mode='ansi'"):
        assert make_env().render() is None


def test_step_before_reset_and_bad_arguments():
    with pytest.raises(gym.error.ResetNeeded):
        make_env().step("ok")
    with pytest.raises(ValueError):
        make_env(max_turns=0)
    with pytest.raises(ValueError):
        make_env(render_mode="human")


def test_close_leaves_an_injected_verifier_open():
    verifier = FakeVerifier()
    env = make_env(verifier=verifier)
    env.reset(seed=0)
    env.step("ok")
    env.close()
    env.close()
    assert not verifier.closed
    assert verifier.calls == [("evaluate", 1)]


def test_registered_ids_are_nondeterministic_with_vector_entry_points():
    register_envs()
    register_envs()  # idempotent
    for env_id in ("kernelgym/CPU-v0", "kernelgym/GPU-v0", "kernelgym/KernelBench-v0"):
        spec = gym.spec(env_id)
        assert spec.nondeterministic is True
        assert spec.vector_entry_point is not None
    assert gym.spec("kernelgym/CPU-v0").kwargs == {"suite": "cpu", "backend": "cpp", "executor": "local"}
    assert gym.spec("kernelgym/GPU-v0").kwargs["backend"] == "cuda"


def test_kernelbench_env_needs_a_path():
    register_envs()
    with pytest.raises(TaskError, match="path="):
        gym.make("kernelgym/KernelBench-v0")
    with pytest.raises(TaskError, match="path="):
        gym.make_vec("kernelgym/KernelBench-v0", num_envs=2)


def test_kernelbench_env_reads_a_kernelbench_directory(tmp_path):
    register_envs()
    for level, name in ((1, "1_ReLU.py"), (1, "2_Sigmoid.py"), (2, "1_Linear_ReLU.py")):
        (tmp_path / f"level{level}").mkdir(exist_ok=True)
        task = toy_suite()["level1/1_ReLU"]
        (tmp_path / f"level{level}" / name).write_text(task.source)
    env = gym.make("kernelgym/KernelBench-v0", path=str(tmp_path), level=1, backend="cpp", verifier=FakeVerifier())
    assert sorted(env.unwrapped.suite.ids()) == ["level1/1_ReLU", "level1/2_Sigmoid"]
    _, info = env.reset(seed=0, options={"task_id": "level1/2_Sigmoid"})
    assert info["task_id"] == "level1/2_Sigmoid"
    env.close()


def test_lazy_verifier_builds_nothing_until_asked_and_closes_only_what_it_built() -> None:
    given = FakeVerifier()
    handle = LazyVerifier(given, backend="cpp")
    assert handle.built and handle.get() is given
    handle.close()
    assert not given.closed
    own = LazyVerifier(None, backend="cpp")
    assert not own.built
    own.close()


def test_step_batch_judges_every_answer_in_one_batch() -> None:
    verifier = FakeVerifier()
    envs = [KernelEnv(toy_suite(), verifier=verifier, max_turns=2) for _ in range(3)]
    for env in envs:
        env.reset(seed=0)
    stepped = step_batch(envs, ["ok 2.0", "incorrect", "garbage"], verifier)
    assert verifier.calls == [("evaluate_many", 3)]
    assert [result.status.value for result, _ in stepped] == ["ok", "incorrect", "format_error"]
    assert [step[2] for _, step in stepped] == [True, False, False]


def test_resolve_suite_filters_by_level_ids_and_limit() -> None:
    suite = resolve_suite("cpu", level=1, task_ids=("level1/2_Sigmoid", "level1/1_ReLU"), limit=1)
    assert suite.ids() == ["level1/2_Sigmoid"]
    with pytest.raises(TaskError, match="no tasks left after the filters"):
        resolve_suite("cpu", level=99)
