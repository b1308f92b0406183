"""The text-action environment: one episode is up to ``max_turns`` attempts at one kernel task.

Holds:
    MAX_ACTION_CHARS: longest answer the action space admits.
    MAX_PROMPT_CHARS: longest prompt the observation space admits.
    SPEEDUP_CLIP: the speedup entry of ``metrics`` is clipped to this.
    METRIC_NAMES: the entries of the ``metrics`` observation, in order.
    KernelEnv: the Gymnasium environment.
    VerifierLike: what an env needs from a verifier.
    make_verifier: build the verifier a KernelEnv (or a vector of them) uses.
    LazyVerifier: the verifier an env uses: one passed in, or one built on first use and closed with the env.
    resolve_suite: a suite from its name or object, filtered by level, task ids and count.
    judge_with_retries: judge a batch, judging again the answers on which the judge itself failed.
    step_batch: step several KernelEnvs with one verifier batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from kernelgym.backends import backend_language
from kernelgym.envs.prompt import CODE_CHARSET, build_prompt, sanitize
from kernelgym.errors import TaskError
from kernelgym.executor import Verifier
from kernelgym.tasks import Task, TaskSuite, load_suite
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult, JudgeError

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_PROMPT_CHARS",
    "METRIC_NAMES",
    "SPEEDUP_CLIP",
    "KernelEnv",
    "LazyVerifier",
    "VerifierLike",
    "judge_with_retries",
    "make_verifier",
    "resolve_suite",
    "step_batch",
]

MAX_ACTION_CHARS = 100_000
MAX_PROMPT_CHARS = 1_000_000
SPEEDUP_CLIP = 1000.0
METRIC_NAMES = ("parsed", "legal", "compiled", "correct", "speedup", "score")


class VerifierLike(Protocol):
    """What a KernelEnv needs from a verifier (the real one, or a small fake in tests)."""

    def evaluate(self, task: Task, text: str) -> EvalResult:
        """Judge one answer."""
        ...

    def evaluate_many(self, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
        """Judge several answers as one batch, results in order."""
        ...

    def close(self) -> None:
        """Release workers."""
        ...


def make_verifier(
    backend: str,
    executor: str,
    config: VerifierConfig | None,
    num_workers: int | None,
    cache_dir: str | None,
    **executor_kwargs: object,
) -> VerifierLike:
    """Build the real verifier (its workers start at its first evaluation).

    ``executor_kwargs`` go to the executor (e.g. ``ray_address`` for ``executor="ray"``;
    without it Ray uses ``$RAY_ADDRESS`` or starts a local instance).

    Raises:
        BackendUnavailableError: the backend cannot run on this machine (raised by the verifier).
    """
    return Verifier(
        backend=backend, executor=executor, config=config, num_workers=num_workers, cache_dir=cache_dir, **executor_kwargs
    )


class LazyVerifier:
    """The verifier of an env: the one the caller passed in, or one built from settings at first use.

    Only a verifier built here is closed by :meth:`close`; one passed in belongs to the caller.
    Building is deferred so that constructing an env and resetting it stay cheap.

    Example:
        >>> handle = LazyVerifier(None, backend="cpp")
        >>> handle.built
        False
        >>> handle.close()
    """

    def __init__(
        self,
        given: VerifierLike | None,
        backend: str,
        executor: str = "local",
        config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | None = None,
        **executor_kwargs: object,
    ) -> None:
        self._verifier = given
        self._owned = given is None
        self._settings = dict(
            backend=backend, executor=executor, config=config, num_workers=num_workers, cache_dir=cache_dir,
            **executor_kwargs,
        )

    @property
    def built(self) -> bool:
        """Whether a verifier is at hand (passed in, or built already)."""
        return self._verifier is not None

    def get(self) -> VerifierLike:
        """The verifier, built now if it was neither passed in nor built before.

        Raises:
            BackendUnavailableError: the backend cannot run on this machine.
        """
        if self._verifier is None:
            self._verifier = make_verifier(**self._settings)  # type: ignore[arg-type]
        return self._verifier

    def close(self) -> None:
        """Close the verifier if it was built here (a passed-in one is left open)."""
        if self._owned and self._verifier is not None:
            self._verifier.close()
            self._verifier = None


def resolve_suite(
    suite: str | TaskSuite, level: int | None = None, *, task_ids: Sequence[str] = (), limit: int | None = None
) -> TaskSuite:
    """Load ``suite`` when given by name; keep the tasks of ``level``, then ``task_ids`` (empty: all), then the first ``limit``.

    Raises:
        TaskError: the suite cannot be loaded, an id names no task, or no task is left.

    Example:
        >>> resolve_suite("cpu", level=2, limit=1).ids()
        ['level2/1_Linear_ReLU']
    """
    if isinstance(suite, str):
        suite = load_suite(suite)
    chosen = suite.filter(level=level, limit=limit, ids=task_ids)
    if len(chosen) == 0:
        filters = [f"level {level}"] if level is not None else []
        filters += [f"limit {limit}"] if limit is not None else []
        raise TaskError(f"suite {suite.name!r} has no tasks" + (f" left after the filters ({', '.join(filters)})" if filters else ""))
    return chosen


class KernelEnv(gym.Env[dict[str, Any], str]):
    """Write a faster ``ModelNew`` for a PyTorch reference program, with the verifier's feedback after each try.

    Action: the answer text (``spaces.Text`` over :data:`~kernelgym.envs.prompt.CODE_CHARSET`);
    any ``str`` is accepted, characters outside the charset included.

    Observation (``spaces.Dict``):
        ``prompt``: the task prompt (reference code, target, ``ModelNew`` contract, rules).
        ``feedback``: the latest verifier feedback ("" before the first attempt), sanitised and
        cut to ``max_feedback_chars`` keeping head and tail.
        ``turn``: attempts made so far in this episode (``Discrete(max_turns + 1)``).
        ``metrics``: float32 ``[parsed, legal, compiled, correct, speedup, score]`` of the latest
        attempt (speedup 0 when not timed, clipped to :data:`SPEEDUP_CLIP`).

    Info: ``task_id``, ``turn``, ``score``, ``status`` ("" before the first attempt) and, after a
    step, ``result``: the full :class:`~kernelgym.verifier.result.EvalResult` as a dict.

    Reward: the attempt's score. ``terminated`` when the attempt is legal, correct and at least
    ``success_speedup`` times as fast as the reference (an untimed correct answer counts as
    speedup 0); ``truncated`` when ``max_turns`` attempts were used without success.

    Args:
        suite: a suite name for :func:`kernelgym.tasks.load_suite` (``"cpu"``, ``"gpu"``,
            ``"kernelbench:<dir-or-parquet>"``) or a :class:`TaskSuite`.
        backend: the target backend (``"cpp"``, ``"cuda"``, ``"triton"``, ``"musa"``).
        executor: where candidates run (``"local"``, the embedded default, or ``"ray"``).
        max_turns: attempts per episode.
        success_speedup: speedup an attempt needs to end the episode (0 means: correct is enough).
        verifier: an object with ``evaluate``/``evaluate_many`` to use instead of building one
            (not closed by :meth:`close`).
        verifier_config: settings of the verifier this env builds.
        num_workers: worker processes of the verifier this env builds (``None``: its default).
        cache_dir: build cache directory of the verifier this env builds (``None``: its default).
        level: keep only the tasks of this KernelBench level.
        render_mode: ``None`` or ``"ansi"``.
        max_feedback_chars: longest ``feedback`` observation.
        judge_retries: times an answer is judged again when the judge itself failed on it
            (status ``judge_error``); still failing, :meth:`step` raises
            :class:`~kernelgym.verifier.result.JudgeError` and the turn is not used, since a judge
            error says nothing about the answer and is never paid out as a reward.

    The real verifier is built at the first :meth:`step`, so construction and :meth:`reset` are
    cheap; a backend this machine cannot run raises ``BackendUnavailableError`` there.

    Example:
        >>> import gymnasium as gym
        >>> import kernelgym  # registers the environments
        >>> env = gym.make("kernelgym/CPU-v0", max_turns=2)
        >>> obs, info = env.reset(seed=0, options={"task_id": "level1/1_ReLU"})
        >>> info["task_id"], obs["turn"], "ModelNew" in obs["prompt"]
        ('level1/1_ReLU', 0, True)
        >>> obs, reward, terminated, truncated, info = env.step("no code here")
        >>> info["status"], reward, terminated, truncated
        ('format_error', 0.0, False, False)
        >>> env.close()
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        suite: str | TaskSuite = "cpu",
        backend: str = "cpp",
        executor: str = "local",
        max_turns: int = 4,
        success_speedup: float = 1.0,
        verifier: VerifierLike | None = None,
        verifier_config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | None = None,
        level: int | None = None,
        render_mode: str | None = None,
        max_feedback_chars: int = 4000,
        judge_retries: int = 2,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if judge_retries < 0:
            raise ValueError("judge_retries must be at least 0")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, not {render_mode!r}")
        self.suite = resolve_suite(suite, level)
        self.backend = backend
        self.executor = executor
        self.max_turns = max_turns
        self.success_speedup = success_speedup
        self.verifier_config = verifier_config
        self.num_workers = num_workers
        self.cache_dir = cache_dir
        self.render_mode = render_mode
        self.max_feedback_chars = max_feedback_chars
        self.judge_retries = judge_retries
        self._verifier = LazyVerifier(verifier, backend, executor, verifier_config, num_workers, cache_dir)
        self._language: str | None = None

        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CODE_CHARSET)
        high = np.array([1, 1, 1, 1, SPEEDUP_CLIP, 1], dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "prompt": spaces.Text(MAX_PROMPT_CHARS, min_length=0, charset=CODE_CHARSET),
                "feedback": spaces.Text(max_feedback_chars, min_length=0, charset=CODE_CHARSET),
                "turn": spaces.Discrete(max_turns + 1),
                "metrics": spaces.Box(low=np.zeros(6, dtype=np.float32), high=high, dtype=np.float32),
            }
        )

        self._task: Task | None = None
        self._prompt = ""
        self._turn = 0
        self._result: EvalResult | None = None
        self._episode_over = False

    @property
    def task(self) -> Task | None:
        """The task of the current episode (``None`` before the first reset)."""
        return self._task

    @property
    def verifier(self) -> VerifierLike:
        """The verifier, built on first use unless one was given."""
        return self._verifier.get()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode on a task: ``options={"task_id": ...}`` or one drawn with ``self.np_random``.

        Raises:
            TaskError: ``task_id`` names no task of the suite.
        """
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            self._task = self.suite.tasks[int(self.np_random.integers(len(self.suite)))]
        else:
            self._task = self.suite[task_id]
        if self._language is None:
            self._language = backend_language(self.backend)
        self._prompt = sanitize(build_prompt(self._task, self._language), MAX_PROMPT_CHARS)
        self._turn = 0
        self._result = None
        self._episode_over = False
        return self._observation(), self._info()

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Submit one answer; the verifier judges it and the episode moves one turn on.

        Raises:
            gymnasium.error.ResetNeeded: no episode is running (call :meth:`reset`).
            TypeError: ``action`` is not a ``str``.
            JudgeError: the judge failed on the answer ``judge_retries + 1`` times; the episode is
                where it was, so the same answer may be stepped again.
        """
        task = self.begin_attempt(action)
        result = self.verifier.evaluate(task, action)
        if result.judge_error and self.judge_retries:
            result = judge_with_retries(self.verifier, [(task, action)], self.judge_retries - 1)[0]
        return self.finish_attempt(result)

    def begin_attempt(self, action: str) -> Task:
        """Validate a step's action and return the task it answers (the first half of :meth:`step`).

        Batched callers (:class:`~kernelgym.envs.vector.KernelVectorEnv`) judge the answers of
        several envs at once, then hand each result to :meth:`finish_attempt`.
        """
        if self._task is None or self._episode_over:
            raise gym.error.ResetNeeded("the episode is over or was never started: call reset() before step()")
        if not isinstance(action, str):
            raise TypeError(f"a KernelEnv action is the answer text (str), not {type(action).__name__}")
        return self._task

    def finish_attempt(self, result: EvalResult) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Record the verifier's result of the attempt begun with :meth:`begin_attempt`; return the step tuple.

        Raises:
            JudgeError: ``result`` is a judge error (nothing is recorded: it is no verdict on the answer).
        """
        if result.judge_error:
            raise JudgeError(result)
        self._turn += 1
        self._result = result
        speedup = result.speedup if result.speedup is not None else 0.0
        terminated = bool(result.legal and result.correct and speedup >= self.success_speedup)
        truncated = not terminated and self._turn >= self.max_turns
        self._episode_over = terminated or truncated
        return self._observation(), float(result.score), terminated, truncated, self._info()

    def render(self) -> str | None:
        """The episode so far as text (``render_mode="ansi"``)."""
        if self.render_mode is None:
            gym.logger.warn("KernelEnv.render() needs render_mode='ansi'")
            return None
        task_id = self._task.id if self._task is not None else "(no task: call reset())"
        lines = [f"task {task_id}  backend {self.backend}  turn {self._turn}/{self.max_turns}"]
        if self._result is None:
            lines.append("no attempt yet")
        else:
            speedup = "n/a" if self._result.speedup is None else f"{self._result.speedup:.2f}x"
            lines.append(f"status {self._result.status}  score {self._result.score:.3f}  speedup {speedup}")
            lines.append(sanitize(self._result.feedback, self.max_feedback_chars))
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        """Close the verifier this env built (one that was passed in is left open)."""
        self._verifier.close()
        super().close()

    def _observation(self) -> dict[str, Any]:
        result = self._result
        if result is None:
            feedback, metrics = "", np.zeros(6, dtype=np.float32)
        else:
            feedback = sanitize(result.feedback, self.max_feedback_chars)
            speedup = min(result.speedup or 0.0, SPEEDUP_CLIP)
            values = (result.parsed, result.legal, result.compiled, result.correct, max(speedup, 0.0), result.score)
            metrics = np.array(values, dtype=np.float32)
        return {"prompt": self._prompt, "feedback": feedback, "turn": self._turn, "metrics": metrics}

    def _info(self) -> dict[str, Any]:
        assert self._task is not None
        info: dict[str, Any] = {"task_id": self._task.id, "turn": self._turn}
        if self._result is None:
            info.update(score=0.0, status="")
        else:
            info.update(score=float(self._result.score), status=self._result.status.value, result=self._result.to_dict())
        return info


StepTuple = tuple[dict[str, Any], float, bool, bool, dict[str, Any]]


def _evaluate_many(verifier: VerifierLike, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
    results = verifier.evaluate_many(pairs) if pairs else []
    if len(results) != len(pairs):
        raise RuntimeError(f"the verifier returned {len(results)} results for {len(pairs)} answers")
    return list(results)


def judge_with_retries(verifier: VerifierLike, pairs: list[tuple[Task, str]], retries: int) -> list[EvalResult]:
    """Judge ``pairs`` as one batch, then judge again, up to ``retries`` times, the answers whose result is a judge error.

    Returns:
        One result per pair, in order; a judge error only where every try was one.

    Raises:
        RuntimeError: the verifier returned another number of results than answers.
    """
    results = _evaluate_many(verifier, pairs)
    for _ in range(retries):
        again = [index for index, result in enumerate(results) if result.judge_error]
        if not again:
            break
        for index, result in zip(again, _evaluate_many(verifier, [pairs[i] for i in again]), strict=True):
            results[index] = result
    return results


def step_batch(
    envs: Sequence[KernelEnv], actions: Sequence[str], verifier: VerifierLike, *, keep_judge_errors: bool = False
) -> list[tuple[EvalResult, StepTuple | None]]:
    """Step each env with its action, judging all the answers as one ``evaluate_many`` batch.

    An answer on which the judge itself failed is judged again, up to the envs' fewest ``judge_retries``.

    Args:
        keep_judge_errors: for an answer still a judge error, return ``(result, None)`` and leave its env
            where it was, instead of raising (the benchmark records it and judges it again on resume).

    Returns:
        For each env, in order: the verifier's result and the env's step tuple (``None`` for a kept judge error).

    Raises:
        RuntimeError: the verifier returned another number of results than answers.
        JudgeError: an answer was still a judge error after the retries (no env was stepped).
        gymnasium.error.ResetNeeded, TypeError: as :meth:`KernelEnv.step`.
    """
    pairs = [(env.begin_attempt(action), action) for env, action in zip(envs, actions, strict=True)]
    results = judge_with_retries(verifier, pairs, min((env.judge_retries for env in envs), default=0))
    failed = next((result for result in results if result.judge_error), None)
    if failed is not None and not keep_judge_errors:
        raise JudgeError(failed)
    return [(result, None if result.judge_error else env.finish_attempt(result))
            for env, result in zip(envs, results, strict=True)]
