"""Buffered Dynamic Retry as verl's v1 replay buffer, on a real local Ray and TransferQueue.

The sampler is fed through its ``refill_fn`` from a real ``RetryDataset`` over
rows written by ``kernelgym train``'s row builder; a small rollout stands in for
the agent loop and writes trajectories to TransferQueue the way verl's
``AgentLoopWorkerTQ`` does, with outcomes decided by a policy per test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest

pytest.importorskip("verl")

import ray  # noqa: E402
import torch  # noqa: E402
import transfer_queue as tq  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402

from kernelgym.errors import KernelGymError  # noqa: E402
from kernelgym.training.agent_loop import OUTCOME_FIELD, TrajectoryOutcome  # noqa: E402
from kernelgym.training.launcher import task_rows  # noqa: E402
from kernelgym.training.sampler import (  # noqa: E402
    BufferedDynamicRetrySampler,
    RetryDataset,
    RetrySettings,
    active_sampler,
)
from kernelgym.verifier.result import EvalResult  # noqa: E402
from kernelgym.wrappers.retry import Attempt, RepairTask  # noqa: E402

from .tiny_lm import build_tiny_lm, compose_verl_config  # noqa: E402

GROUP = 2


@pytest.fixture(scope="module")
def transfer_queue():
    # TransferQueue's controller and storage unit each reserve one logical CPU.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}})
    yield
    tq.close()
    ray.shutdown()


@pytest.fixture(autouse=True)
def empty_train_partition(transfer_queue):
    yield
    keys = list((tq.kv_list("train") or {}).get("train", {}))
    if keys:
        tq.kv_clear(keys=keys, partition_id="train")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from transformers import AutoTokenizer

    tmp = tmp_path_factory.mktemp("retry-data")
    path = tmp / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in task_rows("cpu", "cpp", "train")))
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_lm(tmp / "lm"))
    data_config = compose_verl_config(["data.filter_overlong_prompts=false"]).data
    return RetryDataset(data_files=[str(path)], tokenizer=tokenizer, config=data_config)


class Rollout:
    """Serves dataset rows in order and writes each as a finished group of trajectories to TransferQueue."""

    def __init__(self, dataset: RetryDataset, solves: Callable[[dict], bool]) -> None:
        self.dataset = dataset
        self.solves = solves
        self.cursor = 0
        self.rows: dict[str, dict] = {}

    def refill(self, n: int) -> int:
        for _ in range(n):
            self.submit()
        return n

    def submit(self) -> str:
        row = self.dataset[self.cursor % len(self.dataset)]
        self.cursor += 1
        uid = uuid.uuid4().hex
        self.rows[uid] = row
        prompt_tag = {"is_prompt": True, "status": "pending", "global_steps": 0}
        tq.kv_batch_put(keys=[uid], partition_id="train", tags=[prompt_tag])
        solved = self.solves(row)
        task_id = row["extra_info"]["task_id"]
        result = EvalResult(
            task_id, "cpp", "ok" if solved else "compile_error", parsed=True, legal=True, compiled=solved,
            correct=solved, score=0.6 if solved else 0.0, feedback="error: expected ';'",
        )
        outcome = TrajectoryOutcome.from_attempts(task_id, [Attempt(f"answer to {task_id}", result)])
        trajectory = {
            "responses": torch.tensor([1, 2, 3]),
            "extra_fields": {OUTCOME_FIELD: outcome.to_dict()},
            "extra_info": row["extra_info"],
            "raw_prompt": row["raw_prompt"],
        }
        keys = [f"{uid}_{session}_0" for session in range(GROUP)]
        tags = [{"status": "success", "seq_len": 3, "global_steps": 0} for _ in keys]
        fields = list_of_dict_to_tensordict([trajectory] * GROUP)
        tq.kv_batch_put(keys=keys, partition_id="train", fields=fields, tags=tags)
        tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})
        return uid


def make_sampler(rollout: Rollout, **settings) -> BufferedDynamicRetrySampler:
    kwargs = {"train_batch_size": 2, "mix_ratio": 1.0, **settings}
    return BufferedDynamicRetrySampler("sync", {}, 8, "drop", kwargs, poll_interval=0.05, refill_fn=rollout.refill)


def is_repair(row: dict) -> bool:
    return bool(row["extra_info"].get("repair"))


def test_a_hopeless_group_comes_back_as_a_repair_task_and_is_recovered(dataset):
    relu = dataset[0]["extra_info"]["task_id"]
    rollout = Rollout(dataset, solves=lambda row: is_repair(row) or row["extra_info"]["task_id"] != relu)
    sampler = make_sampler(rollout)
    hopeless, fine = rollout.submit(), rollout.submit()

    batch, metrics = sampler.sample(global_steps=0, partition_id="train", batch_size=2)

    assert len({key.split("_")[0] for key in batch.keys}) == 2
    assert hopeless not in {key.split("_")[0] for key in batch.keys}
    assert metrics["training/filter_groups/evicted_samples"] == 1
    assert metrics["kernelgym/retry/pushed"] == metrics["kernelgym/retry/draws"] == 1
    assert metrics["kernelgym/retry/recovered"] == 1 and metrics["kernelgym/retry/size"] == 0
    repairs = [row for row in rollout.rows.values() if is_repair(row)]
    assert len(repairs) == 1
    repair = repairs[0]
    assert repair["extra_info"]["task_id"] == repair["reward_model"]["ground_truth"] == relu
    prompt = repair["raw_prompt"][-1]["content"]
    assert prompt.startswith(rollout.rows[hopeless]["raw_prompt"][-1]["content"].rstrip())
    assert "## Previous attempt" in prompt and f"answer to {relu}" in prompt and "expected ';'" in prompt
    assert repair["raw_prompt"][0] == rollout.rows[fine]["raw_prompt"][0]  # the system prompt stays


def test_repairs_that_keep_failing_are_retried_then_dropped_within_the_eviction_budget(dataset):
    rollout = Rollout(dataset, solves=lambda row: False)
    sampler = make_sampler(rollout, max_retries=1, max_evictions_per_step=3)
    for _ in range(2):
        rollout.submit()

    batch, metrics = sampler.sample(global_steps=0, partition_id="train", batch_size=2)

    assert len({key.split("_")[0] for key in batch.keys}) == 2
    assert metrics["training/filter_groups/evicted_samples"] == 3
    assert metrics["kernelgym/retry/recovered"] == 0
    assert metrics["kernelgym/retry/retried"] >= 1 and metrics["kernelgym/retry/dropped"] >= 1
    # every drawn repair task was booked exactly once: recovered, re-buffered or dropped
    drawn = metrics["kernelgym/retry/draws"]
    assert drawn == metrics["kernelgym/retry/retried"] + metrics["kernelgym/retry/dropped"]
    assert max(row["extra_info"]["repair"]["retries"] for row in rollout.rows.values() if is_repair(row)) == 1


def test_only_training_rows_are_replaced(dataset, tmp_path):
    val_file = tmp_path / "val.jsonl"
    val_file.write_text("".join(json.dumps(row) + "\n" for row in task_rows("cpu", "cpp", "val")))
    val_dataset = RetryDataset(data_files=[str(val_file)], tokenizer=dataset.tokenizer, config=dataset.config)
    sampler = make_sampler(Rollout(dataset, solves=lambda row: False))
    assert active_sampler() is sampler
    task = val_dataset[1]["extra_info"]["task_id"]
    for _ in range(2):
        sampler.buffer.push(RepairTask(task, "bad", "does not compile", "compile_error", origin_prompt="the task"))

    assert not is_repair(val_dataset[0])
    assert is_repair(dataset[0]) and dataset[0]["extra_info"]["task_id"] == task


def test_settings_are_checked():
    with pytest.raises(KernelGymError, match="train_batch_size"):
        RetrySettings.from_kwargs({"mix_ratio": 0.5})
    with pytest.raises(KernelGymError, match="unknown"):
        RetrySettings.from_kwargs({"train_batch_size": 2, "mixratio": 0.5})
    with pytest.raises(KernelGymError, match="sync"):
        BufferedDynamicRetrySampler("colocate_async", {}, 8, "drop", {"train_batch_size": 2}, refill_fn=print)
