"""The discrete-action tuning environment: choose a templated kernel's parameters, get its measured speed back.

Holds:
    TUNE_ENV_IDS: the registered ids (from ``registration``).
    MAX_DIMS: how many problem dimensions the ``dims`` observation holds.
    KernelTuneEnv: the Gymnasium environment (``MultiDiscrete`` actions, ``Dict`` of ``Box`` observations).
    MultiDiscreteToDiscrete: an action wrapper that numbers every configuration (for DQN and other
        ``Discrete``-only algorithms).
    tune_reward: the reward of one configuration from its verifier results.
    mean_step_reward: the mean reward per step of a policy over seeded episodes.
    register_tune_envs: register ``kernelgym/Tune-CPU-v0`` and ``kernelgym/Tune-GPU-v0`` (from ``registration``).

Each configuration is rendered from a :class:`~kernelgym.envs.templates.KernelTemplate` into a full
answer program and judged by the same verifier as a text answer: built (once: the content-addressed
build cache serves every revisit), checked for correctness and timed against the reference.
"""

from __future__ import annotations

import ast
import copy
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from kernelgym.backends import get_backend
from kernelgym.envs.kernel_env import LazyVerifier, VerifierLike
from kernelgym.envs.registration import TUNE_ENV_IDS, register_tune_envs
from kernelgym.envs.templates import KernelTemplate, get_template, templates_for
from kernelgym.errors import BackendUnavailableError, TaskError
from kernelgym.tasks import Task, load_suite
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult

__all__ = [
    "MAX_DIMS",
    "TUNE_ENV_IDS",
    "KernelTuneEnv",
    "MultiDiscreteToDiscrete",
    "mean_step_reward",
    "register_tune_envs",
    "tune_reward",
]

MAX_DIMS = 4
_MAX_LOG_DIM = 64.0


def tune_reward(results: Sequence[EvalResult], clip: float, penalty: float) -> tuple[float, float | None]:
    """The reward of one configuration judged ``len(results)`` times, and its median speedup.

    Any result that is not ``ok`` (build failure, wrong output, crash, timeout, rule broken) makes
    the configuration fail: ``(penalty, None)``. Otherwise the reward is
    ``clip(log(median speedup), -clip, clip)``; a correct configuration that could not be timed
    meaningfully earns 0 (``log 1``).

    Example:
        >>> from kernelgym.verifier import EvalResult, Status
        >>> ok = [EvalResult("t", "cpp", Status.OK, correct=True, speedup_eager=s) for s in (0.5, 2.0, 4.0)]
        >>> round(tune_reward(ok, clip=1.0, penalty=-2.0)[0], 3), tune_reward(ok, 1.0, -2.0)[1]
        (0.693, 2.0)
        >>> tune_reward([EvalResult("t", "cpp", Status.COMPILE_ERROR)], clip=1.0, penalty=-2.0)
        (-2.0, None)
    """
    if not results or not all(r.ok for r in results):
        return penalty, None
    speedups = [r.speedup for r in results if r.speedup is not None and r.speedup > 0]
    if len(speedups) < len(results):
        return 0.0, None
    speedup = statistics.median(speedups)
    return float(min(max(math.log(speedup), -clip), clip)), float(speedup)


def _problem_dims(task: Task, names: Sequence[str]) -> np.ndarray:
    """``log2(1 + size)`` of the task's module-level integer sizes ``names``, padded to :data:`MAX_DIMS`."""
    sizes: dict[str, int] = {}
    for node in ast.parse(task.source).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            sizes[node.targets[0].id] = node.value.value
    missing = [n for n in names if n not in sizes]
    if missing or len(names) > MAX_DIMS:
        raise TaskError(f"task {task.id!r} does not define the integer sizes {missing} its template names")
    dims = np.zeros(MAX_DIMS, dtype=np.float32)
    dims[: len(names)] = [min(math.log2(1 + sizes[n]), _MAX_LOG_DIM) for n in names]
    return dims


