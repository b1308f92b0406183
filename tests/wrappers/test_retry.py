"""Tests of kernelgym.wrappers.retry: failure ranking, RetryBuffer, and BufferedDynamicRetry on a fake env."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelgym.verifier.result import Status
from kernelgym.wrappers.retry import (
    FEEDBACK_HEADER,
    PREVIOUS_ATTEMPT_HEADER,
    Attempt,
    BufferedDynamicRetry,
    FailureRank,
    RepairTask,
    RetryBuffer,
    failure_rank,
    most_advanced_failure,
    repair_prompt,
    shorten_attempt,
)

from .fakes import ScriptedKernelEnv, judge, play


def attempt(text: str) -> Attempt:
    return Attempt(text, judge("level1/1_A", text))


def repair(task_id: str = "level1/1_A", text: str = "compile_error x", retries: int = 0) -> RepairTask:
    result = judge(task_id, text)
    return RepairTask(task_id, text, result.feedback, result.status, retries)


def is_repair_prompt(obs) -> bool:
    return PREVIOUS_ATTEMPT_HEADER in obs["prompt"]


def play_group(env: BufferedDynamicRetry, policy, options=None, seed=None) -> list:
    """Play one group of episodes; returns (reset obs, reset info, steps) per episode."""
    return [
        play(env, policy, seed=seed if episode == 0 else None, options=options if episode == 0 else None)
        for episode in range(env.group_size)
    ]


# failure ranking


def test_failure_rank_orders_compiled_wrong_over_compile_error_over_illegal_over_format():
    ranks = [attempt(f"{status} x").rank for status in ("format_error", "illegal", "compile_error", "incorrect", "ok")]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    assert ranks[-1] is FailureRank.SOLVED


@pytest.mark.parametrize("status", ["runtime_error", "timeout", "incorrect"])
def test_failures_after_a_build_rank_as_compiled_wrong_and_before_as_compile_error(status):
    assert failure_rank(status, compiled=True, correct=False) is FailureRank.COMPILED_WRONG
    assert failure_rank(status, compiled=False, correct=False) is FailureRank.COMPILE_ERROR


def test_illegal_ranks_below_a_compile_error_even_when_its_outputs_were_correct():
    assert failure_rank(Status.ILLEGAL, compiled=True, correct=True) < failure_rank("compile_error", False, False)


def test_most_advanced_failure_prefers_rank_then_score_and_ignores_solved_attempts():
    group = [attempt("format_error a"), attempt("incorrect b"), attempt("compile_error c"), attempt("ok d")]
    assert most_advanced_failure(group).text == "incorrect b"
    assert most_advanced_failure([attempt("ok a")]) is None
    assert most_advanced_failure([]) is None
    low, high = attempt("incorrect low"), attempt("incorrect high")
    high = Attempt(high.text, high.result.with_changes(score=low.result.score + 0.05))
    assert most_advanced_failure([low, high]).text == "incorrect high"


def test_repair_prompt_shows_the_attempt_and_its_feedback_after_the_task():
    task = repair(text="compile_error int main( {")
    prompt = repair_prompt("Write ModelNew for task X.", task)
    assert prompt.startswith("Write ModelNew for task X.")
    assert prompt.index(PREVIOUS_ATTEMPT_HEADER) < prompt.index(task.attempt) < prompt.index(FEEDBACK_HEADER)
    assert prompt.index(FEEDBACK_HEADER) < prompt.index(task.feedback)


# RetryBuffer


def test_buffer_evicts_the_oldest_past_capacity():
    buffer = RetryBuffer(capacity=2)
    for task_id in ("a", "b", "c"):
        buffer.push(repair(task_id))
    assert [t.task_id for t in buffer.tasks()] == ["b", "c"]
    assert (buffer.stats.pushed, buffer.stats.evicted, buffer.stats.size) == (3, 1, 2)


def test_buffer_draw_removes_and_counts_and_is_none_when_empty():
    buffer = RetryBuffer()
    buffer.push(repair("a"))
    rng = np.random.default_rng(0)
    assert buffer.draw(rng).task_id == "a"
    assert buffer.draw(rng) is None
    assert (buffer.stats.draws, len(buffer)) == (1, 0)


def test_buffer_draws_uniformly():
    buffer, rng, seen = RetryBuffer(), np.random.default_rng(1), []
    for _ in range(300):
        buffer.push(repair("a"))
        buffer.push(repair("b"))
        seen.append(buffer.draw(rng).task_id)
        buffer.draw(rng)
    assert 0.4 < seen.count("a") / len(seen) < 0.6


def test_failed_repair_is_rebuffered_with_newer_feedback_until_max_retries_then_dropped():
    buffer, rng = RetryBuffer(max_retries=2), np.random.default_rng(0)
    first = RepairTask("a", "compile_error 0", "old", Status.COMPILE_ERROR, origin_prompt="the task")
    buffer.push(first)
    for retry in range(1, 3):
        drawn = buffer.draw(rng)
        rebuffered = buffer.mark_failed(drawn, repair("a", f"incorrect {retry}"))
        assert rebuffered.retries == retry
        assert rebuffered.attempt == f"incorrect {retry}" and rebuffered.status is Status.INCORRECT
        assert rebuffered.origin_prompt == "the task"
        assert buffer.tasks() == (rebuffered,)
    assert buffer.mark_failed(buffer.draw(rng), repair("a", "incorrect 3")) is None
    assert (len(buffer), buffer.stats.retried, buffer.stats.dropped, buffer.stats.draws) == (0, 2, 1, 3)


def test_buffer_rejects_bad_sizes():
    with pytest.raises(ValueError):
        RetryBuffer(capacity=0)
    with pytest.raises(ValueError):
        RetryBuffer(max_retries=-1)


operations = st.lists(st.sampled_from(["push", "draw_recover", "draw_fail"]), max_size=60)


@given(ops=operations, capacity=st.integers(1, 5), max_retries=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_buffer_bookkeeping_balances(ops, capacity, max_retries, seed):
    buffer, rng = RetryBuffer(capacity=capacity, max_retries=max_retries), np.random.default_rng(seed)
    for op in ops:
        if op == "push":
            buffer.push(repair())
            continue
        drawn = buffer.draw(rng)
        if drawn is None:
            continue
        if op == "draw_recover":
            buffer.mark_recovered(drawn)
        else:
            rebuffered = buffer.mark_failed(drawn, repair(text="incorrect again"))
            assert (rebuffered is None) == (drawn.retries >= max_retries)
        assert len(buffer) <= capacity
    s = buffer.stats
    assert s.size == len(buffer) <= capacity
    assert s.pushed + s.retried == s.size + s.evicted + s.draws
    assert s.draws >= s.recovered + s.retried + s.dropped
    assert all(t.retries <= max_retries for t in buffer.tasks())


# BufferedDynamicRetry on a fake env


def always(answer: str):
    return lambda obs, turn: answer


def repairs_succeed(obs, turn) -> str:
    return "ok fixed" if is_repair_prompt(obs) else f"incorrect turn {turn}"


def test_each_task_is_served_to_group_size_consecutive_episodes():
    inner = ScriptedKernelEnv()
    env = BufferedDynamicRetry(inner, group_size=3, mix_ratio=0.0)
    for _ in range(4):
        play_group(env, always("ok fine"))
    groups = [inner.resets[i : i + 3] for i in range(0, 12, 3)]
    assert all(len(set(group)) == 1 for group in groups)
    assert [e[1]["retry"]["group_episode"] for e in play_group(env, always("ok fine"))] == [0, 1, 2]


def test_all_failed_group_yields_a_repair_task_showing_its_most_advanced_failure():
    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=3, mix_ratio=0.0)
    answers = iter(["format_error nothing", "incorrect off by one", "compile_error missing semicolon"])
    play_group(env, lambda obs, turn: next(answers), options={"task_id": "level1/2_B"})
    (task,) = env.buffer.tasks()
    assert (task.task_id, task.attempt, task.status, task.retries) == (
        "level1/2_B",
        "incorrect off by one",
        "incorrect",
        0,
    )
    assert task.feedback == judge("level1/2_B", "incorrect off by one").feedback
    assert task.origin_prompt == "Write ModelNew for task level1/2_B."

    env.mix_ratio = 1.0
    episodes = play_group(env, always("compile_error still broken"))
    prompt = episodes[0][0]["prompt"]
    assert episodes[0][1]["retry"]["repair"] and episodes[0][1]["task_id"] == "level1/2_B"
    assert "incorrect off by one" in prompt and task.feedback in prompt
    assert PREVIOUS_ATTEMPT_HEADER in prompt and FEEDBACK_HEADER in prompt
    assert all(step.obs["prompt"] == prompt for _, _, steps in episodes for step in steps)


def test_successful_groups_create_nothing():
    env = BufferedDynamicRetry(ScriptedKernelEnv(), group_size=2, mix_ratio=0.5)
    for first in ("ok at once", "incorrect then ok"):
        for _ in range(3):
            play_group(env, lambda obs, turn, first=first: first if turn == 0 else "ok then")
    assert len(env.buffer) == 0 and env.buffer.stats.pushed == 0


def test_one_success_anywhere_in_the_group_makes_it_a_success():
    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=4, mix_ratio=0.0)
    answers = iter(["incorrect a", "compile_error b", "ok c", "format_error d"])
    play_group(env, lambda obs, turn: next(answers))
    assert len(env.buffer) == 0


def test_recovered_repair_is_counted():
    env = BufferedDynamicRetry(ScriptedKernelEnv(), group_size=2, mix_ratio=1.0)
    play_group(env, repairs_succeed)
    assert env.buffer.stats.pushed == 1
    episodes = play_group(env, repairs_succeed)
    last_info = episodes[-1][2][-1].info["retry"]
    assert last_info["repair"] and last_info["recovered"] == 1 and last_info["draws"] == 1
    assert last_info["size"] == 0 and env.buffer.stats.recovered == 1


def test_max_retries_is_honoured_and_rebuffered_tasks_carry_the_newest_feedback():
    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=2, mix_ratio=1.0, max_retries=2)
    counter = iter(range(1000))

    def policy(obs, turn):
        return f"incorrect attempt {next(counter)}"

    play_group(env, policy)
    previous = env.buffer.tasks()[0]
    for retry in range(1, 3):
        episodes = play_group(env, policy)
        assert episodes[0][1]["retry"]["repair"] and episodes[0][1]["retry"]["retries"] == retry - 1
        assert previous.attempt in episodes[0][0]["prompt"] and previous.feedback in episodes[0][0]["prompt"]
        (current,) = env.buffer.tasks()
        assert current.retries == retry and current.attempt != previous.attempt
        previous = current
    play_group(env, policy)
    s = env.buffer.stats
    assert (s.size, s.draws, s.retried, s.dropped, s.recovered) == (0, 3, 2, 1, 0)
    episodes = play_group(env, policy)
    assert not episodes[0][1]["retry"]["repair"] and env.buffer.stats.pushed == 2


def test_capacity_is_honoured():
    env = BufferedDynamicRetry(ScriptedKernelEnv(), group_size=2, capacity=2, mix_ratio=0.0)
    for task_id in ("level1/1_A", "level1/2_B", "level1/3_C"):
        play_group(env, always("compile_error nope"), options={"task_id": task_id})
    assert [t.task_id for t in env.buffer.tasks()] == ["level1/2_B", "level1/3_C"]
    assert env.buffer.stats.evicted == 1


def test_mix_ratio_zero_never_draws_and_mix_ratio_decides_per_group():
    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=2, mix_ratio=0.0)
    flags = [e[1]["retry"]["repair"] for _ in range(5) for e in play_group(env, always("incorrect x"))]
    assert not any(flags) and env.buffer.stats.draws == 0

    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=3, mix_ratio=0.5, capacity=1000)
    flags = [
        [e[1]["retry"]["repair"] for e in play_group(env, always("incorrect x"), seed=7 if g == 0 else None)]
        for g in range(60)
    ]
    assert all(len(set(group)) == 1 for group in flags)
    repair_share = sum(group[0] for group in flags[1:]) / (len(flags) - 1)
    assert 0.3 < repair_share < 0.7


def test_seeded_runs_repeat():
    def trace(seed):
        env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=2, mix_ratio=0.5)
        return [
            (e[1]["task_id"], e[1]["retry"]["repair"])
            for g in range(8)
            for e in play_group(env, always("incorrect x"), seed=seed if g == 0 else None)
        ]

    assert trace(3) == trace(3)


def test_repair_observations_stay_in_the_observation_space():
    env = BufferedDynamicRetry(ScriptedKernelEnv(), group_size=1, mix_ratio=1.0)
    play_group(env, always("compile_error caf\u00e9 \u2018quoted\u2019 " + "x" * 2000))
    obs, info = env.reset()
    assert info["retry"]["repair"] and len(obs["prompt"]) > ScriptedKernelEnv().observation_space["prompt"].max_length
    assert env.observation_space.contains(obs)


def test_abandoned_group_is_booked_at_the_next_reset():
    env = BufferedDynamicRetry(ScriptedKernelEnv(max_turns=3), group_size=2, mix_ratio=0.0)
    env.reset(options={"task_id": "level1/3_C"})
    env.step("incorrect first")
    env.reset()
    env.step("compile_error second")
    env.reset()
    assert [(t.task_id, t.attempt) for t in env.buffer.tasks()] == [("level1/3_C", "incorrect first")]


@pytest.mark.parametrize("kwargs", [{"group_size": 0}, {"mix_ratio": 1.5}, {"capacity": 0}, {"max_retries": -1}])
def test_wrapper_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        BufferedDynamicRetry(ScriptedKernelEnv(), **kwargs)


def test_shorten_attempt_keeps_its_ends_and_says_how_much_is_left_out():
    repair = RepairTask("t", "\n".join(f"line {i}" for i in range(10)), "wrong", "incorrect")
    assert shorten_attempt(repair, 10) is repair
    short = shorten_attempt(repair, 4).attempt.splitlines()
    assert short == ["line 0", "line 1", "# ... 6 lines of the earlier answer left out ...", "line 8", "line 9"]
    assert shorten_attempt(repair, 0).attempt == "# ... 10 lines of the earlier answer left out ..."
