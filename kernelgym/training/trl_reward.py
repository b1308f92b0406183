"""kernelgym as the reward of TRL's ``GRPOTrainer``, and the suites as TRL datasets.

Holds:
    TASK_COLUMN: the dataset column that names each row's task (``"task_id"``).
    KernelGymReward: a reward function for ``GRPOTrainer(reward_funcs=...)`` that judges each completion.
    suite_dataset: a suite's tasks as a ``datasets.Dataset`` of conversational prompts with a ``task_id`` column.
    require_trl: import ``trl``, or raise :class:`~kernelgym.errors.MissingExtraError` naming the extra ``trl``.

TRL calls a reward function with the batch's ``prompts`` and ``completions`` and every other
dataset column as a keyword argument, one value per completion; the ``task_id`` column names the
task each completion answers. The whole batch is judged at once (``evaluate_many``), by a local
pool of sandboxed workers, a Ray pool, or a ``kernelgym serve`` server (``executor="remote"``).

Needs ``pip install 'kernelgym[trl]'`` for the trainer and the dataset; the reward function itself
imports neither.

Example (see ``examples/trl_grpo.py`` and ``docs/trl.md``)::

    from trl import GRPOConfig, GRPOTrainer
    from kernelgym.training.trl_reward import KernelGymReward, suite_dataset

    reward = KernelGymReward(suite="cpu", backend="cpp")
    trainer = GRPOTrainer(model=model, reward_funcs=reward, train_dataset=suite_dataset("cpu", "cpp"),
                          args=GRPOConfig(...))
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from kernelgym.agents.base import strip_reasoning
from kernelgym.envs.kernel_env import LazyVerifier, VerifierLike, judge_with_retries
from kernelgym.errors import TaskError, require_extra
from kernelgym.training.reward import cached_suite
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult, JudgeError

__all__ = ["TASK_COLUMN", "KernelGymReward", "require_trl", "suite_dataset"]

TASK_COLUMN = "task_id"


def require_trl() -> ModuleType:
    """``trl``, imported; :class:`~kernelgym.errors.MissingExtraError` naming ``kernelgym[trl]`` if it is absent."""
    return require_extra("trl", "trl")


class KernelGymReward:
    """A TRL reward function: each completion's kernelgym verifier score (0 to 1; see ``EvalResult.score``).

    The completion's text (the last message's content for a conversational completion, a leading
    ``<think>`` block dropped) is judged against the task its row's ``task_id`` names, all the
    batch's completions at once. A completion on which the judge itself failed is judged again
    ``judge_retries`` times; if it still fails, :class:`~kernelgym.verifier.result.JudgeError` is
    raised, since a failure of the judge is no verdict on the answer and must not be paid as one.

    Each call logs, through TRL's ``log_metric`` (when the trainer passes it), the batch's share of
    ``solved`` (legal and correct), ``compiled`` and ``illegal`` completions as ``kernelgym/...``.

    Args:
        suite: the suite the ``task_id`` values belong to (``"cpu"``, ``"gpu"``, ``"kernelbench:<path>"``).
        backend: the backend answers are written for.
        verifier: a verifier to judge with (kept open: it belongs to the caller); ``None`` builds one
            at the first call from the settings below and closes it in :meth:`close`.
        executor: ``"local"``, ``"ray"`` or ``"remote"`` (a ``kernelgym serve`` server at ``url``).
        config: the verifier's settings (``None``: the defaults).
        num_workers: worker processes of a local verifier.
        cache_dir: build cache of a local verifier.
        judge_retries: times a judge error is judged again.
        **executor_kwargs: more executor settings (``url`` of a server, ``ray_address``).

    Example:
        >>> reward = KernelGymReward(suite="cpu", backend="cpp")
        >>> reward.__name__
        'kernelgym'
        >>> reward.close()
    """

    __name__ = "kernelgym"  # the name TRL logs the reward under (rewards/kernelgym/mean)

    def __init__(
        self,
        suite: str = "cpu",
        backend: str = "cpp",
        *,
        verifier: VerifierLike | None = None,
        executor: str = "local",
        config: VerifierConfig | None = None,
        num_workers: int | None = None,
        cache_dir: str | None = None,
        judge_retries: int = 2,
        **executor_kwargs: Any,
    ) -> None:
        if judge_retries < 0:
            raise ValueError("judge_retries must be at least 0")
        self.suite = suite
        self.backend = backend
        self.judge_retries = judge_retries
        self._verifier = LazyVerifier(
            verifier, backend, executor=executor, config=config, num_workers=num_workers, cache_dir=cache_dir,
            **executor_kwargs,
        )

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str] | None = None, **kwargs: Any
    ) -> list[float]:
        """One reward per completion, in order (TRL's reward-function contract).

        Raises:
            TaskError: the dataset has no ``task_id`` column, or names a task the suite lacks.
            JudgeError: the judge failed on a completion, again after the retries.
        """
        del prompts
        if task_id is None:
            raise TaskError(
                f"kernelgym reward: the dataset has no {TASK_COLUMN!r} column; build it with suite_dataset() "
                "or add the task id of every row"
            )
        tasks = cached_suite(self.suite)
        texts = [strip_reasoning(_completion_text(completion)) for completion in completions]
        pairs = [(tasks[str(name)], text) for name, text in zip(task_id, texts, strict=True)]
        results = judge_with_retries(self._verifier.get(), pairs, self.judge_retries)
        failed = next((result for result in results if result.judge_error), None)
        if failed is not None:
            raise JudgeError(failed, attempts=self.judge_retries + 1)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            for name, value in _batch_metrics(results).items():
                log_metric(f"kernelgym/{name}", value)
        return [float(result.score) for result in results]

    def close(self) -> None:
        """Stop the verifier's workers, if this reward built the verifier."""
        self._verifier.close()

    def __enter__(self) -> KernelGymReward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _completion_text(completion: Any) -> str:
    # A conversational completion is a list of messages; the answer is the last one's content.
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"]) if completion else ""


def _batch_metrics(results: Sequence[EvalResult]) -> dict[str, float]:
    count = max(len(results), 1)
    return {
        "solved": sum(r.legal and r.correct for r in results) / count,
        "compiled": sum(bool(r.compiled) for r in results) / count,
        "illegal": sum(r.status.value == "illegal" for r in results) / count,
    }


def suite_dataset(
    suite: str,
    backend: str,
    *,
    repeat: int = 1,
    system_prompt: str | None = None,
    task_ids: Sequence[str] | None = None,
) -> Any:
    """A suite's tasks as a ``datasets.Dataset`` in TRL's conversational prompt format.

    Each row has ``prompt`` (the system message and the task prompt a ``KernelEnv`` shows, as chat
    messages) and ``task_id``; :class:`KernelGymReward` reads the latter.

    Args:
        suite: ``"cpu"``, ``"gpu"`` or ``"kernelbench:<dir-or-parquet>[:level]"``.
        backend: the backend answers are written for (it shapes the prompt).
        repeat: rows per task.
        system_prompt: the system message (``None``: ``kernelgym.envs.prompt.SYSTEM_PROMPT``).
        task_ids: only these tasks, in this order (``None``: every task, in suite order).

    Raises:
        MissingExtraError: ``datasets`` is not installed (``pip install 'kernelgym[trl]'``).
        TaskError: a task of ``task_ids`` is not in the suite.
    """
    datasets = require_extra("datasets", "trl")
    from kernelgym.training.launcher import task_rows

    rows = task_rows(suite, backend, "train", repeat, system_prompt)
    if task_ids is not None:
        known = {row["extra_info"]["task_id"] for row in rows}
        unknown = [name for name in task_ids if name not in known]
        if unknown:
            raise TaskError(f"suite {suite!r} has no task {', '.join(unknown)}")
        order = {name: position for position, name in enumerate(task_ids)}
        rows = [row for row in rows if row["extra_info"]["task_id"] in order]
        rows.sort(key=lambda row: order[row["extra_info"]["task_id"]])
    return datasets.Dataset.from_list(
        [{"prompt": row["prompt"], TASK_COLUMN: row["extra_info"]["task_id"]} for row in rows]
    )
