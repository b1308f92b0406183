"""The settings of a benchmark run and its summary.

Holds:
    BenchConfig: every setting of a run.
    BenchSummary: the result of a run (metrics plus what was run), with a text report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from kernelgym.bench.metrics import (
    FAST_P_THRESHOLDS,
    BenchMetrics,
)
from kernelgym.errors import KernelGymError
from kernelgym.verifier.config import VerifierConfig

__all__ = ["BenchConfig", "BenchSummary"]


@dataclass(frozen=True)
class BenchConfig:
    """Every setting of a benchmark run.

    Attributes:
        suite: ``"cpu"``, ``"gpu"`` or ``"kernelbench:<dir-or-parquet>[:level]"`` (see ``load_suite``).
        agent: a registered agent name or ``"module:Class"`` / ``"file.py:Class"``.
        agent_options: keyword arguments for the agent's constructor.
        k: samples (independent episodes) per task.
        turns: attempts per episode; later attempts see the earlier ones and their feedback.
        out_dir: folder for ``attempts.jsonl``, ``run.json``, ``summary.json`` and the plots.
        limit: run only the first ``limit`` tasks (after ``level`` and ``task_ids``).
        level: run only the tasks of this level.
        task_ids: run only these tasks (empty: all).
        resume: continue the run already in ``out_dir`` (finished attempts are kept, not redone).
        overwrite: delete a run already in ``out_dir`` and start again.
        backend: the target backend (``None``: :func:`kernelgym.tasks.default_backend` of the suite).
        executor: where candidates run: ``"local"`` (the embedded default), ``"ray"`` or ``"remote"``.
        ray_address: Ray cluster to join with ``executor="ray"`` (``None``: ``$RAY_ADDRESS`` or a local Ray).
        server: URL of a ``kernelgym serve`` judge for ``executor="remote"`` (``None``: ``$KERNELGYM_SERVER``).
        num_workers: verifier worker processes (``None``: the executor's default).
        judges_per_device: the local executor's judges per GPU, each timing alone (``None``: its default, one).
        cache_dir: build cache (``None``: ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``).
        verifier: the judge's settings; its ``faster_threshold`` (1.1) defines "faster".
        success_speedup: an episode ends early at a correct answer at least this fast (0: any correct one).
        fast_p_thresholds: the ``p`` values of ``fast_p``.
        batch_size: episodes advanced together (one ``act`` call and one verifier batch per turn).
        seed: run seed, mixed into every request's seed.
        max_feedback_chars: longest feedback an agent is shown.
        plots: write the figures (needs matplotlib).
        progress: show a progress bar on stderr.
    """

    suite: str = "cpu"
    agent: str = "solutions"
    agent_options: Mapping[str, Any] = field(default_factory=dict)
    k: int = 1
    turns: int = 1
    out_dir: str = "runs/bench"
    limit: int | None = None
    level: int | None = None
    task_ids: tuple[str, ...] = ()
    resume: bool = False
    overwrite: bool = False
    backend: str | None = None
    executor: str = "local"
    ray_address: str | None = None
    server: str | None = None
    num_workers: int | None = None
    judges_per_device: int | None = None
    cache_dir: str | None = None
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    success_speedup: float = 1.0
    fast_p_thresholds: tuple[float, ...] = FAST_P_THRESHOLDS
    batch_size: int = 32
    seed: int = 0
    max_feedback_chars: int = 4000
    plots: bool = True
    progress: bool = True

    def executor_options(self) -> dict[str, Any]:
        """The options of the chosen executor that this config sets (``ray_address`` or the server's ``url``, and
        ``judges_per_device``)."""
        options: dict[str, Any] = {}
        if self.executor == "ray" and self.ray_address:
            options["ray_address"] = self.ray_address
        if self.executor == "remote" and self.server:
            options["url"] = self.server
        if self.judges_per_device is not None:
            options["judges_per_device"] = self.judges_per_device
        return options

    def __post_init__(self) -> None:
        if self.k < 1 or self.turns < 1 or self.batch_size < 1:
            raise KernelGymError("bench: k, turns and batch_size must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise KernelGymError("bench: limit must be at least 1")
        if self.resume and self.overwrite:
            raise KernelGymError("bench: choose one of resume and overwrite")


@dataclass(frozen=True)
class BenchSummary:
    """The result of a benchmark run.

    Attributes:
        suite: the suite spec.
        agent: the agent's name.
        backend: the backend answers targeted.
        k: samples per task.
        turns: attempts allowed per episode.
        task_ids: the tasks of the run, in order.
        episodes: episodes finished.
        attempts: attempts judged.
        complete: every episode finished.
        device: the device candidates ran on, in words.
        timing_meaningful: at least one timing was meaningful (``False`` under an interpreter).
        metrics: the metrics (first turn, best turn, per turn, per level).
        out_dir: the run folder.
        files: the files written, relative to ``out_dir``.
        rules: the rule preset the answers were judged by.
        weights: the weights contract the answers were judged by (``redrawn``, ``fixed`` or ``seeded``).
        skipped: task id -> why the agent could not answer it (e.g. no bundled solution for the backend);
            such tasks are not in ``task_ids`` and count neither as passed nor as failed.
    """

    suite: str
    agent: str
    backend: str
    k: int
    turns: int
    task_ids: tuple[str, ...]
    episodes: int
    attempts: int
    complete: bool
    device: str
    timing_meaningful: bool
    metrics: BenchMetrics
    out_dir: str
    files: tuple[str, ...] = ()
    rules: str = "native"
    weights: str = "redrawn"
    skipped: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dict (what ``summary.json`` holds)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "metrics"}
        data["task_ids"] = list(self.task_ids)
        data["files"] = list(self.files)
        data["skipped"] = dict(self.skipped)
        data["metrics"] = self.metrics.to_dict()
        return data

    def report(self) -> str:
        """A short text table of the headline metrics, first turn vs best turn."""
        rows = [("pass@1", "pass_at_1")] + ([(f"pass@{self.k}", "pass_at_k")] if self.k > 1 else []) + [
            (f"avg@{self.k}", "avg_at_k"),
            (f"faster vs eager (>{self.metrics.faster_threshold:g}x)", "faster_eager"),
            (f"faster vs compile (>{self.metrics.faster_threshold:g}x)", "faster_compile"),
            ("geomean speedup (correct)", "geomean_speedup_eager"),
            ("hack rate (illegal)", "hack_rate"),
        ]
        first, best = self.metrics.first_turn, self.metrics.best_turn
        lines = [
            f"{self.agent} on {self.suite} ({self.backend}, {self.rules} rules, {self.weights} weights, {len(self.task_ids)} tasks, k={self.k}, "
            f"turns={self.turns}, {self.attempts} attempts{'' if self.complete else ', INCOMPLETE'})",
            f"{'metric':<34}{'first turn':>12}{'best turn':>12}",
        ]
        for label, name in rows:
            lines.append(f"{label:<34}{_fmt(getattr(first, name)):>12}{_fmt(getattr(best, name)):>12}")
        for key in best.fast_p:
            lines.append(f"{key:<34}{_fmt(first.fast_p[key]):>12}{_fmt(best.fast_p[key]):>12}")
        if first.kernelbench_contract is not None and best.kernelbench_contract is not None:
            lines.append("under KernelBench's contract (its seeds and inputs, ModelNew's own weights, the model as built, the task's own shapes, torch.allclose):")
            for key in best.kernelbench_contract:
                label = f"{key} (KernelBench's contract)" if key != "avg_at_k" else f"avg@{self.k} (KernelBench's contract)"
                lines.append(f"{label:<34}{_fmt(first.kernelbench_contract[key]):>12}{_fmt(best.kernelbench_contract[key]):>12}")
        if best.own_kernel_share is not None:
            lines.append(f"{'own-kernel share (profiled, correct)':<34}{_fmt(first.own_kernel_share):>12}{_fmt(best.own_kernel_share):>12}")
            lines.append(f"{'lazy optimization (of those)':<34}{_fmt(first.lazy):>12}{_fmt(best.lazy):>12}")
        errors = max(first.judge_errors, best.judge_errors)
        if errors:
            lines.append(f"({errors} attempt(s) failed in the judge, not in the answer, and count as failures above: "
                         "their judge_reason in attempts.jsonl says why; fix that, then judge the run again)")
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} task(s), not counted above:")
            lines.extend(f"  {task_id}: {reason}" for task_id, reason in self.skipped.items())
        if best.passed and not self.timing_meaningful:
            lines.append("(timings are not meaningful on this device: speedup metrics are 0)")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"

