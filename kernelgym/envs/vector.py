"""A batched vector of KernelEnvs: all answers of one step go to the verifier as one batch.

Holds:
    KernelVectorEnv: ``gym.make_vec("kernelgym/CPU-v0", num_envs=N)`` returns one.

Stepping N :class:`~kernelgym.envs.kernel_env.KernelEnv` one after the other
builds one candidate at a time; here the N answers of a step are handed to
``verifier.evaluate_many`` together, so the executor builds and checks them in
parallel. Everything else follows :class:`gymnasium.vector.SyncVectorEnv`
exactly: seeds, ``reset_mask``, next-step autoreset, info batching.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from kernelgym.envs.kernel_env import KernelEnv, LazyVerifier, VerifierLike, resolve_suite, step_batch
from kernelgym.tasks.task import TaskSuite
from kernelgym.verifier.config import VerifierConfig

__all__ = ["KernelVectorEnv"]


class KernelVectorEnv(VectorEnv):
    """N KernelEnv states sharing one verifier, which judges each step's N answers as one batch.

    Autoreset is ``AutoresetMode.NEXT_STEP`` (declared in ``metadata``): the step after a
    sub-environment terminated or truncated resets it, with reward 0 and its action ignored.
    Observations are batched as Gymnasium batches a Dict of Text/Discrete/Box: tuples of
    strings for ``prompt`` and ``feedback``, arrays for ``turn`` and ``metrics``.

    Besides Gymnasium's ``reset_mask``, ``reset`` takes ``options={"task_ids": [...]}``: one task
    id per sub-environment (``{"task_id": ...}`` gives every sub-environment the same task).

    Args:
        num_envs: number of sub-environments.
        suite: as for :class:`KernelEnv`; loaded once and shared.
        backend: as for :class:`KernelEnv`.
        executor: as for :class:`KernelEnv`.
        verifier: a verifier to share instead of building one (not closed by :meth:`close`).
        verifier_config: settings of the verifier this vector builds.
        num_workers: worker processes of the verifier this vector builds.
        cache_dir: build cache directory of the verifier this vector builds.
        level: keep only the tasks of this level.
        render_mode: ``None`` or ``"ansi"``.
        **env_kwargs: ``max_turns``, ``success_speedup``, ``max_feedback_chars``.

    Example:
        >>> import gymnasium as gym
        >>> import kernelgym  # registers the environments
        >>> envs = gym.make_vec("kernelgym/CPU-v0", num_envs=2, max_turns=2)
        >>> obs, infos = envs.reset(seed=0, options={"task_id": "level1/1_ReLU"})
        >>> obs["turn"].tolist(), len(obs["prompt"])
        ([0, 0], 2)
        >>> obs, rewards, terminated, truncated, infos = envs.step(("no code", "still none"))
        >>> infos["status"].tolist(), rewards.tolist()
        (['format_error', 'format_error'], [0.0, 0.0])
        >>> envs.close()
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 1, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 1,
        suite: str | TaskSuite = "cpu",
        backend: str = "cpp",
        executor: str = "local",
        verifier: VerifierLike | None = None,
        verifier_config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | None = None,
        level: int | None = None,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if num_envs < 1:
            raise ValueError("num_envs must be at least 1")
        shared_suite = resolve_suite(suite, level)
        self.envs = [
            KernelEnv(shared_suite, backend=backend, executor=executor, render_mode=render_mode, **env_kwargs)
            for _ in range(num_envs)
        ]
        self.num_envs = num_envs
        self.backend = backend
        self.executor = executor
        self.verifier_config = verifier_config
        self.num_workers = num_workers
        self.cache_dir = cache_dir
        self.render_mode = render_mode
        self._verifier = LazyVerifier(verifier, backend, executor, verifier_config, num_workers, cache_dir)

        self.single_action_space = self.envs[0].action_space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.single_observation_space = self.envs[0].observation_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)

        self._env_obs: list[dict[str, Any] | None] = [None] * num_envs
        self._autoreset_envs = np.zeros(num_envs, dtype=np.bool_)

    @property
    def verifier(self) -> VerifierLike:
        """The shared verifier, built on first use unless one was given."""
        return self._verifier.get()

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """The seeds of the sub-environments' generators."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """The sub-environments' generators."""
        return self.get_attr("np_random")

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset the sub-environments (all, or those in ``options["reset_mask"]``).

        Args:
            seed: ``None``, an int (sub-environment ``i`` gets ``seed + i``) or one seed per sub-environment.
            options: passed to every sub-environment's reset, except ``reset_mask`` (a bool array
                choosing which to reset) and ``task_ids`` (one task id per sub-environment).

        Raises:
            ValueError: seeds, ``task_ids`` or ``reset_mask`` do not match ``num_envs``.
        """
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} environments")
        options = dict(options or {})
        mask = self._reset_mask(options.pop("reset_mask", None))
        task_ids = options.pop("task_ids", None)
        if task_ids is not None and len(task_ids) != self.num_envs:
            raise ValueError(f"got {len(task_ids)} task_ids for {self.num_envs} environments")

        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if not mask[i]:
                continue
            env_options = options if task_ids is None else {**options, "task_id": task_ids[i]}
            self._env_obs[i], env_info = env.reset(seed=seeds[i], options=env_options)
            self._autoreset_envs[i] = False
            infos = self._add_info(infos, env_info, i)
        return self._batched_observations(), infos

    def step(
        self, actions: Sequence[str]
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-environment; the answers of those not autoresetting are judged as one batch.

        Args:
            actions: one answer text per sub-environment.

        Raises:
            ValueError: not one action per sub-environment.
        """
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for {self.num_envs} environments")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        env_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

        attempting = []
        for i, env in enumerate(self.envs):
            if self._autoreset_envs[i]:
                self._env_obs[i], env_infos[i] = env.reset()
            else:
                attempting.append(i)
        stepped = step_batch([self.envs[i] for i in attempting], [actions[i] for i in attempting], self.verifier)
        for i, (_, step) in zip(attempting, stepped, strict=True):
            self._env_obs[i], rewards[i], terminations[i], truncations[i], env_infos[i] = step

        infos: dict[str, Any] = {}
        for i, env_info in enumerate(env_infos):
            infos = self._add_info(infos, env_info, i)
        self._autoreset_envs = np.logical_or(terminations, truncations)
        return self._batched_observations(), rewards, terminations, truncations, infos

    def render(self) -> tuple[str | None, ...]:
        """Each sub-environment's rendering."""
        return tuple(env.render() for env in self.envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every sub-environment (or read it, if it is not callable)."""
        results = []
        for env in self.envs:
            attribute = env.get_wrapper_attr(name)
            results.append(attribute(*args, **kwargs) if callable(attribute) else attribute)
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every sub-environment."""
        return self.call(name)

    def set_attr(self, name: str, values: Sequence[Any] | Any) -> None:
        """Set attribute ``name`` of the sub-environments (one value each, or one for all)."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"got {len(values)} values for {self.num_envs} environments")
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def close_extras(self, **kwargs: Any) -> None:
        """Close the sub-environments and the verifier this vector built."""
        for env in self.envs:
            env.close()
        self._verifier.close()

    def _reset_mask(self, mask: np.ndarray | None) -> np.ndarray:
        if mask is None:
            return np.ones(self.num_envs, dtype=np.bool_)
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must be a bool numpy array of shape ({self.num_envs},)")
        if not mask.any():
            raise ValueError("options['reset_mask'] must select at least one environment")
        return mask

    def _batched_observations(self) -> dict[str, Any]:
        if any(obs is None for obs in self._env_obs):
            raise ValueError("every sub-environment must be reset once before a masked reset or a step")
        empty = create_empty_array(self.single_observation_space, n=self.num_envs, fn=np.zeros)
        return concatenate(self.single_observation_space, self._env_obs, empty)
