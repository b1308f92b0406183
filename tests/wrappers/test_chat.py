"""Tests of kernelgym.wrappers.chat: message building and the ChatObservation wrapper on a fake env."""

from __future__ import annotations

from kernelgym.envs.prompt import repair_message
from kernelgym.wrappers.chat import DEFAULT_SYSTEM_PROMPT, ChatObservation, to_messages
from kernelgym.wrappers.retry import BufferedDynamicRetry

from .fakes import ScriptedKernelEnv, judge, play


def test_to_messages_orders_system_task_then_attempts_and_feedback():
    messages = to_messages("the task", [("try 1", "fb 1"), ("try 2", "fb 2")], system_prompt="be good")
    assert messages == [
        {"role": "system", "content": "be good"},
        {"role": "user", "content": "the task"},
        {"role": "assistant", "content": "try 1"},
        {"role": "user", "content": repair_message("fb 1")},
        {"role": "assistant", "content": "try 2"},
        {"role": "user", "content": repair_message("fb 2")},
    ]


def test_wrapper_puts_the_conversation_so_far_in_info_and_leaves_obs_alone():
    env = ChatObservation(ScriptedKernelEnv(max_turns=3))
    answers = ["compile_error a", "incorrect b", "ok c"]
    first_obs, first_info, steps = play(env, lambda obs, turn: answers[turn], options={"task_id": "level1/1_A"})
    assert first_info["messages"] == to_messages(first_obs["prompt"], (), DEFAULT_SYSTEM_PROMPT)
    assert env.observation_space.contains(first_obs)
    last = steps[-1].info["messages"]
    assert last[1]["content"] == "Write ModelNew for task level1/1_A."
    assert [m["content"] for m in last[2::2]] == answers
    assert [m["content"] for m in last[3::2]] == [repair_message(judge("level1/1_A", a).feedback) for a in answers]
    assert env.messages == last


def test_new_episode_starts_a_new_conversation():
    env = ChatObservation(ScriptedKernelEnv(), system_prompt="short")
    play(env, lambda obs, turn: "incorrect x", seed=0)
    obs, info = env.reset()
    assert info["messages"] == [{"role": "system", "content": "short"}, {"role": "user", "content": obs["prompt"]}]


def test_repair_prompt_becomes_the_task_message():
    env = ChatObservation(BufferedDynamicRetry(ScriptedKernelEnv(max_turns=1), group_size=1, mix_ratio=1.0))
    play(env, lambda obs, turn: "incorrect first try")
    obs, info = env.reset()
    assert "incorrect first try" in info["messages"][1]["content"] == obs["prompt"]
