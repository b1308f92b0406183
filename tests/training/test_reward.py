"""``compute_score`` for verl's ``custom_reward_function`` (plain Python: runs without verl)."""

from __future__ import annotations

import pytest

from kernelgym.errors import TaskError
from kernelgym.training.reward import (
    ScoreSettings,
    close_shared_verifiers,
    compute_score,
    set_shared_verifier,
    shared_verifier,
)

TASK = "level1/1_ReLU"
INFO = {"task_id": TASK, "suite": "cpu", "backend": "cpp", "split": "train"}


@pytest.fixture
def session_verifier(cpu_verifier):
    set_shared_verifier("cpp", cpu_verifier)
    yield cpu_verifier
    set_shared_verifier("cpp", None)


@pytest.mark.slow
def test_the_bundled_solution_scores_like_the_verifier_says(session_verifier, cpu_suite):
    solution = cpu_suite[TASK].solution("cpp")
    scored = compute_score("kernelgym/cpu", solution, TASK, INFO)
    assert scored["status"] == "ok" and scored["solved"] == 1.0 and scored["correct"] == 1.0
    assert 0.5 < scored["score"] <= 1.0
    # a reasoning block with a draft program in it is dropped before judging
    thought = "<think>```python\nclass ModelNew: pass\n```</think>\n"
    assert compute_score("kernelgym/cpu", thought + solution, TASK, INFO)["status"] == "ok"


def test_garbage_scores_zero(session_verifier):
    scored = compute_score("kernelgym/cpu", "I would write a kernel here.", TASK, INFO)
    assert scored == {"score": 0.0, "status": "format_error", "compiled": 0.0, "correct": 0.0, "solved": 0.0,
                      "speedup": 0.0}


def test_settings_come_from_the_row_then_from_reward_kwargs(session_verifier):
    scored = compute_score("x", "no code", None, {"task_id": TASK}, suite="cpu", backend="cpp", executor="local")
    assert scored["status"] == "format_error"
    with pytest.raises(TaskError, match="suite or backend"):
        compute_score("x", "no code", TASK, {})
    with pytest.raises(TaskError, match="names no task"):
        compute_score("x", "no code", None, {"suite": "cpu", "backend": "cpp"})
    with pytest.raises(TaskError, match="no task"):
        compute_score("x", "no code", "level9/nothing", INFO)


def test_a_given_verifier_is_shared_and_left_open(session_verifier, cpu_suite):
    assert ScoreSettings.resolve(INFO).verifier() is session_verifier is shared_verifier("cpp")
    close_shared_verifiers()  # forgets it without closing it: the test session owns it
    assert session_verifier.evaluate(cpu_suite[TASK], "no code").status.value == "format_error"


def test_a_built_verifier_is_built_once_per_process(tmp_path):
    set_shared_verifier("cpp", None)
    built = shared_verifier("cpp", num_workers=1, cache_dir=str(tmp_path))
    try:
        assert shared_verifier("cpp") is built
    finally:
        close_shared_verifiers()
    assert shared_verifier("cpp", num_workers=1, cache_dir=str(tmp_path)) is not built
    close_shared_verifiers()
