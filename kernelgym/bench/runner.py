"""The agent benchmark: run an agent over a suite, k samples per task, up to T turns each.

Holds:
    ATTEMPTS_FILE, SUMMARY_FILE, RUN_FILE, PLOT_FILES: what a run writes into its output folder.
    BenchConfig: every setting of a run.
    BenchSummary: the result of a run (metrics plus what was run).
    run_bench: run (or resume) a benchmark and write its files.
    read_attempts: the attempt records of a run folder, tolerating a torn last line.
    write_plots: the speedup, per-level and per-turn figures of a run.
    default_backend: the backend a suite targets unless told otherwise.
    add_bench_arguments / bench_main: the ``kernelgym bench`` command line.

Each episode is a :class:`~kernelgym.envs.KernelEnv` episode on one task. The
runner advances up to ``batch_size`` episodes together: it asks the agent for
all their next answers in one ``act`` call, hands the answers to the shared
verifier as one ``evaluate_many`` batch, and feeds each result back to its env
(``begin_attempt`` / ``finish_attempt``, as the vector env does). Every attempt
is appended to ``attempts.jsonl`` as soon as it is judged, so ``--resume``
replays the recorded attempts into fresh envs and continues each episode where
it stopped, without asking or judging anything twice.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

from kernelgym.agents.base import Agent, AgentError, AgentRequest, BaseAgent, Exchange, make_agent
from kernelgym.bench.metrics import FAST_P_THRESHOLDS, Attempt, BenchMetrics, MetricSet, summarize
from kernelgym.envs.kernel_env import KernelEnv, VerifierLike, make_verifier
from kernelgym.errors import KernelGymError, MissingExtraError, require_extra
from kernelgym.tasks import load_suite
from kernelgym.tasks.task import Task, TaskSuite
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult

__all__ = [
    "ATTEMPTS_FILE",
    "SUMMARY_FILE",
    "RUN_FILE",
    "PLOT_FILES",
    "BenchConfig",
    "BenchSummary",
    "run_bench",
    "read_attempts",
    "write_plots",
    "default_backend",
    "add_bench_arguments",
    "bench_main",
]

ATTEMPTS_FILE = "attempts.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
PLOT_FILES = ("speedup_distribution.png", "metrics_per_level.png", "metrics_per_turn.png")

# The settings a resumed run must share with the run it continues.
_IDENTITY = ("suite", "agent", "backend", "k", "turns", "success_speedup", "seed")


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
        backend: the target backend (``None``: :func:`default_backend` of the suite).
        executor: where candidates run: ``"local"`` (the embedded default) or ``"ray"``.
        ray_address: Ray cluster to join with ``executor="ray"`` (``None``: ``$RAY_ADDRESS`` or a local Ray).
        num_workers: verifier worker processes (``None``: the executor's default).
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
    num_workers: int | None = None
    cache_dir: str | None = None
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    success_speedup: float = 1.0
    fast_p_thresholds: tuple[float, ...] = FAST_P_THRESHOLDS
    batch_size: int = 32
    seed: int = 0
    max_feedback_chars: int = 4000
    plots: bool = True
    progress: bool = True

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

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dict (what ``summary.json`` holds)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "metrics"}
        data["task_ids"] = list(self.task_ids)
        data["files"] = list(self.files)
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
            f"{self.agent} on {self.suite} ({self.backend}, {len(self.task_ids)} tasks, k={self.k}, "
            f"turns={self.turns}, {self.attempts} attempts{'' if self.complete else ', INCOMPLETE'})",
            f"{'metric':<34}{'first turn':>12}{'best turn':>12}",
        ]
        for label, name in rows:
            lines.append(f"{label:<34}{_fmt(getattr(first, name)):>12}{_fmt(getattr(best, name)):>12}")
        for key in best.fast_p:
            lines.append(f"{key:<34}{_fmt(first.fast_p[key]):>12}{_fmt(best.fast_p[key]):>12}")
        if best.passed and not self.timing_meaningful:
            lines.append("(timings are not meaningful on this device: speedup metrics are 0)")
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def default_backend(suite: str) -> str:
    """The backend a suite targets: ``cpp`` for the bundled CPU suite, ``cuda`` otherwise.

    Example:
        >>> default_backend("cpu"), default_backend("kernelbench:/data/KernelBench:1")
        ('cpp', 'cuda')
    """
    return "cpp" if suite == "cpu" else "cuda"


def _select_tasks(config: BenchConfig) -> TaskSuite:
    suite = load_suite(config.suite)
    if config.level is not None:
        suite = suite.filter(level=config.level)
    if config.task_ids:
        suite = TaskSuite(suite.name, tuple(suite[task_id] for task_id in config.task_ids))
    suite = suite.filter(limit=config.limit)
    if len(suite) == 0:
        raise KernelGymError(f"bench: no task of suite {config.suite!r} is left after the level/task/limit filters")
    return suite


def _request_seed(run_seed: int, task_id: str, sample: int, turn: int) -> int:
    # crc32, not hash(): the same on every run and every machine.
    return zlib.crc32(f"{run_seed}:{task_id}:{sample}:{turn}".encode()) & 0x7FFFFFFF


def read_attempts(path: str | Path) -> list[dict[str, Any]]:
    """The attempt records of ``attempts.jsonl``, in file order.

    A run killed while writing may leave a torn last line; it is dropped (its
    attempt is judged again on resume). A bad line anywhere else is an error.

    Raises:
        KernelGymError: a line other than the last is not a JSON object.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "attempts.jsonl"
        >>> _ = path.write_text('{"task_id": "a", "turn": 1}\\n{"task_id": "a", "tu')
        >>> [r["task_id"] for r in read_attempts(path)]
        ['a']
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise KernelGymError(f"{path}:{number} is not valid JSON; the run file is damaged") from None
        if not isinstance(record, dict):
            raise KernelGymError(f"{path}:{number} is not a JSON object; the run file is damaged")
        records.append(record)
    return records


