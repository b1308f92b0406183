"""Tests of kernelgym.wrappers.record: one JSON line per step, on a fake env."""

from __future__ import annotations

import json

from kernelgym.verifier.result import EvalResult
from kernelgym.wrappers.prime_echo import PrimeEcho
from kernelgym.wrappers.record import RecordEpisodes

from .fakes import ScriptedKernelEnv, play


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_line_per_step_with_the_step_fields(tmp_path):
    path = tmp_path / "runs" / "episodes.jsonl"
    env = RecordEpisodes(PrimeEcho(ScriptedKernelEnv(max_turns=2)), path)
    answers = ["compile_error a", "incorrect b"]
    _, _, steps = play(env, lambda obs, turn: answers[turn], options={"task_id": "level1/2_B"})
    lines = read_lines(path)
    assert [line["action"] for line in lines] == answers
    assert [line["reward"] for line in lines] == [s.reward for s in steps]
    assert [EvalResult.from_dict(line["result"]) for line in lines] == [
        EvalResult.from_dict(s.info["result"]) for s in steps
    ]
    assert [(line["task_id"], line["turn"], line["episode"]) for line in lines] == [
        ("level1/2_B", s.info["turn"], 0) for s in steps
    ]
    assert [(line["terminated"], line["truncated"]) for line in lines] == [(False, False), (False, True)]
    env.close()


def test_lines_are_flushed_at_once_and_files_are_appended(tmp_path):
    path = tmp_path / "episodes.jsonl"
    env = RecordEpisodes(ScriptedKernelEnv(), path)
    play(env, lambda obs, turn: "ok quick")
    assert len(read_lines(path)) == 1
    play(env, lambda obs, turn: "ok again")
    env.close()
    env = RecordEpisodes(ScriptedKernelEnv(), path)
    play(env, lambda obs, turn: "ok later")
    env.close()
    assert [(line["episode"], line["action"]) for line in read_lines(path)] == [
        (0, "ok quick"),
        (1, "ok again"),
        (0, "ok later"),
    ]
