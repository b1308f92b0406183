"""Buffered Dynamic Retry for verl's v1 trainer: hopeless GRPO groups come back as repair tasks.

Holds:
    RetrySettings: the sampler's settings (``trainer.v1.sampler.sampler_kwargs``).
    BufferedDynamicRetrySampler: a verl v1 ``ReplayBuffer`` (``trainer.v1.sampler.custom_sampler``).
    RetryDataset: verl's ``RLHFDataset`` that serves repair rows from the sampler's buffer (``data.custom_cls``).
    repair_row: turn a dataset row into the row of a repair task (its failed attempt shortened to fit, given ``fits``).
    prompt_fits: whether chat messages fit a rollout's prompt length, in tokens.
    active_sampler: the sampler this process built last (``None`` before).

How the pieces meet. The sampler and the train dataset live in the trainer
process. When a group of ``rollout.n`` trajectories finishes, the sampler reads
each trajectory's :class:`~kernelgym.training.agent_loop.TrajectoryOutcome`.
A fresh group in which no attempt was legal and correct gives GRPO no signal: its
most advanced failure (:func:`~kernelgym.wrappers.retry.most_advanced_failure`)
becomes a :class:`~kernelgym.wrappers.retry.RepairTask` pushed into a
:class:`~kernelgym.wrappers.retry.RetryBuffer` (the one the Gymnasium wrapper
uses), and the group is evicted from the batch and replaced through verl's
``refill_fn``, as verl's dynamic sampling does. Every row the dataset serves for
training becomes, with probability ``mix_ratio`` while the buffer is not empty,
a repair row: the task, the failed attempt and its feedback (the attempt's middle
left out where the whole would not fit ``data.max_prompt_length``). A repair group that
succeeds counts as recovered; one that fails is re-buffered with its newest
failure until ``max_retries``, then dropped. Each step reports the buffer
counters as ``kernelgym/retry/*``.

Settings verl needs for it: ``trainer.v1.trainer_mode=sync``,
``data.dataloader_num_workers=0`` (the dataset must run in the trainer process),
``data.gen_batch_size=1`` (refills come one prompt at a time), rows with
``extra_info.split == "train"`` (only those are mixed; ``kernelgym train`` writes them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils.dataset.rl_dataset import RLHFDataset

from kernelgym.errors import KernelGymError
from kernelgym.training.agent_loop import OUTCOME_FIELD, TrajectoryOutcome
from kernelgym.wrappers.retry import RepairTask, RetryBuffer, most_advanced_failure, repair_prompt, shorten_attempt

__all__ = ["BufferedDynamicRetrySampler", "RetryDataset", "RetrySettings", "active_sampler", "prompt_fits", "repair_row"]

REPAIR_FIELD = "repair"
TRAIN_SPLIT = "train"
# The parent's group-filtering loop (evict k, refill) runs only while a filter metric is set.
_FILTER_METRIC = "kernelgym_unsolved"

# One trainer per process builds one sampler; the slot holds the latest.
_active: list[BufferedDynamicRetrySampler] = []


def active_sampler() -> BufferedDynamicRetrySampler | None:
    """The Buffered Dynamic Retry sampler built last in this process, if any."""
    return _active[0] if _active else None


@dataclass(frozen=True)
class RetrySettings:
    """Settings of :class:`BufferedDynamicRetrySampler` (keys of ``trainer.v1.sampler.sampler_kwargs``).

    Attributes:
        train_batch_size: prompts per training batch (``${data.train_batch_size}``).
        capacity: the most repair tasks buffered.
        mix_ratio: probability that a training row is replaced by a repair task, in ``[0, 1]``.
        max_retries: re-bufferings of a failing repair task before it is dropped.
        seed: seed of the mixing draws.
        gen_batch_size: prompts per refill call; must equal ``data.gen_batch_size``.
        max_inflight_gen_batches: refill batches allowed in flight at once.
        max_evictions_per_step: hopeless groups evicted (and refilled) per step at most; later
            hopeless groups stay in the batch (their repair task is still buffered). ``None``:
            ``train_batch_size``.
    """

    train_batch_size: int
    capacity: int = 256
    mix_ratio: float = 0.25
    max_retries: int = 2
    seed: int = 0
    gen_batch_size: int = 1
    max_inflight_gen_batches: int = 1
    max_evictions_per_step: int | None = None

    def __post_init__(self) -> None:
        if self.train_batch_size < 1:
            raise KernelGymError(f"retry sampler: train_batch_size must be >= 1, got {self.train_batch_size}")
        if not 0.0 <= self.mix_ratio <= 1.0:
            raise KernelGymError(f"retry sampler: mix_ratio must be in [0, 1], got {self.mix_ratio}")
        if self.max_evictions_per_step is not None and self.max_evictions_per_step < 0:
            raise KernelGymError("retry sampler: max_evictions_per_step must be >= 0 or null")

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any] | None) -> RetrySettings:
        """Settings from ``sampler_kwargs``; unknown keys are an error.

        Example:
            >>> RetrySettings.from_kwargs({"train_batch_size": 8, "mix_ratio": 0.5}).capacity
            256
        """
        given = dict(kwargs or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise KernelGymError(f"retry sampler: unknown sampler_kwargs {unknown}; known: {sorted(known)}")
        if "train_batch_size" not in given:
            raise KernelGymError(
                "retry sampler: set trainer.v1.sampler.sampler_kwargs.train_batch_size (e.g. ${data.train_batch_size})"
            )
        return cls(**given)

    @property
    def eviction_budget(self) -> int:
        """Hopeless groups that may be evicted per step."""
        return self.train_batch_size if self.max_evictions_per_step is None else self.max_evictions_per_step


def _repair_to_dict(repair: RepairTask) -> dict[str, Any]:
    return {**asdict(repair), "status": repair.status.value}


def _repair_from_dict(data: Mapping[str, Any] | None) -> RepairTask | None:
    return None if not data else RepairTask(**dict(data))


def repair_row(row: dict[str, Any], repair: RepairTask,
               fits: Callable[[list[dict[str, Any]]], bool] | None = None) -> dict[str, Any]:
    """The dataset row of a repair task, built from a row of the same dataset.

    The task id moves to ``extra_info.task_id`` and ``reward_model.ground_truth``;
    the repair task rides along in ``extra_info.repair``; the last message of
    ``raw_prompt`` becomes the repair prompt (:func:`~kernelgym.wrappers.retry.repair_prompt`
    on the task's original prompt); earlier messages (the system prompt) stay.
    Suite and backend stay those of ``row``. With ``fits`` (whether messages fit the
    rollout's prompt length, :func:`prompt_fits`), a repair prompt that does not fit
    shows as many of the failed attempt's first and last lines as fit
    (:func:`~kernelgym.wrappers.retry.shorten_attempt`): a rollout left-truncates a
    prompt too long for it, which would cut the system prompt and the task, not the answer.
    Where the task does not fit even without the attempt, the prompt stays whole.

    Raises:
        ValueError: the repair task carries no ``origin_prompt``.

    Example:
        >>> row = {"raw_prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "task A"}],
        ...        "extra_info": {"task_id": "A", "split": "train"}, "reward_model": {"ground_truth": "A"}}
        >>> fixed = repair_row(row, RepairTask("B", "bad", "no kernel", "compile_error", origin_prompt="task B"))
        >>> fixed["extra_info"]["task_id"], fixed["raw_prompt"][-1]["content"].splitlines()[0]
        ('B', 'task B')
    """
    if repair.origin_prompt is None:
        raise ValueError(f"repair task for {repair.task_id!r} has no origin_prompt to rebuild its prompt from")
    messages = [dict(m) for m in row["raw_prompt"]]

    def with_attempt(shown: RepairTask) -> list[dict[str, Any]]:
        return [*messages[:-1], {"role": "user", "content": repair_prompt(str(repair.origin_prompt), shown)}]

    prompt = with_attempt(repair)
    if fits is not None and not fits(prompt) and fits(with_attempt(shorten_attempt(repair, 0))):
        low, high = 0, len(repair.attempt.splitlines()) - 1  # the most lines kept that fit: low fits, high + 1 not
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(with_attempt(shorten_attempt(repair, middle))) else (low, middle - 1)
        prompt = with_attempt(shorten_attempt(repair, low))
    extra_info = {**dict(row.get("extra_info") or {}), "task_id": repair.task_id, REPAIR_FIELD: _repair_to_dict(repair)}
    reward_model = {**dict(row.get("reward_model") or {}), "ground_truth": repair.task_id}
    return {**row, "raw_prompt": prompt, "extra_info": extra_info, "reward_model": reward_model}


def prompt_fits(tokenizer: Any, prompt_length: int, **template_kwargs: Any) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether chat messages fit ``prompt_length`` tokens once templated with a generation prompt, counted as verl's
    ``RLHFDataset`` counts for ``filter_overlong_prompts`` (its ``apply_chat_template_kwargs`` may be passed whole:
    the keys that choose the output's form are dropped, as verl drops them)."""
    from verl.utils.tokenizer import normalize_token_ids

    template_kwargs = {k: v for k, v in template_kwargs.items() if k not in ("tokenize", "return_dict", "return_tensors")}

    def fits(messages: list[dict[str, Any]]) -> bool:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **template_kwargs)
        return len(normalize_token_ids(ids)) <= prompt_length

    return fits


@dataclass(frozen=True)
class _Trajectory:
    outcome: TrajectoryOutcome
    extra_info: Mapping[str, Any]
    raw_prompt: list[dict[str, Any]]


def _unwrap(value: Any) -> Any:
    # TransferQueue hands non-tensor fields back wrapped (NonTensorData) or bare, depending on its backend.
    return getattr(value, "data", value)


class BufferedDynamicRetrySampler(ReplayBuffer):
    """verl's sync replay buffer with Buffered Dynamic Retry (see the module docstring).

    verl builds it from ``trainer.v1.sampler``::

        trainer.v1.sampler.custom_sampler.path=pkg://kernelgym.training.sampler
        trainer.v1.sampler.custom_sampler.name=BufferedDynamicRetrySampler
        trainer.v1.sampler.sampler_kwargs={train_batch_size:${data.train_batch_size},mix_ratio:0.25}

    Args:
        trainer_mode: must be ``"sync"``.
        trainer_config: ``trainer.v1.<mode>``.
        max_off_policy_threshold: as for verl's ``ReplayBuffer``.
        max_off_policy_strategy: as for verl's ``ReplayBuffer``.
        sampler_kwargs: :class:`RetrySettings` fields.
        poll_interval: seconds between polls of TransferQueue.
        refill_fn: the trainer's function that submits ``n`` fresh prompts (required).

    Raises:
        KernelGymError: another trainer mode, bad settings, or no ``refill_fn``.
    """

    def __init__(
        self,
        trainer_mode: str,
        trainer_config: Any,
        max_off_policy_threshold: int | None,
        max_off_policy_strategy: str,
        sampler_kwargs: Mapping[str, Any] | None,
        poll_interval: float = 2.0,
        refill_fn: Any = None,
    ) -> None:
        if trainer_mode != "sync":
            raise KernelGymError(f"the retry sampler supports trainer.v1.trainer_mode=sync only, not {trainer_mode!r}")
        if refill_fn is None:
            raise KernelGymError("the retry sampler needs the trainer's refill_fn to replace evicted groups")
        self.settings = RetrySettings.from_kwargs(sampler_kwargs)
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            poll_interval=poll_interval,
            refill_fn=refill_fn,
            filter_groups_metric=_FILTER_METRIC,
            train_batch_size=self.settings.train_batch_size,
            gen_batch_size=self.settings.gen_batch_size,
            max_inflight_gen_batches=self.settings.max_inflight_gen_batches,
        )
        self.buffer = RetryBuffer(capacity=self.settings.capacity, max_retries=self.settings.max_retries)
        self._rng = np.random.default_rng(self.settings.seed)
        self._evict_group: dict[str, dict[str, bool]] = defaultdict(dict)
        self._evictions_left = self.settings.eviction_budget
        _active[:] = [self]

    def draw_repair(self) -> RepairTask | None:
        """With probability ``mix_ratio`` and a non-empty buffer, remove and return a repair task."""
        if not len(self.buffer) or self._rng.random() >= self.settings.mix_ratio:
            return None
        return self.buffer.draw(self._rng)

    def retry_metrics(self) -> dict[str, float]:
        """The buffer counters as ``kernelgym/retry/<counter>``."""
        return {f"kernelgym/retry/{name}": float(value) for name, value in asdict(self.buffer.stats).items()}

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        """verl's sync sampling, with hopeless groups recycled; adds the ``kernelgym/retry/*`` metrics."""
        self._evictions_left = self.settings.eviction_budget
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if partition_id != "val":
            metrics.update(self.retry_metrics())
        return batch, metrics

    def _dapo_filtered_keys(self, partition_id: str) -> tuple[set[str], Counter]:
        """Book each newly finished group once; return the groups to evict (hopeless, within budget)."""
        if partition_id == "val":
            return set(), Counter()
        decisions = self._evict_group[partition_id]
        finished = self.finished_keys[partition_id]
        for uid in decisions.keys() - finished:
            del decisions[uid]
        new_uids = finished - decisions.keys()
        if new_uids:
            groups = self._read_groups(partition_id, new_uids)
            for uid in sorted(new_uids):
                decisions[uid] = self._book_group(groups.get(uid, []))
        return {uid for uid, evict in decisions.items() if evict}, Counter()

    def _read_groups(self, partition_id: str, uids: set[str]) -> dict[str, list[_Trajectory]]:
        keys = [key for key in self.partitions[partition_id] if key.split("_")[0] in uids]
        if not keys:
            return {}
        import transfer_queue as tq

        data = tq.kv_batch_get(
            keys=keys, partition_id=partition_id, select_fields=["extra_fields", "extra_info", "raw_prompt"]
        )
        groups: dict[str, list[_Trajectory]] = defaultdict(list)
        for key, extra_fields, extra_info, raw_prompt in zip(
            keys, data["extra_fields"], data["extra_info"], data["raw_prompt"], strict=True
        ):
            extra_fields = _unwrap(extra_fields)
            if OUTCOME_FIELD not in extra_fields:
                raise KernelGymError(
                    "the retry sampler needs trajectories from the `kernelgym` agent loop "
                    "(actor_rollout_ref.rollout.agent.default_agent_loop=kernelgym)"
                )
            groups[key.split("_")[0]].append(
                _Trajectory(
                    TrajectoryOutcome.from_dict(extra_fields[OUTCOME_FIELD]),
                    dict(_unwrap(extra_info) or {}),
                    [dict(m) for m in _unwrap(raw_prompt)],
                )
            )
        return groups

    def _book_group(self, trajectories: list[_Trajectory]) -> bool:
        """Update the buffer with one finished group; return whether to evict it."""
        if not trajectories:
            return False
        outcomes = [t.outcome for t in trajectories]
        solved = any(o.solved for o in outcomes)
        failure = most_advanced_failure(o.failure for o in outcomes if o.failure is not None)
        task_id = outcomes[0].task_id
        repair = _repair_from_dict(trajectories[0].extra_info.get(REPAIR_FIELD))
        origin_prompt = str(trajectories[0].raw_prompt[-1]["content"]) if repair is None else None
        self.buffer.book_group(task_id, solved, failure, repair, origin_prompt)
        if solved or self._evictions_left <= 0:
            return False
        self._evictions_left -= 1
        return True


class RetryDataset(RLHFDataset):
    """verl's ``RLHFDataset`` whose training rows may be replaced by repair tasks of the active retry sampler.

    Selected with ``data.custom_cls.path=pkg://kernelgym.training.sampler`` and
    ``data.custom_cls.name=RetryDataset``. Rows whose ``extra_info.split`` is not
    ``"train"`` (validation rows) are served unchanged.

    Raises:
        KernelGymError: rows are read in a DataLoader worker process, where the sampler's
            buffer cannot be reached (set ``data.dataloader_num_workers=0``).
    """

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The row at ``item``, or a repair row drawn from the retry sampler."""
        if torch.utils.data.get_worker_info() is not None:
            raise KernelGymError(
                "RetryDataset must run in the trainer process to reach the retry buffer: "
                "set data.dataloader_num_workers=0"
            )
        row = super().__getitem__(item)
        sampler = active_sampler()
        if sampler is None or (row.get("extra_info") or {}).get("split") != TRAIN_SPLIT:
            return row
        repair = sampler.draw_repair()
        if repair is None:
            return row
        return repair_row(row, repair, prompt_fits(self.tokenizer, self.max_prompt_length, **self.apply_chat_template_kwargs))