class KernelTuneEnv(gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Tune the parameters of a templated kernel for one task; the reward is its measured speed.

    Action: ``MultiDiscrete(template.nvec)``, one value index per template parameter (tile and
    block sizes, unroll factor, loop order, OpenMP schedule for C++; block sizes, ``num_warps``,
    ``num_stages`` for Triton). ``info["config"]`` names the chosen values.

    Observation (``spaces.Dict`` of float32 ``Box`` es):
        ``dims``: ``log2(1 + size)`` of the task's problem dimensions, padded with zeros to :data:`MAX_DIMS`.
        ``config``: the last configuration, each index scaled to ``[0, 1]`` (zeros before the first step).
        ``status``: ``[compiled, correct]`` of the last configuration.
        ``log_speedup``: the last configuration's clipped log speedup (0 when it failed or was not timed).
        ``step``: steps taken in this episode / ``max_steps``.

    Reward: :func:`tune_reward` — ``clip(log(speedup), -reward_clip, reward_clip)`` of the median
    speedup over ``repeats`` independent evaluations of the configuration, each itself the ratio of
    the verifier's median timings (``VerifierConfig.warmup``/``runs``); ``failure_penalty`` when any
    evaluation is not ``ok``. An episode is ``max_steps`` tuning steps: ``truncated`` then, never
    ``terminated``.

    Args:
        task_id: a task that has a template for ``backend`` (default: the backend's first template).
        backend: ``"cpp"`` (bundled ``cpu`` suite) or ``"triton"`` (bundled ``gpu`` suite).
        max_steps: tuning steps per episode.
        repeats: independent evaluations per step; the reward uses their median speedup.
        reward_clip: bound of the log speedup (the default 3 tells 0.05x to 20x apart).
        failure_penalty: reward of a configuration that fails to build, run or be correct (the
            default is below every clipped log speedup).
        executor: where candidates run (``"local"`` or ``"ray"``), for the verifier this env builds.
        verifier: an object with ``evaluate``/``evaluate_many`` to use instead (not closed by :meth:`close`).
        verifier_config: settings of the verifier this env builds (timing: ``warmup``, ``runs``).
        num_workers: worker processes of the verifier this env builds (builds in :meth:`prebuild` run in parallel).
        cache_dir: build cache directory of the verifier this env builds.
        render_mode: ``None`` or ``"ansi"``.

    Raises:
        TaskError: no template for ``task_id`` and ``backend``.

    The real verifier is built at the first :meth:`step` or :meth:`prebuild`; a backend whose
    timings mean nothing here (Triton's interpreter on a machine without a GPU) raises
    ``BackendUnavailableError`` there.

    Example:
        >>> import gymnasium as gym
        >>> import kernelgym.envs.tune_env as tune
        >>> tune.register_tune_envs()
        >>> env = gym.make("kernelgym/Tune-CPU-v0", task_id="level1/14_Small_Matmul", max_steps=4)
        >>> env.action_space
        MultiDiscrete([3 3])
        >>> obs, info = env.reset(seed=0)
        >>> sorted(obs), [round(float(d), 2) for d in obs["dims"]]
        (['config', 'dims', 'log_speedup', 'status', 'step'], [7.01, 7.01, 7.01, 0.0])
        >>> env.unwrapped.template.config([1, 2])
        {'ORDER': 'ikj', 'TILE': 128}
        >>> env.close()
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        task_id: str | None = None,
        backend: str = "cpp",
        max_steps: int = 8,
        repeats: int = 1,
        reward_clip: float = 3.0,
        failure_penalty: float = -4.0,
        executor: str = "local",
        verifier: VerifierLike | None = None,
        verifier_config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        if max_steps < 1 or repeats < 1:
            raise ValueError("max_steps and repeats must be at least 1")
        if reward_clip <= 0:
            raise ValueError("reward_clip must be positive")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, not {render_mode!r}")
        if task_id is None:
            available = templates_for(backend)
            if not available:
                raise TaskError(f"no tuning templates for backend {backend!r}")
            task_id = available[0].task_id
        self.template: KernelTemplate = get_template(task_id, backend)
        self.task: Task = load_suite(self.template.suite)[task_id]
        self.backend = backend
        self.max_steps = max_steps
        self.repeats = repeats
        self.reward_clip = float(reward_clip)
        self.failure_penalty = float(failure_penalty)
        self.executor = executor
        self.verifier_config = verifier_config
        self.num_workers = num_workers
        self.cache_dir = cache_dir
        self.render_mode = render_mode
        self._verifier = LazyVerifier(verifier, backend, executor, verifier_config, num_workers, cache_dir)
        self._dims = _problem_dims(self.task, self.template.dims)
        self._scale = np.array([max(n - 1, 1) for n in self.template.nvec], dtype=np.float32)

        n_params = len(self.template.params)
        self.action_space = spaces.MultiDiscrete(np.array(self.template.nvec, dtype=np.int64))
        self.observation_space = spaces.Dict(
            {
                "dims": spaces.Box(0.0, _MAX_LOG_DIM, (MAX_DIMS,), dtype=np.float32),
                "config": spaces.Box(0.0, 1.0, (n_params,), dtype=np.float32),
                "status": spaces.Box(0.0, 1.0, (2,), dtype=np.float32),
                "log_speedup": spaces.Box(-self.reward_clip, self.reward_clip, (1,), dtype=np.float32),
                "step": spaces.Box(0.0, 1.0, (1,), dtype=np.float32),
            }
        )

        self._steps = 0
        self._episode_over = True
        self._last: dict[str, Any] | None = None
        self._best: tuple[float, dict[str, Any]] | None = None

    @property
    def verifier(self) -> VerifierLike:
        """The verifier, built on first use unless one was given.

        Raises:
            BackendUnavailableError: the backend cannot run here, or its timings mean nothing here.
        """
        if not self._verifier.built:
            backend = get_backend(self.backend)
            if not backend.timing_meaningful:
                raise BackendUnavailableError(
                    f"backend {self.backend!r} cannot time kernels on this machine (no GPU: Triton's interpreter), "
                    "so tuning rewards would mean nothing; run kernelgym/Tune-GPU-v0 on a CUDA GPU"
                )
        return self._verifier.get()

    def prebuild(self) -> list[EvalResult]:
        """Judge every configuration of the grid once, as one batch (builds run in parallel).

        Afterwards every step is a build-cache hit plus checking and timing. Returns the results in
        the order of :meth:`KernelTemplate.grid`.
        """
        pairs = [(self.task, self.template.render(c)) for c in self.template.grid()]
        return self.verifier.evaluate_many(pairs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode of ``max_steps`` tuning steps on the env's task (``options`` are not used)."""
        super().reset(seed=seed)
        self._steps = 0
        self._episode_over = False
        self._last = None
        self._best = None
        return self._observation(), self._info()

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Build (or fetch), check and time the configuration ``action``; return its reward.

        Raises:
            gymnasium.error.ResetNeeded: no episode is running (call :meth:`reset`).
            KernelGymError: ``action`` is not a configuration of the grid.
        """
        if self._episode_over:
            raise gym.error.ResetNeeded("the episode is over or was never started: call reset() before step()")
        indices = tuple(int(a) for a in np.asarray(action).reshape(-1))
        code = self.template.render(indices)
        results = [self.verifier.evaluate(self.task, code) for _ in range(self.repeats)]
        reward, speedup = tune_reward(results, self.reward_clip, self.failure_penalty)
        failed = next((r for r in results if not r.ok), None)
        shown = failed or results[0]
        self._steps += 1
        self._last = {
            "indices": indices,
            "config": self.template.config(indices),
            "status": shown.status.value,
            "compiled": all(r.compiled for r in results),
            "correct": all(r.correct for r in results),
            "speedup": speedup,
            "speedups": [r.speedup for r in results],
            "log_speedup": reward if failed is None else 0.0,
            "cache_hit": all(r.cache_hit for r in results),
            "feedback": shown.feedback,
        }
        if speedup is not None and (self._best is None or speedup > self._best[0]):
            self._best = (speedup, self._last["config"])
        truncated = self._steps >= self.max_steps
        self._episode_over = truncated
        return self._observation(), float(reward), False, truncated, self._info()

    def render(self) -> str | None:
        """The episode so far as text (``render_mode="ansi"``)."""
        if self.render_mode is None:
            gym.logger.warn("KernelTuneEnv.render() needs render_mode='ansi'")
            return None
        lines = [f"task {self.task.id}  backend {self.backend}  step {self._steps}/{self.max_steps}"]
        if self._last is None:
            lines.append("no configuration tried yet")
        else:
            speedup = "n/a" if self._last["speedup"] is None else f"{self._last['speedup']:.3f}x"
            lines.append(f"config {self._last['config']}  status {self._last['status']}  speedup {speedup}")
        if self._best is not None:
            lines.append(f"best so far {self._best[0]:.3f}x with {self._best[1]}")
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        """Close the verifier this env built (one that was passed in is left open)."""
        self._verifier.close()
        super().close()

    def _observation(self) -> dict[str, np.ndarray]:
        last = self._last
        config = np.zeros(len(self.template.params), dtype=np.float32)
        status = np.zeros(2, dtype=np.float32)
        log_speedup = np.zeros(1, dtype=np.float32)
        if last is not None:
            config = np.asarray(last["indices"], dtype=np.float32) / self._scale
            status = np.array([last["compiled"], last["correct"]], dtype=np.float32)
            log_speedup[0] = last["log_speedup"]
        return {
            "dims": self._dims.copy(),
            "config": config,
            "status": status,
            "log_speedup": log_speedup,
            "step": np.array([self._steps / self.max_steps], dtype=np.float32),
        }

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": self.task.id, "step": self._steps}
        if self._last is not None:
            info.update({k: v for k, v in self._last.items() if k != "indices"})
        if self._best is not None:
            info.update(best_speedup=self._best[0], best_config=self._best[1])
        # Callers keep infos: each one gets its own dicts and lists.
        return copy.deepcopy(info)


class MultiDiscreteToDiscrete(
    gym.ActionWrapper[dict[str, np.ndarray], int, np.ndarray], gym.utils.RecordConstructorArgs
):
    """Number every configuration of a ``MultiDiscrete`` action space: ``Discrete(prod(nvec))``.

    Action ``a`` is unravelled in C order (the last parameter varies fastest), which is the order of
    :meth:`KernelTemplate.grid`; DQN and other ``Discrete``-only algorithms can then tune.

    Example:
        >>> import gymnasium as gym
        >>> import kernelgym.envs.tune_env as tune
        >>> tune.register_tune_envs()
        >>> env = MultiDiscreteToDiscrete(gym.make("kernelgym/Tune-CPU-v0", task_id="level1/14_Small_Matmul"))
        >>> env.action_space, env.action(5).tolist()
        (Discrete(9), [1, 2])
        >>> env.close()
    """

    def __init__(self, env: gym.Env[dict[str, np.ndarray], np.ndarray]) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ActionWrapper.__init__(self, env)
        if not isinstance(env.action_space, spaces.MultiDiscrete):
            raise TypeError(f"MultiDiscreteToDiscrete needs a MultiDiscrete action space, not {env.action_space}")
        self.nvec = tuple(int(n) for n in env.action_space.nvec.reshape(-1))
        self.action_space = spaces.Discrete(int(np.prod(self.nvec)))

    def action(self, action: int) -> np.ndarray:
        """The ``MultiDiscrete`` configuration numbered ``action``."""
        return np.array(np.unravel_index(int(action), self.nvec), dtype=np.int64)


def mean_step_reward(env: gym.Env[Any, Any], policy: Callable[[Any], Any], episodes: int, seed: int) -> float:
    """Mean reward per step of ``policy(obs) -> action`` over ``episodes`` episodes seeded ``seed``, ``seed + 1``, ...

    Two policies compared on the same seeds see the same episode starts.

    Example:
        >>> env = gym.make("CartPole-v1")
        >>> mean_step_reward(env, lambda obs: 0, episodes=2, seed=0)
        1.0
    """
    rewards: list[float] = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            rewards.append(float(reward))
            done = terminated or truncated
    return float(np.mean(rewards))
