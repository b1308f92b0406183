"""Buffered Dynamic Retry: hopeless groups come back as repair tasks.

Holds:
    FailureRank: how far a failed attempt got (format error < illegal < compile error < compiled but wrong).
    failure_rank: the rank of one attempt from its status and stage flags.
    Attempt: one answer text with its evaluation.
    most_advanced_failure: the attempt of a failed group worth repairing.
    RepairTask: a task plus a failed attempt and its feedback.
    repair_prompt: the task prompt with the failed attempt and its feedback appended.
    RetryStats: counters of a RetryBuffer.
    RetryBuffer: the bounded buffer of repair tasks; plain Python, reusable by trainers.
    BufferedDynamicRetry: the Gymnasium wrapper that serves tasks in groups and mixes repair tasks in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from enum import IntEnum
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from kernelgym.envs.prompt import sanitize
from kernelgym.verifier.result import EvalResult, Status

__all__ = [
    "Attempt",
    "BufferedDynamicRetry",
    "FailureRank",
    "RepairTask",
    "RetryBuffer",
    "RetryStats",
    "failure_rank",
    "most_advanced_failure",
    "repair_prompt",
    "shorten_attempt",
]

PREVIOUS_ATTEMPT_HEADER = "## Previous attempt"
FEEDBACK_HEADER = "## Verifier feedback"
ELIDED_LINES = "# ... {n} lines of the earlier answer left out ..."
"""The line that stands for the middle of a failed attempt cut to fit a prompt (:func:`shorten_attempt`)."""


class FailureRank(IntEnum):
    """How far an attempt got; a higher rank is a more advanced attempt."""

    FORMAT_ERROR = 0
    ILLEGAL = 1
    COMPILE_ERROR = 2
    COMPILED_WRONG = 3
    SOLVED = 4


def failure_rank(status: Status | str, compiled: bool, correct: bool) -> FailureRank:
    """Rank an attempt: compiled-but-wrong over compile error over illegal over format error.

    An attempt that did not build or load (compile error, a build timeout, a load
    failure) ranks as ``COMPILE_ERROR``; one that built but then failed at run time,
    gave wrong outputs or timed out ranks as ``COMPILED_WRONG``. Legal and correct
    is ``SOLVED``.

    Args:
        status: the evaluation status.
        compiled: the native code built and loaded.
        correct: the outputs matched the reference.

    Example:
        >>> failure_rank("incorrect", compiled=True, correct=False) > failure_rank("compile_error", False, False)
        True
    """
    status = Status(status)
    if status is Status.FORMAT_ERROR:
        return FailureRank.FORMAT_ERROR
    if status is Status.ILLEGAL:
        return FailureRank.ILLEGAL
    if not compiled:
        return FailureRank.COMPILE_ERROR
    if correct:
        return FailureRank.SOLVED
    return FailureRank.COMPILED_WRONG


@dataclass(frozen=True)
class Attempt:
    """One answer and its evaluation.

    Attributes:
        text: the answer as the agent wrote it.
        result: what the verifier said about it.
    """

    text: str
    result: EvalResult

    @property
    def rank(self) -> FailureRank:
        """How far the attempt got (see :func:`failure_rank`)."""
        return failure_rank(self.result.status, self.result.compiled, self.result.correct)

    @property
    def solved(self) -> bool:
        """Legal and correct: the attempt counts as a success of its group."""
        return self.result.legal and self.result.correct


def most_advanced_failure(attempts: Iterable[Attempt]) -> Attempt | None:
    """The unsolved attempt that got furthest, ties going to the higher score, then to the earlier attempt.

    Returns ``None`` when there is no unsolved attempt.

    Example:
        >>> a = Attempt("x", EvalResult("t", "cpp", "compile_error", parsed=True, legal=True))
        >>> b = Attempt("y", EvalResult("t", "cpp", "incorrect", parsed=True, legal=True, compiled=True))
        >>> most_advanced_failure([a, b]).text
        'y'
    """
    failures = [a for a in attempts if not a.solved]
    if not failures:
        return None
    return max(failures, key=lambda a: (a.rank, a.result.score))


@dataclass(frozen=True)
class RepairTask:
    """A task to be solved again, shown with a failed attempt and its feedback.

    Attributes:
        task_id: the original task.
        attempt: the failed answer text.
        feedback: the verifier's feedback on it.
        status: the failed attempt's status.
        retries: how many times this repair task already failed and was re-buffered.
        origin_prompt: the original task prompt, for users that have no env to rebuild it.
    """

    task_id: str
    attempt: str
    feedback: str
    status: Status
    retries: int = 0
    origin_prompt: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @classmethod
    def from_attempt(cls, task_id: str, attempt: Attempt, origin_prompt: str | None = None) -> RepairTask:
        """A first-time repair task from a failed attempt."""
        return cls(task_id, attempt.text, attempt.result.feedback, attempt.result.status, 0, origin_prompt)


def repair_prompt(task_prompt: str, repair: RepairTask) -> str:
    """Append the failed attempt and its feedback to a task prompt.

    Example:
        >>> r = RepairTask("level1/1_ReLU", "class ModelNew: ...", "error: no kernel", "compile_error")
        >>> print(repair_prompt("Write ModelNew.", r).splitlines()[2])
        ## Previous attempt
    """
    return (
        f"{task_prompt.rstrip()}\n\n"
        f"{PREVIOUS_ATTEMPT_HEADER}\n"
        f"An earlier answer to this task failed with status `{repair.status.value}`:\n\n"
        f"{repair.attempt.strip()}\n\n"
        f"{FEEDBACK_HEADER}\n"
        f"{repair.feedback.strip()}\n\n"
        "Fix the problems above and answer with the complete corrected program.\n"
    )


def shorten_attempt(repair: RepairTask, keep_lines: int) -> RepairTask:
    """The repair task with its failed attempt cut to its first and last lines, ``keep_lines`` in all, the middle
    replaced by one :data:`ELIDED_LINES` line; unchanged when the attempt has no more lines than that.

    For a prompt that must fit a model's context: the task and the feedback stay whole, the start of the answer
    (imports, kernel signatures) and its end (``ModelNew``) are what a repair needs most.

    Example:
        >>> r = RepairTask("t", "a\\nb\\nc\\nd\\ne", "wrong", "incorrect")
        >>> print(shorten_attempt(r, 2).attempt)
        a
        # ... 3 lines of the earlier answer left out ...
        e
    """
    lines = repair.attempt.splitlines()
    if len(lines) <= keep_lines:
        return repair
    keep_lines = max(keep_lines, 0)
    head, tail = lines[: (keep_lines + 1) // 2], lines[len(lines) - keep_lines // 2 :]
    middle = ELIDED_LINES.format(n=len(lines) - len(head) - len(tail))
    return replace(repair, attempt="\n".join([*head, middle, *tail]))


@dataclass(frozen=True)
class RetryStats:
    """Counters of a :class:`RetryBuffer`.

    Attributes:
        size: repair tasks in the buffer now.
        capacity: the most repair tasks the buffer holds.
        pushed: repair tasks created from failed fresh groups.
        draws: repair tasks drawn from the buffer.
        recovered: drawn repair tasks that were then solved.
        retried: drawn repair tasks that failed again and were re-buffered.
        dropped: drawn repair tasks that failed again after ``max_retries`` re-bufferings.
        evicted: repair tasks pushed out, oldest first, to respect ``capacity``.
    """

    size: int
    capacity: int
    pushed: int = 0
    draws: int = 0
    recovered: int = 0
    retried: int = 0
    dropped: int = 0
    evicted: int = 0


class RetryBuffer:
    """A bounded buffer of repair tasks, independent of Gymnasium.

    Failed fresh groups :meth:`push` repair tasks; :meth:`draw` removes one at
    random; its outcome is reported with :meth:`mark_recovered` or
    :meth:`mark_failed`. A repair task is re-buffered at most ``max_retries``
    times, so it is tried at most ``max_retries + 1`` times.

    Args:
        capacity: the most repair tasks held; pushing past it evicts the oldest.
        max_retries: how many times a failed repair task is re-buffered before it is dropped.

    Example:
        >>> import numpy as np
        >>> buffer = RetryBuffer(capacity=2, max_retries=1)
        >>> buffer.push(RepairTask("level1/1_ReLU", "bad code", "does not compile", "compile_error"))
        >>> task = buffer.draw(np.random.default_rng(0))
        >>> buffer.mark_failed(task, RepairTask(task.task_id, "worse", "wrong output", "incorrect")).retries
        1
        >>> buffer.mark_recovered(buffer.draw(np.random.default_rng(0)))
        >>> buffer.stats.recovered, len(buffer)
        (1, 0)
    """

    def __init__(self, capacity: int = 256, max_retries: int = 2) -> None:
        if capacity < 1:
            raise ValueError(f"RetryBuffer capacity must be >= 1, got {capacity}")
        if max_retries < 0:
            raise ValueError(f"RetryBuffer max_retries must be >= 0, got {max_retries}")
        self.capacity = capacity
        self.max_retries = max_retries
        self._tasks: deque[RepairTask] = deque()
        self._counts = {"pushed": 0, "draws": 0, "recovered": 0, "retried": 0, "dropped": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self._tasks)

    def tasks(self) -> tuple[RepairTask, ...]:
        """The buffered repair tasks, oldest first."""
        return tuple(self._tasks)

    @property
    def stats(self) -> RetryStats:
        """A snapshot of the counters."""
        return RetryStats(size=len(self._tasks), capacity=self.capacity, **self._counts)

    def push(self, task: RepairTask) -> None:
        """Add a repair task made from a failed fresh group, evicting the oldest past capacity."""
        self._counts["pushed"] += 1
        self._append(task)

    def draw(self, rng: np.random.Generator) -> RepairTask | None:
        """Remove and return a uniformly chosen repair task (``None`` when empty)."""
        if not self._tasks:
            return None
        index = int(rng.integers(len(self._tasks)))
        task = self._tasks[index]
        del self._tasks[index]
        self._counts["draws"] += 1
        return task

    def mark_recovered(self, task: RepairTask) -> None:
        """Report that a drawn repair task was solved."""
        self._counts["recovered"] += 1

    def mark_failed(self, task: RepairTask, newer: RepairTask) -> RepairTask | None:
        """Report that a drawn repair task failed again, with its newest failure.

        Args:
            task: the repair task that was drawn.
            newer: the most advanced failure of the repair group; its attempt, feedback and status
                replace the old ones, while ``origin_prompt`` stays that of ``task``.

        Returns:
            The re-buffered repair task, or ``None`` when ``task`` had used up its retries and was dropped.
        """
        if task.retries >= self.max_retries:
            self._counts["dropped"] += 1
            return None
        rebuffered = replace(newer, retries=task.retries + 1, origin_prompt=task.origin_prompt)
        self._counts["retried"] += 1
        self._append(rebuffered)
        return rebuffered

    def book_group(
        self,
        task_id: str,
        solved: bool,
        failure: Attempt | None,
        repair: RepairTask | None = None,
        origin_prompt: str | None = None,
    ) -> None:
        """Book one finished group of episodes.

        A repair group (``repair`` given) that solved its task counts as recovered; one that
        failed is re-buffered with its newest failure (or dropped, see :meth:`mark_failed`).
        A fresh group that failed pushes a repair task made from its most advanced failure.

        Args:
            task_id: the task the group attempted.
            solved: some attempt of the group was legal and correct.
            failure: the group's most advanced failure (:func:`most_advanced_failure`), if any.
            repair: the repair task the group was served, ``None`` for a fresh group.
            origin_prompt: the task's prompt, kept by a pushed repair task.

        Example:
            >>> buffer = RetryBuffer()
            >>> failed = Attempt("x", EvalResult("t", "cpp", "compile_error", parsed=True, legal=True))
            >>> buffer.book_group("t", solved=False, failure=failed, origin_prompt="Write ModelNew.")
            >>> buffer.book_group("t", solved=True, failure=None, repair=buffer.draw(np.random.default_rng(0)))
            >>> buffer.stats.pushed, buffer.stats.recovered
            (1, 1)
        """
        if repair is not None:
            if solved:
                self.mark_recovered(repair)
            else:
                self.mark_failed(repair, RepairTask.from_attempt(task_id, failure) if failure else repair)
        elif not solved and failure is not None:
            self.push(RepairTask.from_attempt(task_id, failure, origin_prompt))

    def _append(self, task: RepairTask) -> None:
        self._tasks.append(task)
        while len(self._tasks) > self.capacity:
            self._tasks.popleft()
            self._counts["evicted"] += 1


def _repair_prompt_space(observation_space: gym.Space, action_space: gym.Space) -> spaces.Text | None:
    """A ``prompt`` space with room for an appended attempt and feedback (``None``: no text prompt space)."""
    if not isinstance(observation_space, spaces.Dict) or not isinstance(observation_space.get("prompt"), spaces.Text):
        return None
    texts = [observation_space["prompt"], observation_space.get("feedback"), action_space]
    templates = [repair_prompt("", RepairTask("", "", "", status)) for status in Status]
    return spaces.Text(
        max_length=sum(t.max_length for t in texts if isinstance(t, spaces.Text)) + max(map(len, templates)),
        min_length=observation_space["prompt"].min_length,
        charset=observation_space["prompt"].character_set,
    )


class BufferedDynamicRetry(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Serve each task to a group of episodes and turn wholly failed groups into repair tasks.

    Each task is served to ``group_size`` consecutive episodes. The group's first
    episode resets the inner env without a task id (so the inner env chooses; a
    ``task_id`` in ``options`` is honoured there), the rest of the group with
    ``options={"task_id": ...}``. A group succeeds when any of its attempts is
    legal and correct (``info["result"]``). When a fresh group fails, its most
    advanced failure (:func:`most_advanced_failure`) becomes a :class:`RepairTask`
    pushed into a :class:`RetryBuffer`.

    At the start of each group, with probability ``mix_ratio`` (drawn from
    ``self.np_random``) and a non-empty buffer, the group is a repair group: a
    repair task is drawn and its prompt (``obs["prompt"]``) shows the task, the
    failed attempt and the verifier feedback (:func:`repair_prompt`), mapped into
    the code charset and cut to the wrapper's ``observation_space``, whose
    ``prompt`` is widened to hold them. A repair group that succeeds counts as recovered; one that fails is re-buffered with its
    newest failure until ``max_retries``, then dropped.

    ``info["retry"]`` holds the buffer counters (:class:`RetryStats`) plus
    ``repair`` (this episode is a repair episode), ``retries`` (of the repair task
    served) and ``group_episode`` (0-based index of the episode in its group).
    A group's outcome is booked when its last episode ends (or, if it is abandoned,
    at the next reset).

    Args:
        env: a ``KernelEnv``-shaped env (``obs["prompt"]``, ``info["task_id"]``, ``info["result"]``).
        group_size: consecutive episodes per task (the GRPO group size).
        capacity: the most repair tasks buffered.
        mix_ratio: probability that a group is a repair group, in ``[0, 1]``.
        max_retries: re-bufferings of a failing repair task before it is dropped.

    Example:
        >>> import gymnasium as gym, kernelgym
        >>> env = BufferedDynamicRetry(gym.make("kernelgym/CPU-v0", max_turns=1), group_size=2, mix_ratio=1.0)
        >>> for episode in range(3):
        ...     obs, info = env.reset(seed=0 if episode == 0 else None)
        ...     _ = env.step("I do not know.")
        >>> info["retry"]["repair"], "## Previous attempt" in obs["prompt"], info["retry"]["draws"]
        (True, True, 1)
        >>> env.close()
    """

    def __init__(
        self,
        env: gym.Env,
        group_size: int = 8,
        capacity: int = 256,
        mix_ratio: float = 0.25,
        max_retries: int = 2,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"BufferedDynamicRetry group_size must be >= 1, got {group_size}")
        if not 0.0 <= mix_ratio <= 1.0:
            raise ValueError(f"BufferedDynamicRetry mix_ratio must be in [0, 1], got {mix_ratio}")
        gym.utils.RecordConstructorArgs.__init__(
            self, group_size=group_size, capacity=capacity, mix_ratio=mix_ratio, max_retries=max_retries
        )
        gym.Wrapper.__init__(self, env)
        self.group_size = group_size
        self.mix_ratio = mix_ratio
        self.buffer = RetryBuffer(capacity=capacity, max_retries=max_retries)
        prompt_space = _repair_prompt_space(env.observation_space, env.action_space)
        if prompt_space is not None:
            self.observation_space = spaces.Dict({**env.observation_space.spaces, "prompt": prompt_space})
        self._max_prompt_chars = prompt_space.max_length if prompt_space is not None else None
        self._episodes_in_group = group_size
        self._group_booked = True
        self._task_id = ""
        self._origin_prompt = ""
        self._repair: RepairTask | None = None
        self._attempts: list[Attempt] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start the next episode of the current group, or a new group when it is complete."""
        if self._episodes_in_group >= self.group_size:
            self._book_group()
            obs, info = self._start_group(seed, options)
        else:
            obs, info = self.env.reset(seed=seed, options={**(options or {}), "task_id": self._task_id})
        self._episodes_in_group += 1
        return self._rewrite(obs), self._with_stats(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env, remembering the attempt for the group's outcome."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "result" in info:
            self._attempts.append(Attempt(str(action), EvalResult.from_dict(info["result"])))
        if (terminated or truncated) and self._episodes_in_group >= self.group_size:
            self._book_group()
        return self._rewrite(obs), reward, terminated, truncated, self._with_stats(info)

    def _start_group(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        # The fresh reset comes first so that a seed also governs the mixing draw below.
        obs, info = self.env.reset(seed=seed, options=options)
        self._repair = None
        if len(self.buffer) and self.np_random.random() < self.mix_ratio:
            self._repair = self.buffer.draw(self.np_random)
            obs, info = self.env.reset(options={**(options or {}), "task_id": self._repair.task_id})
        self._task_id = info["task_id"]
        self._origin_prompt = obs["prompt"]
        self._attempts = []
        self._episodes_in_group = 0
        self._group_booked = False
        return obs, info

    def _book_group(self) -> None:
        if self._group_booked:
            return
        self._group_booked = True
        solved = any(a.solved for a in self._attempts)
        failure = most_advanced_failure(self._attempts)
        self.buffer.book_group(self._task_id, solved, failure, self._repair, self._origin_prompt)

    def _rewrite(self, obs: Any) -> Any:
        if self._repair is None:
            return obs
        # The failed answer and its raw feedback may hold characters outside the prompt's charset.
        prompt = sanitize(repair_prompt(obs["prompt"], self._repair), self._max_prompt_chars)
        return {**obs, "prompt": prompt}

    def _with_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        info["retry"] = {
            **asdict(self.buffer.stats),
            "repair": self._repair is not None,
            "retries": self._repair.retries if self._repair else 0,
            "group_episode": self._episodes_in_group - 1,
        }
        return info
