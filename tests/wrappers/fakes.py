"""Small KernelEnv-shaped fakes for the wrapper tests.

Holds:
    judge, FakeVerifier: re-exported from ``tests.fakes`` (the verdict is the answer's first word).
    ScriptedKernelEnv: a gym.Env with KernelEnv's observation and info layout, judged by ``judge``.
    play: run one episode with a policy and collect its steps.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from kernelgym.verifier.result import EvalResult

from ..fakes import FakeVerifier, judge

__all__ = ["FakeVerifier", "ScriptedKernelEnv", "Step", "judge", "play"]

TEXT = spaces.Text(max_length=2048, min_length=0, charset=string.printable)


class ScriptedKernelEnv(gym.Env):
    """A KernelEnv look-alike: same observation/info keys, a scripted verifier, no compiler."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, task_ids: tuple[str, ...] = ("level1/1_A", "level1/2_B", "level1/3_C"), max_turns: int = 2):
        self.task_ids = task_ids
        self.max_turns = max_turns
        self.observation_space = spaces.Dict(
            {
                "prompt": TEXT,
                "feedback": TEXT,
                "turn": spaces.Discrete(max_turns + 1),
                "metrics": spaces.Box(-np.inf, np.inf, (6,), np.float32),
            }
        )
        self.action_space = TEXT
        self.task_id = ""
        self.turn = 0
        self.resets: list[str] = []

    def _obs(self, feedback: str, result: EvalResult | None) -> dict[str, Any]:
        metrics = np.zeros(6, np.float32)
        if result is not None:
            metrics[:] = [
                result.parsed,
                result.legal,
                result.compiled,
                result.correct,
                result.speedup or 0,
                result.score,
            ]
        prompt = f"Write ModelNew for task {self.task_id}."
        return {"prompt": prompt, "feedback": feedback, "turn": self.turn, "metrics": metrics}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        self.task_id = options.get("task_id") or self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        self.turn = 0
        self.resets.append(self.task_id)
        return self._obs("", None), {"task_id": self.task_id, "turn": 0, "score": 0.0, "status": ""}

    def step(self, action: str):
        result = judge(self.task_id, action)
        self.turn += 1
        terminated = result.ok
        truncated = not terminated and self.turn >= self.max_turns
        info = {
            "task_id": self.task_id,
            "turn": self.turn,
            "score": result.score,
            "status": result.status.value,
            "result": result.to_dict(),
        }
        return self._obs(result.feedback, result), result.score, terminated, truncated, info


@dataclass(frozen=True)
class Step:
    """One transition as seen by the caller of a (wrapped) env."""

    obs: dict[str, Any]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def play(
    env: gym.Env,
    policy: Callable[[dict[str, Any], int], str],
    seed: int | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], list[Step]]:
    """Run one episode; ``policy(obs, turn_index)`` answers. Returns the reset obs, reset info and the steps."""
    obs, info = env.reset(seed=seed, options=options)
    first_obs, first_info, steps = obs, info, []
    for turn in itertools.count():
        obs, reward, terminated, truncated, info = env.step(policy(obs, turn))
        steps.append(Step(obs, float(reward), terminated, truncated, info))
        if terminated or truncated:
            break
    return first_obs, first_info, steps
