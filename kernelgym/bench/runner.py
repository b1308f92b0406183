"""The agent benchmark: run an agent over a suite, k samples per task, up to T turns each.

Holds:
    BenchPlan: the tasks a run would judge and those it skips, with why.
    plan_bench: the plan of a run (what ``kernelgym bench --dry-run`` prints).
    run_bench: run (or resume) a benchmark and write its files.

The settings and the summary are in ``kernelgym.bench.config``, the run folder in
``kernelgym.bench.runs``, the figures in ``kernelgym.bench.plots``, the command
line in ``kernelgym.bench.cli``.

Each episode is a :class:`~kernelgym.envs.KernelEnv` episode on one task. The
runner advances up to ``batch_size`` episodes together: it asks the agent for
all their next answers in one ``act`` call, hands the answers to the shared
verifier as one ``evaluate_many`` batch, and feeds each result back to its env
(``begin_attempt`` / ``finish_attempt``, as the vector env does). Every attempt
is appended to ``attempts.jsonl`` as soon as it is judged, so ``--resume``
replays the recorded attempts into fresh envs and continues each episode where
it stopped, without asking or judging anything twice. An answer on which the
judge itself failed (after the env's retries) is recorded as a ``judge_error``
and its episode stops for this run; ``--resume`` judges that answer again
without asking the agent for it.
"""

from __future__ import annotations

import json
import sys
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from kernelgym.agents.base import Agent, AgentError, AgentRequest, BaseAgent, Exchange, make_agent
from kernelgym.backends.cache import default_cache_dir
from kernelgym.bench.config import BenchConfig, BenchSummary
from kernelgym.bench.metrics import (
    Attempt,
    summarize,
)
from kernelgym.bench.plots import write_plots
from kernelgym.bench.runs import (
    ATTEMPTS_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    attempt_record,
    episode_records,
    judge_error_answers,
    prepare_out_dir,
    read_attempts,
    run_settings,
)
from kernelgym.envs.kernel_env import KernelEnv, LazyVerifier, VerifierLike, resolve_suite, step_batch
from kernelgym.errors import KernelGymError, MissingExtraError
from kernelgym.executor.prepare import pending_builds
from kernelgym.tasks import default_backend
from kernelgym.tasks.task import Task, TaskSuite
from kernelgym.verifier.result import EvalResult

__all__ = ["BenchPlan", "plan_bench", "run_bench", "Progress", "batches", "write_summary"]


def _request_seed(run_seed: int, task_id: str, sample: int, turn: int) -> int:
    # crc32, not hash(): the same on every run and every machine.
    return zlib.crc32(f"{run_seed}:{task_id}:{sample}:{turn}".encode()) & 0x7FFFFFFF


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
    retry_answer: str | None = None


class Progress:
    """Episodes (or answers) finished, on stderr: tqdm when installed, else a plain counter."""

    def __init__(self, total: int, done: int, passed: int, enabled: bool, label: str, waiting_for: Sequence[str] = ()) -> None:
        self.total, self.done, self.passed, self.enabled, self.label = total, done, passed, enabled, label
        self.waiting_for = list(waiting_for)  # one-time builds the first answer waits for
        self._bar = None
        self._answers: Any = None  # a second bar under the first: the answers of the batch being judged
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

    def judging(self, judged: int, total: int) -> None:
        """Say how many answers of the batch being judged are done (and, before the first, what it waits for)."""
        text = f"judged {judged}/{total} answers"
        if judged == 0 and self.waiting_for:
            text += (f"; first the one-time builds ({', '.join(self.waiting_for)}): minutes, once per machine "
                     "(`kernelgym prepare` does them ahead)")
        elif judged:
            self.waiting_for = []
        if self._bar is not None:
            self.stage(text)
            self._count_answers(judged, total)
        elif self.enabled:
            print(f"\r{self.label}: {text}", end="\n" if judged == total else "", file=sys.stderr)

    def _count_answers(self, judged: int, total: int) -> None:
        """Advance the answers bar (episodes end only when their batch is judged: the first bar moves in steps)."""
        from tqdm import tqdm

        if judged == 0 or self._answers is None:
            if self._answers is not None:
                self._answers.close()
            self._answers = tqdm(total=total, desc="  answers judged", unit="answer", file=sys.stderr, position=1, leave=False)
        self._answers.update(judged - self._answers.n)
        if judged == total:
            self._answers.close()
            self._answers = None

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
        if self._answers is not None:
            self._answers.close()
        if self._bar is not None:
            self._bar.close()