@dataclass
class _Episode:
    """One (task, sample) episode: its env, the latest observation and the exchanges so far."""

    task: Task
    sample: int
    env: KernelEnv
    observation: dict[str, Any]
    history: list[Exchange]
    done: bool = False
    passed: bool = False


class _Progress:
    """Episodes finished, on stderr: tqdm when installed, else a plain counter."""

    def __init__(self, total: int, done: int, passed: int, enabled: bool, label: str) -> None:
        self.total, self.done, self.passed, self.enabled, self.label = total, done, passed, enabled, label
        self._bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                self._print()
            else:
                self._bar = tqdm(total=total, initial=done, desc=label, unit="episode", file=sys.stderr)
                self._bar.set_postfix(passed=passed)

    def stage(self, text: str) -> None:
        """Say what the run is doing now (asking the agent, judging answers)."""
        if self._bar is not None:
            self._bar.set_description_str(f"{self.label} [{text}]")

    def advance(self, passed: bool) -> None:
        self.done += 1
        self.passed += passed
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(passed=self.passed)
        elif self.enabled:
            self._print()

    def _print(self) -> None:
        end = "\n" if self.done == self.total else ""
        print(f"\r{self.label}: {self.done}/{self.total} episodes, {self.passed} passed", end=end, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _run_settings(config: BenchConfig, agent_name: str, backend: str, suite: TaskSuite) -> dict[str, Any]:
    settings = {name: getattr(config, name) for name in _IDENTITY}
    settings.update(agent=agent_name, backend=backend)
    settings.update(
        agent_options={key: _json_safe(value) for key, value in config.agent_options.items()},
        task_ids=suite.ids(),
        verifier=_json_safe(asdict(config.verifier)),
        executor=config.executor,
        fast_p_thresholds=list(config.fast_p_thresholds),
        max_feedback_chars=config.max_feedback_chars,
    )
    return settings


def _prepare_out_dir(out: Path, settings: Mapping[str, Any], config: BenchConfig) -> list[dict[str, Any]]:
    """Check or start the run folder; return the records of the run being resumed."""
    run_file, attempts_file = out / RUN_FILE, out / ATTEMPTS_FILE
    existing = run_file.is_file() or attempts_file.is_file()
    if existing and config.overwrite:
        for name in (RUN_FILE, ATTEMPTS_FILE, SUMMARY_FILE, *PLOT_FILES):
            (out / name).unlink(missing_ok=True)
        existing = False
    if existing and not config.resume:
        raise KernelGymError(
            f"{out} already holds a benchmark run; pass --resume to continue it, --overwrite to start again, "
            "or choose another --out"
        )
    records: list[dict[str, Any]] = []
    if existing:
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else {}
        except json.JSONDecodeError:
            raise KernelGymError(f"{run_file} is damaged; cannot tell what run to resume") from None
        changed = [name for name in _IDENTITY if name in previous and previous[name] != settings[name]]
        if changed:
            diffs = ", ".join(f"{n}: {previous[n]!r} -> {settings[n]!r}" for n in changed)
            raise KernelGymError(f"cannot resume the run in {out} with different settings ({diffs})")
        records = read_attempts(attempts_file)
        # Rewrite without a torn tail, so appended lines start on a fresh line.
        text = "".join(json.dumps(r) + "\n" for r in records)
        if attempts_file.is_file() and attempts_file.read_text(encoding="utf-8") != text:
            tmp = attempts_file.with_suffix(".jsonl.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, attempts_file)
    out.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return records


def _episode_records(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    episodes: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for record in records:
        episodes.setdefault((record["task_id"], int(record["sample"])), []).append(record)
    for key, group in episodes.items():
        group.sort(key=lambda r: r["turn"])
        if [r["turn"] for r in group] != list(range(1, len(group) + 1)):
            raise KernelGymError(f"attempts of episode {key} are not turns 1..n; the run file is damaged")
    return episodes


def _attempt_record(
    task: Task, sample: int, turn: int, answer: str, result: EvalResult, terminated: bool, truncated: bool
) -> dict[str, Any]:
    head = {
        "task_id": task.id,
        "level": task.level,
        "sample": sample,
        "turn": turn,
        "final": terminated or truncated,
        "terminated": terminated,
        "response": answer,
    }
    return {**head, **{key: value for key, value in result.to_dict().items() if key not in head}}


def _start_episode(
    task: Task, sample: int, prior: Sequence[Mapping[str, Any]], make_env: Callable[[], KernelEnv]
) -> _Episode:
    """A fresh env for the episode, with its recorded attempts replayed (nothing is judged again)."""
    env = make_env()
    observation, _ = env.reset(options={"task_id": task.id})
    episode = _Episode(task, sample, env, observation, [])
    for record in prior:
        env.begin_attempt(record["response"])
        observation, _, terminated, truncated, _ = env.finish_attempt(EvalResult.from_dict(dict(record)))
        episode.observation = observation
        episode.history.append(Exchange(record["response"], observation["feedback"]))
        episode.done = terminated or truncated
        episode.passed = episode.passed or record.get("status") == "ok"
    return episode


def _advance(
    episodes: list[_Episode],
    agent: Agent,
    verifier: VerifierLike,
    backend: str,
    run_seed: int,
    sink: IO[str],
    progress: _Progress,
) -> None:
    """Play the episodes to their end, one agent call and one verifier batch per turn."""
    active = [e for e in episodes if not e.done]
    while active:
        requests = []
        for episode in active:
            turn = int(episode.observation["turn"]) + 1
            requests.append(
                AgentRequest(
                    task=episode.task,
                    backend=backend,
                    prompt=episode.observation["prompt"],
                    history=tuple(episode.history),
                    sample=episode.sample,
                    turn=turn,
                    seed=_request_seed(run_seed, episode.task.id, episode.sample, turn),
                )
            )
        progress.stage(f"asking the agent for {len(requests)} answers")
        answers = agent.act(requests)
        if len(answers) != len(requests) or not all(isinstance(a, str) for a in answers):
            raise AgentError(f"agent {agent.name!r} returned {len(answers)} answers for {len(requests)} requests")
        tasks = [episode.env.begin_attempt(answer) for episode, answer in zip(active, answers, strict=True)]
        progress.stage(f"judging {len(answers)} answers")
        results = verifier.evaluate_many(list(zip(tasks, answers, strict=True)))
        for episode, request, answer, result in zip(active, requests, answers, results, strict=True):
            observation, _, terminated, truncated, _ = episode.env.finish_attempt(result)
            record = _attempt_record(episode.task, episode.sample, request.turn, answer, result, terminated, truncated)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            episode.observation = observation
            episode.history.append(Exchange(answer, observation["feedback"]))
            episode.passed = episode.passed or result.ok
            if terminated or truncated:
                episode.done = True
                progress.advance(episode.passed)
        active = [e for e in active if not e.done]


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def run_bench(config: BenchConfig, *, agent: Agent | None = None, verifier: VerifierLike | None = None) -> BenchSummary:
    """Run (or resume) a benchmark; write ``attempts.jsonl``, ``run.json``, ``summary.json`` and the plots.

    Args:
        config: the run's settings.
        agent: an agent object to use instead of building ``config.agent`` (left open).
        verifier: a verifier to share instead of building one (left open).

    Returns:
        The summary of every finished episode of the selected tasks.

    Raises:
        KernelGymError: bad settings, a run folder in the way, or a resume with other settings.
        AgentError: the agent failed.

    Example:
        >>> import tempfile
        >>> config = BenchConfig(suite="cpu", agent="random", limit=1, out_dir=tempfile.mkdtemp(),
        ...                      agent_options={"modes": ["garbage"]}, plots=False, progress=False)
        >>> summary = run_bench(config)
        >>> summary.metrics.best_turn.pass_at_1, summary.attempts
        (0.0, 1)
    """
    suite = _select_tasks(config)
    backend = config.backend or default_backend(config.suite)
    own_agent = agent is None
    agent = agent if agent is not None else make_agent(config.agent, **config.agent_options)
    own_verifier = verifier is None
    out = Path(config.out_dir)
    try:
        prior = _episode_records(_prepare_out_dir(out, _run_settings(config, agent.name, backend, suite), config))
        if verifier is None:
            extra = {"ray_address": config.ray_address} if config.executor == "ray" and config.ray_address else {}
            verifier = make_verifier(backend, config.executor, config.verifier, config.num_workers, config.cache_dir, **extra)

        def make_env() -> KernelEnv:
            return KernelEnv(
                suite,
                backend=backend,
                max_turns=config.turns,
                success_speedup=config.success_speedup,
                verifier=verifier,
                max_feedback_chars=config.max_feedback_chars,
            )

        keys = [(task, sample) for task in suite for sample in range(config.k)]
        recorded = [prior.get((task.id, sample), []) for task, sample in keys]
        pending = [key for key, records in zip(keys, recorded, strict=True) if not (records and records[-1]["final"])]
        passed = sum(any(r["status"] == "ok" for r in records) for records in recorded if records and records[-1]["final"])
        progress = _Progress(len(keys), len(keys) - len(pending), passed, config.progress, f"bench {agent.name}")
        try:
            with (out / ATTEMPTS_FILE).open("a", encoding="utf-8") as sink:
                for batch in _batches(pending, config.batch_size):
                    episodes = [_start_episode(t, s, prior.get((t.id, s), []), make_env) for t, s in batch]
                    try:
                        _advance(episodes, agent, verifier, backend, config.seed, sink, progress)
                    finally:
                        for episode in episodes:
                            episode.env.close()
        finally:
            progress.close()
    finally:
        if own_verifier and verifier is not None:
            verifier.close()
        if own_agent and isinstance(agent, BaseAgent):
            agent.close()
    return _write_summary(config, agent.name, backend, suite, out)


def _write_summary(config: BenchConfig, agent_name: str, backend: str, suite: TaskSuite, out: Path) -> BenchSummary:
    levels = {task.id: task.level for task in suite}
    records = [r for r in read_attempts(out / ATTEMPTS_FILE) if r["task_id"] in levels and r["sample"] < config.k]
    attempts = [Attempt.from_dict(r) for r in records]
    metrics = summarize(
        attempts, levels, config.k, config.turns, config.verifier.faster_threshold, config.fast_p_thresholds
    )
    episodes = sum(1 for r in records if r.get("final"))
    summary = BenchSummary(
        suite=config.suite,
        agent=agent_name,
        backend=backend,
        k=config.k,
        turns=config.turns,
        task_ids=tuple(suite.ids()),
        episodes=episodes,
        attempts=len(records),
        complete=episodes == len(suite) * config.k,
        device=next((r["device"] for r in records if r.get("device")), ""),
        timing_meaningful=any(r.get("timing_meaningful") for r in records),
        metrics=metrics,
        out_dir=str(out),
    )
    files = [ATTEMPTS_FILE, RUN_FILE, SUMMARY_FILE]
    if config.plots:
        try:
            files.extend(p.name for p in write_plots(summary, attempts, out))
        except MissingExtraError as exc:
            warnings.warn(f"plots skipped: {exc}", stacklevel=2)
    summary = replace(summary, files=tuple(files))
    (out / SUMMARY_FILE).write_text(json.dumps(summary.to_dict(), indent=2) + "\n", encoding="utf-8")
    return summary


def write_plots(summary: BenchSummary, attempts: Sequence[Attempt], out_dir: str | Path) -> list[Path]:
    """Write the three figures of a run into ``out_dir``; return their paths.

    ``speedup_distribution.png``: histogram of the speedups of the passing best-turn answers.
    ``metrics_per_level.png``: best-turn pass@1, pass@k, faster rate and hack rate per level.
    ``metrics_per_turn.png``: the same metrics when each episode is judged by its first ``t`` turns.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    require_extra("matplotlib", "plot")
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    from kernelgym.bench.metrics import best_attempt, group_episodes

    out_dir = Path(out_dir)
    metrics = summary.metrics
    paths = [out_dir / name for name in PLOT_FILES]

    wanted = set(summary.task_ids)
    best = [best_attempt(group) for key, group in group_episodes(attempts).items() if key[0] in wanted]
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    series = {
        "vs eager": [a.speedup_eager for a in best if a is not None and a.ok and a.speedup_eager],
        "vs torch.compile": [a.speedup_compile for a in best if a is not None and a.ok and a.speedup_compile],
    }
    values = [v for vs in series.values() for v in vs]
    if values:
        low, high = min(values + [1.0]) / 1.2, max(values + [1.0]) * 1.2
        bins = [low * (high / low) ** (i / 24) for i in range(25)]
        for label, data in series.items():
            if data:
                axes.hist(data, bins=bins, alpha=0.6, label=f"{label} (n={len(data)})")
        axes.set_xscale("log")
        first, last = math.floor(math.log2(low)), math.ceil(math.log2(high))
        step = max(1, math.ceil((last - first + 1) / 9))
        axes.xaxis.set_major_locator(FixedLocator([2.0**p for p in range(first, last + 1, step)]))
        axes.xaxis.set_major_formatter(FuncFormatter(_speedup_label))
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.axvline(1.0, color="black", linewidth=1)
        axes.axvline(metrics.faster_threshold, color="gray", linestyle="--", linewidth=1,
                     label=f"faster threshold {metrics.faster_threshold:g}x")
        axes.legend()
    else:
        axes.text(0.5, 0.5, "no correct, timed answers", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel("speedup (reference time / candidate time)")
    axes.set_ylabel("episodes (best turn)")
    axes.set_title(f"{summary.agent} on {summary.suite}: speedup of correct answers")
    figure.savefig(paths[0], dpi=120)

    bars = _plotted_metrics(summary.k)
    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    levels = sorted(metrics.per_level)
    width = 0.8 / len(bars)
    for i, (label, name) in enumerate(bars):
        heights = [_metric_value(metrics.per_level[level]["best_turn"], name) or 0.0 for level in levels]
        axes.bar([x + i * width for x in range(len(levels))], heights, width, label=label)
    axes.set_xticks([x + width * (len(bars) - 1) / 2 for x in range(len(levels))], [f"level {lv}" for lv in levels])
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("rate (best turn)")
    axes.set_title(f"{summary.agent} on {summary.suite}: metrics per level")
    axes.legend()
    figure.savefig(paths[1], dpi=120)

    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.subplots()
    turns = list(range(1, len(metrics.per_turn) + 1))
    for label, name in bars:
        axes.plot(turns, [_metric_value(m, name) or 0.0 for m in metrics.per_turn], marker="o", label=label)
    axes.set_xticks(turns)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("turns allowed (each episode judged by its best attempt so far)")
    axes.set_ylabel("rate")
    axes.set_title(f"{summary.agent} on {summary.suite}: metrics per turn")
    axes.legend()
    figure.savefig(paths[2], dpi=120)
    return paths


def _speedup_label(value: float, _position: float) -> str:
    return f"{value:g}x" if value >= 1 else f"1/{round(1 / value)}x"


def _plotted_metrics(k: int) -> list[tuple[str, str]]:
    names = [("pass@1", "pass_at_1")]
    if k > 1:
        names.append((f"pass@{k}", "pass_at_k"))
    return names + [("faster vs eager", "faster_eager"), ("fast_1", "fast_1"), ("hack rate", "hack_rate")]


def _metric_value(metrics: MetricSet, name: str) -> float | None:
    return metrics.fast_p[name] if name in metrics.fast_p else getattr(metrics, name)


# --- command line ------------------------------------------------------------------------------


def _option_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.replace("-", "_"), json.loads(raw)
    except json.JSONDecodeError:
        return key.replace("-", "_"), raw


def add_bench_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``kernelgym bench`` options to ``parser`` (run it with :func:`bench_main`).

    Example:
        >>> parser = add_bench_arguments(argparse.ArgumentParser(prog="kernelgym bench"))
        >>> args = parser.parse_args(["--suite", "cpu", "--agent", "solutions", "-k", "2", "--limit", "3"])
        >>> args.k, args.limit, args.turns
        (2, 3, 1)
    """
    run = parser.add_argument_group("run")
    run.add_argument("--suite", default="cpu", help="cpu | gpu | kernelbench:<dir-or-parquet>[:level] (default: cpu)")
    run.add_argument("--agent", default="solutions",
                     help="solutions | random | openai | hf | module:Class | file.py:Class (default: solutions)")
    run.add_argument("-k", "--k", type=int, default=1, help="samples per task (default: 1)")
    run.add_argument("--turns", type=int, default=1, help="attempts per episode (default: 1)")
    run.add_argument("--out", default=None, help="run folder (default: runs/bench/<suite>-<agent>)")
    run.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    run.add_argument("--level", type=int, default=None, help="only the tasks of this level")
    run.add_argument("--tasks", default="", help="only these task ids, comma-separated")
    run.add_argument("--resume", action="store_true", help="continue the run in --out without redoing finished attempts")
    run.add_argument("--overwrite", action="store_true", help="delete the run in --out and start again")
    run.add_argument("--seed", type=int, default=0, help="run seed (default: 0)")
    run.add_argument("--batch-size", type=int, default=32, help="episodes advanced together (default: 32)")
    run.add_argument("--success-speedup", type=float, default=1.0,
                     help="end an episode at a correct answer this fast; 0: at any correct answer (default: 1.0)")
    run.add_argument("--no-plots", action="store_true", help="do not write the figures")
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    judge = parser.add_argument_group("judge")
    judge.add_argument("--backend", default=None, help="cpp | cuda | triton | musa (default: cpp for cpu, else cuda)")
    judge.add_argument("--executor", default="local", help="local | ray (default: local)")
    judge.add_argument("--ray-address", default=None, help="Ray cluster address for --executor ray (default: $RAY_ADDRESS or a local Ray)")
    judge.add_argument("--workers", type=int, default=None, help="verifier worker processes")
    judge.add_argument("--cache-dir", default=None, help="build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    defaults = VerifierConfig()
    judge.add_argument("--trials", type=int, default=defaults.trials, help=f"correctness trials (default: {defaults.trials})")
    judge.add_argument("--warmup", type=int, default=defaults.warmup, help=f"untimed calls (default: {defaults.warmup})")
    judge.add_argument("--runs", type=int, default=defaults.runs, help="timed calls (default: the backend's, 20 on a CPU, 100 on a GPU)")
    judge.add_argument("--no-timing", action="store_true", help="skip timing (speedup metrics become 0)")
    judge.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (faster vs compile)")
    judge.add_argument("--faster-threshold", type=float, default=defaults.faster_threshold,
                       help=f"speedup above which an answer is faster (default: {defaults.faster_threshold})")

    agent = parser.add_argument_group("agent options (only those given are passed to the agent)")
    agent.add_argument("--base-url", default=None, help="openai: API root, e.g. http://127.0.0.1:8000/v1")
    agent.add_argument("--model", default=None, help="openai: model name; hf: model directory")
    agent.add_argument("--api-key-env", default=None, help="openai: environment variable holding the API key")
    agent.add_argument("--temperature", type=float, default=None, help="openai/hf: sampling temperature")
    agent.add_argument("--top-p", type=float, default=None, help="openai/hf: nucleus sampling mass")
    agent.add_argument("--max-tokens", type=int, default=None, help="openai/hf: most tokens per answer")
    agent.add_argument("--concurrency", type=int, default=None, help="openai: requests in flight")
    agent.add_argument("--agent-option", action="append", type=_option_value, default=[], metavar="KEY=VALUE",
                       help="any other agent option (VALUE parsed as JSON when it can be); repeatable")
    return parser


_AGENT_FLAGS = ("base_url", "model", "api_key_env", "temperature", "top_p", "max_tokens", "concurrency")


def _config_from_args(args: argparse.Namespace) -> BenchConfig:
    options = {name: getattr(args, name) for name in _AGENT_FLAGS if getattr(args, name) is not None}
    options.update(dict(args.agent_option))
    out = args.out or str(Path("runs") / "bench" / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{args.suite}-{args.agent}"))
    verifier = VerifierConfig(
        trials=args.trials,
        warmup=args.warmup,
        runs=args.runs,
        timing=not args.no_timing,
        compile_baseline=args.compile_baseline,
        faster_threshold=args.faster_threshold,
    )
    return BenchConfig(
        suite=args.suite,
        agent=args.agent,
        agent_options=options,
        k=args.k,
        turns=args.turns,
        out_dir=out,
        limit=args.limit,
        level=args.level,
        task_ids=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
        resume=args.resume,
        overwrite=args.overwrite,
        backend=args.backend,
        executor=args.executor,
        ray_address=args.ray_address,
        num_workers=args.workers,
        cache_dir=args.cache_dir,
        verifier=verifier,
        success_speedup=args.success_speedup,
        batch_size=args.batch_size,
        seed=args.seed,
        plots=not args.no_plots,
        progress=not args.quiet,
    )


def bench_main(args: argparse.Namespace) -> int:
    """Run ``kernelgym bench`` from parsed :func:`add_bench_arguments` options; print the summary.

    Returns:
        0 on success, 2 on a user error (printed to stderr), 130 when interrupted.
    """
    try:
        config = _config_from_args(args)
        summary = run_bench(config)
    except (KernelGymError, ValueError) as exc:
        print(f"kernelgym bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nkernelgym bench: interrupted; rerun the same command with --resume to continue", file=sys.stderr)
        return 130
    print(summary.report())
    print(f"wrote {', '.join(summary.files)} to {summary.out_dir}")
    return 0