def _start_episode(
    task: Task, sample: int, prior: Sequence[Mapping[str, Any]], make_env: Callable[[], KernelEnv],
    retry_answer: str | None = None,
) -> _Episode:
    """A fresh env for the episode, with its recorded attempts replayed (nothing is judged again).

    ``retry_answer``: the answer of the judge error that ended the recorded attempts, judged again as the next turn.
    """
    env = make_env()
    observation, _ = env.reset(options={"task_id": task.id})
    episode = _Episode(task, sample, env, observation, [], retry_answer=retry_answer)
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
    progress: Progress,
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
        asking = [request for episode, request in zip(active, requests, strict=True) if episode.retry_answer is None]
        progress.stage(f"asking the agent for {len(asking)} answers")
        fresh = agent.act(asking) if asking else []
        if len(fresh) != len(asking) or not all(isinstance(a, str) for a in fresh):
            raise AgentError(f"agent {agent.name!r} returned {len(fresh)} answers for {len(asking)} requests")
        given = iter(fresh)
        answers = [next(given) if e.retry_answer is None else e.retry_answer for e in active]
        for episode in active:
            episode.retry_answer = None
        stepped = step_batch([episode.env for episode in active], answers, _Counted(verifier, progress), keep_judge_errors=True)
        for episode, request, answer, (result, step) in zip(active, requests, answers, stepped, strict=True):
            if step is None:  # the judge failed, not the answer: recorded, and judged again on --resume
                sink.write(json.dumps(attempt_record(episode.task, episode.sample, request.turn, answer, result, False, False)) + "\n")
                sink.flush()
                episode.done = True
                continue
            observation, _, terminated, truncated, _ = step
            record = attempt_record(episode.task, episode.sample, request.turn, answer, result, terminated, truncated)
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            episode.observation = observation
            episode.history.append(Exchange(answer, observation["feedback"]))
            episode.passed = episode.passed or result.ok
            if terminated or truncated:
                episode.done = True
                progress.advance(episode.passed)
        active = [e for e in active if not e.done]


class _Counted:
    """The verifier, with each answer counted on the progress line as it is judged (not when its batch is)."""

    def __init__(self, verifier: VerifierLike, progress: Progress) -> None:
        self.verifier, self.progress = verifier, progress

    def evaluate(self, task: Task, text: str) -> EvalResult:
        return self.evaluate_many([(task, text)])[0]

    def evaluate_many(self, pairs: list[tuple[Task, str]]) -> list[EvalResult]:
        total = len(pairs)
        self.progress.judging(0, total)
        submit = getattr(self.verifier, "submit", None)
        if submit is None:
            results = list(self.verifier.evaluate_many(pairs))
            self.progress.judging(total, total)
            return results
        futures = [submit(task, text) for task, text in pairs]
        for done, _ in enumerate(as_completed(futures), 1):
            self.progress.judging(done, total)
        return [future.result() for future in futures]

    def close(self) -> None:
        self.verifier.close()


def batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


@dataclass(frozen=True)
class BenchPlan:
    """What a run would do, judging nothing: the tasks it asks the agent for and those it skips.

    Attributes:
        suite: the selected tasks less the skipped ones, in suite order.
        backend: the backend answers target.
        skipped: task id -> why the agent cannot answer it (its :meth:`BaseAgent.skip_reason`), in suite order.
    """

    suite: TaskSuite
    backend: str
    skipped: Mapping[str, str]

    def report(self, agent_name: str, k: int = 1) -> str:
        """One line per selected task: ``run`` or ``skip`` and why."""
        lines = [f"{agent_name} on {self.suite.name} ({self.backend}): {len(self.suite)} task(s) to run, "
                 f"{len(self.skipped)} skipped, k={k}; nothing judged (dry run)"]
        lines.extend(f"  run   {task_id}" for task_id in self.suite.ids())
        lines.extend(f"  skip  {task_id}: {reason}" for task_id, reason in self.skipped.items())
        return "\n".join(lines)


def plan_bench(config: BenchConfig, agent: Agent) -> BenchPlan:
    """The tasks ``config`` selects, split into those ``agent`` is asked for and those it skips.

    Raises:
        TaskError: the suite cannot be loaded or an id names no task.

    Example:
        >>> from kernelgym.agents.solutions import SolutionsAgent
        >>> plan = plan_bench(BenchConfig(suite="gpu", backend="cuda"), SolutionsAgent())
        >>> plan.skipped["level1/7_RMSNorm"]
        "no bundled 'cuda' solution (it has: triton)"
    """
    selected = resolve_suite(config.suite, config.level, task_ids=config.task_ids, limit=config.limit)
    backend = config.backend or default_backend(config.suite)
    skipped: dict[str, str] = {}
    if isinstance(agent, BaseAgent):
        for task in selected:
            reason = agent.skip_reason(task, backend)
            if reason is not None:
                skipped[task.id] = reason
    kept = TaskSuite(selected.name, tuple(task for task in selected if task.id not in skipped))
    return BenchPlan(kept, backend, skipped)


def run_bench(config: BenchConfig, *, agent: Agent | None = None, verifier: VerifierLike | None = None) -> BenchSummary:
    """Run (or resume) a benchmark; write ``attempts.jsonl``, ``run.json``, ``summary.json`` and the plots.

    Args:
        config: the run's settings.
        agent: an agent object to use instead of building ``config.agent`` (left open).
        verifier: a verifier to share instead of building one (left open).

    Tasks the agent cannot answer at all (:func:`plan_bench`) are skipped and listed in the summary.

    Returns:
        The summary of every finished episode of the selected tasks.

    Raises:
        KernelGymError: bad settings, a run folder in the way, a resume with other settings, or every task skipped.
        AgentError: the agent failed.

    Example:
        >>> import tempfile
        >>> config = BenchConfig(suite="cpu", agent="random", limit=1, out_dir=tempfile.mkdtemp(),
        ...                      agent_options={"modes": ["garbage"]}, plots=False, progress=False)
        >>> summary = run_bench(config)
        >>> summary.metrics.best_turn.pass_at_1, summary.attempts
        (0.0, 1)
    """
    own_agent = agent is None
    agent = agent if agent is not None else make_agent(config.agent, **config.agent_options)
    plan = plan_bench(config, agent)
    suite, backend = plan.suite, plan.backend
    if not len(suite):
        if own_agent and isinstance(agent, BaseAgent):
            agent.close()
        raise KernelGymError(f"agent {agent.name!r} can answer none of the selected tasks for {backend!r}: "
                             + "; ".join(f"{t}: {r}" for t, r in plan.skipped.items()))
    handle = LazyVerifier(verifier, backend, config.executor, config.verifier, config.num_workers, config.cache_dir,
                          **config.executor_options())
    out = Path(config.out_dir)
    try:
        # Read before prepare_out_dir drops them from the run file: the answers to judge again.
        retry_answers = judge_error_answers(out / ATTEMPTS_FILE) if config.resume and not config.overwrite else {}
        prior = episode_records(prepare_out_dir(out, run_settings(config, agent.name, backend, suite), config))
        verifier = handle.get()

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
        waiting_for = pending_builds(backend, Path(config.cache_dir) if config.cache_dir else default_cache_dir()) \
            if pending and config.executor == "local" else []
        progress = Progress(len(keys), len(keys) - len(pending), passed, config.progress, f"bench {agent.name}", waiting_for)
        try:
            with (out / ATTEMPTS_FILE).open("a", encoding="utf-8") as sink:
                for batch in batches(pending, config.batch_size):
                    episodes = [_start_episode(t, s, prior.get((t.id, s), []), make_env, retry_answers.get((t.id, s)))
                                for t, s in batch]
                    try:
                        _advance(episodes, agent, verifier, backend, config.seed, sink, progress)
                    finally:
                        for episode in episodes:
                            episode.env.close()
        finally:
            progress.close()
    finally:
        handle.close()
        if own_agent and isinstance(agent, BaseAgent):
            agent.close()
    return write_summary(config, agent.name, backend, suite, out, skipped=plan.skipped)


def write_summary(
    config: BenchConfig, agent_name: str, backend: str, suite: TaskSuite, out: Path,
    *, skipped: Mapping[str, str] | None = None,
) -> BenchSummary:
    """Summarize the attempts in ``out`` (metrics, files) and write ``summary.json`` and the plots.

    ``skipped`` lists the tasks left out of ``suite`` because the agent could not answer them.
    """
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
        rules=config.verifier.rules,
        weights=config.verifier.weights,
        skipped=dict(skipped or {}),
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
