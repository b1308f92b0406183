"""Benchmark metrics over judged attempts: pure functions, no I/O.

Holds:
    FAST_P_THRESHOLDS: the default ``p`` values of ``fast_p`` (KernelBench's).
    Attempt: one judged attempt, reduced to what the metrics read.
    MetricSet: every headline metric over one selection of attempts.
    BenchMetrics: first-turn, best-turn, per-turn and per-level metric sets of a run.
    pass_at_k: the unbiased pass@k estimator.
    geometric_mean: geometric mean of positive numbers.
    fast_p: share of expected episodes that are correct and faster than ``p``.
    best_attempt: the best attempt of one episode within its first turns.
    group_episodes: attempts grouped by episode ``(task_id, sample)``.
    metric_set: the :class:`MetricSet` of a run's episodes, each reduced to its best attempt.
    summarize: the :class:`BenchMetrics` of a run.

Conventions. An episode is one sample of one task: up to ``turns`` attempts.
An attempt *passes* when its status is ``ok`` (legal, compiled and correct). A
run of ``k`` samples over ``T`` tasks expects ``T * k`` episodes; every rate
divides by that number, so a missing or unfinished episode counts as a failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kernelgym.verifier.kernel_share import LAZY_SHARE
from kernelgym.verifier.result import is_judge_error

__all__ = [
    "FAST_P_THRESHOLDS",
    "Attempt",
    "MetricSet",
    "BenchMetrics",
    "pass_at_k",
    "geometric_mean",
    "fast_p",
    "best_attempt",
    "group_episodes",
    "metric_set",
    "summarize",
]

FAST_P_THRESHOLDS = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Attempt:
    """One judged attempt, as the metrics see it.

    Attributes:
        task_id: the task answered.
        level: the task's KernelBench level.
        sample: index of the episode among the task's ``k`` samples (0-based).
        turn: index of the attempt inside its episode (1-based).
        status: the verifier's status string (``"ok"``, ``"illegal"``, ...).
        speedup_eager: eager reference time / candidate time (``None``: not timed).
        speedup_compile: ``torch.compile`` reference time / candidate time (``None``: not timed).
        score: the verifier's score.
        judge_error: the judge failed, not the answer (status ``judge_error``, or the ``judge-error`` flag
            of older records): the attempt failed, but says nothing about the answer.
        kernelbench_status: the verdict under KernelBench's own contract (``None``: not judged under the
            ``kernelbench`` preset); see :attr:`~kernelgym.verifier.result.EvalResult.kernelbench_verdict`.
        kernelbench_speedup: the eager speedup under that contract.
        own_kernel_share: the share of the forward's device time in the answer's own kernels (``None``: not
            profiled); see :mod:`kernelgym.verifier.kernel_share`.
    """

    task_id: str
    level: int
    sample: int
    turn: int
    status: str
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    score: float = 0.0
    judge_error: bool = False
    kernelbench_status: str | None = None
    kernelbench_speedup: float | None = None
    own_kernel_share: float | None = None

    @property
    def ok(self) -> bool:
        """Legal, compiled and correct."""
        return self.status == "ok"

    @property
    def illegal(self) -> bool:
        """A rule was broken (a reward hack or a PyTorch fallback)."""
        return self.status == "illegal"

    def speedup(self, baseline: str) -> float | None:
        """The speedup over ``"eager"`` or ``"compile"``."""
        if baseline not in ("eager", "compile"):
            raise ValueError(f"baseline must be 'eager' or 'compile', not {baseline!r}")
        return self.speedup_eager if baseline == "eager" else self.speedup_compile

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attempt:
        """Build from a dict with at least these fields (others, e.g. a full attempt record, are ignored).

        A record of status ``judge_error`` (or, in older records, flagged ``"judge-error"``) sets ``judge_error``.

        Example:
            >>> Attempt.from_dict({"task_id": "t", "level": 1, "sample": 0, "turn": 1, "status": "ok", "x": 1}).ok
            True
            >>> Attempt.from_dict({"task_id": "t", "level": 1, "sample": 0, "turn": 1, "status": "runtime_error",
            ...                    "flags": ["judge-error"]}).judge_error
            True
        """
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "judge_error" not in values:
            values["judge_error"] = is_judge_error(data)
        if data.get("rules") == "kernelbench" and data.get("kernelbench_status") is None:  # both verdicts agree
            values["kernelbench_status"], values["kernelbench_speedup"] = data.get("status"), data.get("speedup_eager")
        return cls(**values)

    def under_kernelbench(self) -> Attempt:
        """This attempt as KernelBench's contract judged it (its status and speedup)."""
        return replace(self, status=self.kernelbench_status or self.status, speedup_eager=self.kernelbench_speedup,
                       speedup_compile=None)


@dataclass(frozen=True)
class MetricSet:
    """The headline metrics over one selection of episodes (all rates in ``[0, 1]``).

    Attributes:
        tasks: number of tasks.
        episodes: episodes finished (at most ``tasks * k``).
        attempts: attempts considered.
        passed: episodes whose chosen attempt passed.
        pass_at_1: unbiased pass@1, averaged over tasks.
        pass_at_k: unbiased pass@k for the run's ``k``, averaged over tasks.
        avg_at_k: mean correctness over the ``k`` samples of every task (equals ``pass_at_1``
            with ``n = k`` samples; reported under the name papers use).
        faster_eager: share of episodes correct and faster than the threshold vs eager PyTorch.
        faster_compile: the same vs ``torch.compile`` (``None``: that baseline was never timed).
        fast_p: ``fast_p`` per threshold, keyed ``"fast_0"``, ``"fast_0.5"``, ... .
        geomean_speedup_eager: geometric-mean eager speedup over passing episodes (``None``: none timed).
        geomean_speedup_compile: the same vs ``torch.compile``.
        hack_rate: share of the attempts considered whose status is ``illegal``.
        judge_errors: attempts considered that failed in the judge, not in the answer (counted as failures
            above; a run with any is worth judging again).
        kernelbench_contract: under the ``kernelbench`` preset, the same episodes judged by KernelBench's own
            contract (:meth:`Attempt.under_kernelbench`): ``avg_at_k`` and ``fast_p`` per threshold (``None``: not
            judged under that preset).
        own_kernel_share: the mean profiling share of the passing episodes that were profiled (``None``: none);
        lazy: the share of those below ``lazy_share`` (flagged ``lazy-optimization``).
    """

    tasks: int
    episodes: int
    attempts: int
    passed: int
    pass_at_1: float
    pass_at_k: float
    avg_at_k: float
    faster_eager: float
    faster_compile: float | None
    fast_p: Mapping[str, float] = field(default_factory=dict)
    geomean_speedup_eager: float | None = None
    geomean_speedup_compile: float | None = None
    hack_rate: float = 0.0
    judge_errors: int = 0
    kernelbench_contract: Mapping[str, float] | None = None
    own_kernel_share: float | None = None
    lazy: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dict."""
        data = asdict(self)
        data["fast_p"] = dict(self.fast_p)
        data["kernelbench_contract"] = dict(self.kernelbench_contract) if self.kernelbench_contract is not None else None
        return data


@dataclass(frozen=True)
class BenchMetrics:
    """The metrics of one benchmark run.

    Attributes:
        k: samples per task.
        turns: attempts allowed per episode.
        faster_threshold: speedup above which an answer counts as faster.
        first_turn: every episode judged by its first attempt.
        best_turn: every episode judged by its best attempt.
        per_turn: entry ``t - 1`` judges every episode by its best attempt among its first ``t``
            (``per_turn[0]`` is ``first_turn``, ``per_turn[-1]`` is ``best_turn``).
        per_level: level -> ``{"first_turn": ..., "best_turn": ...}`` over that level's tasks.
    """

    k: int
    turns: int
    faster_threshold: float
    first_turn: MetricSet
    best_turn: MetricSet
    per_turn: tuple[MetricSet, ...]
    per_level: Mapping[int, Mapping[str, MetricSet]]

    def to_dict(self) -> dict[str, Any]:
        """A plain-JSON dict (levels keyed by their string, as JSON requires)."""
        return {
            "k": self.k,
            "turns": self.turns,
            "faster_threshold": self.faster_threshold,
            "first_turn": self.first_turn.to_dict(),
            "best_turn": self.best_turn.to_dict(),
            "per_turn": [m.to_dict() for m in self.per_turn],
            "per_level": {
                str(level): {name: m.to_dict() for name, m in sets.items()} for level, sets in self.per_level.items()
            },
        }


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: the chance that ``k`` of ``n`` samples, ``c`` of them correct, hold a correct one.

    ``1 - C(n - c, k) / C(n, k)`` (Chen et al., 2021), computed as a product so large ``n`` stays exact.

    Raises:
        ValueError: unless ``0 <= c <= n`` and ``1 <= k <= n``.

    Example:
        >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 3, 2)
        (0.25, 0.5, 1.0)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def geometric_mean(values: Iterable[float]) -> float | None:
    """Geometric mean of positive numbers (``None`` for none).

    Raises:
        ValueError: a value is not positive.

    Example:
        >>> geometric_mean([1.0, 4.0]), geometric_mean([])
        (2.0, None)
    """
    logs = []
    for value in values:
        if not value > 0:
            raise ValueError(f"geometric_mean needs positive values, got {value!r}")
        logs.append(math.log(value))
    return math.exp(sum(logs) / len(logs)) if logs else None


def fast_p(outcomes: Iterable[Attempt | None], p: float, total: int, baseline: str = "eager") -> float:
    """Share of ``total`` expected episodes whose outcome passed with a speedup above ``p``.

    Episodes absent from ``outcomes`` (or given as ``None``) count as failures,
    and so does an untimed correct answer: a speedup that was not measured was
    not shown.

    Args:
        outcomes: one attempt per finished episode (usually its best).
        p: the speedup to beat (strictly).
        total: episodes expected (tasks times samples), the denominator.
        baseline: ``"eager"`` or ``"compile"``.

    Raises:
        ValueError: ``total`` is smaller than the number of outcomes.

    Example:
        >>> a = Attempt("t1", 1, 0, 1, "ok", speedup_eager=1.3)
        >>> b = Attempt("t2", 1, 0, 1, "ok", speedup_eager=0.7)
        >>> fast_p([a, b], 1.0, total=4), fast_p([a, b], 0.0, total=4)
        (0.25, 0.5)
    """
    outcomes = list(outcomes)
    if total < len(outcomes):
        raise ValueError(f"fast_p: {len(outcomes)} outcomes but only {total} expected episodes")
    if total == 0:
        return 0.0
    hits = 0
    for attempt in outcomes:
        if attempt is None or not attempt.ok:
            continue
        speedup = attempt.speedup(baseline)
        if speedup is not None and speedup > p:
            hits += 1
    return hits / total


def _rank(attempt: Attempt) -> tuple[bool, float, float, int]:
    # Passing beats failing, then the faster, then the higher score; ties go to the earlier turn.
    return (attempt.ok, attempt.speedup_eager or 0.0, attempt.score, -attempt.turn)


def best_attempt(attempts: Iterable[Attempt], upto_turn: int | None = None) -> Attempt | None:
    """The best attempt of one episode among its first ``upto_turn`` turns (``None``: no attempt there).

    Best means: passing before failing, then the higher eager speedup, then the
    higher score, then the earlier turn.

    Example:
        >>> tries = [Attempt("t", 1, 0, 1, "incorrect"), Attempt("t", 1, 0, 2, "ok", speedup_eager=0.9)]
        >>> best_attempt(tries).turn, best_attempt(tries, upto_turn=1).status
        (2, 'incorrect')
    """
    chosen = [a for a in attempts if upto_turn is None or a.turn <= upto_turn]
    return max(chosen, key=_rank) if chosen else None


def group_episodes(attempts: Iterable[Attempt]) -> dict[tuple[str, int], list[Attempt]]:
    """Attempts grouped by episode ``(task_id, sample)``, each group sorted by turn."""
    episodes: dict[tuple[str, int], list[Attempt]] = {}
    for attempt in attempts:
        episodes.setdefault((attempt.task_id, attempt.sample), []).append(attempt)
    for group in episodes.values():
        group.sort(key=lambda a: a.turn)
    return episodes


def _share(count: int, total: int) -> float:
    return count / total if total else 0.0


def metric_set(
    episodes: Mapping[tuple[str, int], Sequence[Attempt]],
    task_ids: Sequence[str],
    k: int,
    upto_turn: int | None = None,
    faster_threshold: float = 1.1,
    fast_p_thresholds: Sequence[float] = FAST_P_THRESHOLDS,
) -> MetricSet:
    """The metrics of the episodes of ``task_ids``, each judged by its best attempt within ``upto_turn`` turns.

    Args:
        episodes: attempts per ``(task_id, sample)``; episodes of other tasks, and samples
            ``>= k``, are ignored.
        task_ids: the tasks of the run (a task with no episode counts as failed ``k`` times).
        k: samples per task.
        upto_turn: judge each episode by its first ``upto_turn`` attempts (``None``: all).
        faster_threshold: speedup above which an answer is ``faster``.
        fast_p_thresholds: the ``p`` values of ``fast_p``.

    Raises:
        ValueError: ``k < 1`` or ``upto_turn < 1``.

    Example:
        >>> eps = {("a", 0): [Attempt("a", 1, 0, 1, "ok", 2.0)], ("a", 1): [Attempt("a", 1, 1, 1, "illegal")]}
        >>> m = metric_set(eps, ["a", "b"], k=2)
        >>> m.pass_at_1, m.pass_at_k, m.faster_eager, m.hack_rate
        (0.25, 0.5, 0.25, 0.5)
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    if upto_turn is not None and upto_turn < 1:
        raise ValueError("upto_turn must be at least 1")
    wanted = set(task_ids)
    outcomes: list[Attempt] = []
    considered: list[Attempt] = []
    passed_per_task = dict.fromkeys(task_ids, 0)
    for (task_id, sample), attempts in episodes.items():
        if task_id not in wanted or not 0 <= sample < k:
            continue
        considered.extend(a for a in attempts if upto_turn is None or a.turn <= upto_turn)
        outcome = best_attempt(attempts, upto_turn)
        if outcome is None:
            continue
        outcomes.append(outcome)
        passed_per_task[task_id] += outcome.ok
    total = len(wanted) * k
    passed = sum(passed_per_task.values())

    def mean_over_tasks(metric: Callable[[int], float]) -> float:
        return sum(metric(c) for c in passed_per_task.values()) / len(passed_per_task) if passed_per_task else 0.0

    compile_timed = any(a.speedup_compile is not None for a in outcomes)
    passing = [a for a in outcomes if a.ok]
    shares = [a.own_kernel_share for a in passing if a.own_kernel_share is not None]
    contract = None
    if considered and all(a.kernelbench_status is not None for a in considered):
        kb_outcomes = [o for o in (best_attempt([a.under_kernelbench() for a in attempts], upto_turn)
                                   for (task_id, sample), attempts in episodes.items()
                                   if task_id in wanted and 0 <= sample < k) if o is not None]
        contract = {"avg_at_k": _share(sum(o.ok for o in kb_outcomes), total),
                    **{f"fast_{p:g}": fast_p(kb_outcomes, p, total, "eager") for p in fast_p_thresholds}}
    return MetricSet(
        tasks=len(wanted),
        episodes=len(outcomes),
        attempts=len(considered),
        passed=passed,
        pass_at_1=mean_over_tasks(lambda c: pass_at_k(k, c, 1)),
        pass_at_k=mean_over_tasks(lambda c: pass_at_k(k, c, k)),
        avg_at_k=_share(passed, total),
        faster_eager=fast_p(outcomes, faster_threshold, total, "eager"),
        faster_compile=fast_p(outcomes, faster_threshold, total, "compile") if compile_timed else None,
        fast_p={f"fast_{p:g}": fast_p(outcomes, p, total, "eager") for p in fast_p_thresholds},
        geomean_speedup_eager=geometric_mean(a.speedup_eager for a in passing if a.speedup_eager is not None),
        geomean_speedup_compile=geometric_mean(a.speedup_compile for a in passing if a.speedup_compile is not None),
        hack_rate=_share(sum(a.illegal for a in considered), len(considered)),
        judge_errors=sum(a.judge_error for a in considered),
        kernelbench_contract=contract,
        own_kernel_share=sum(shares) / len(shares) if shares else None,
        lazy=_share(sum(s < LAZY_SHARE for s in shares), len(shares)) if shares else None,
    )


def summarize(
    attempts: Iterable[Attempt],
    task_levels: Mapping[str, int],
    k: int,
    turns: int,
    faster_threshold: float = 1.1,
    fast_p_thresholds: Sequence[float] = FAST_P_THRESHOLDS,
) -> BenchMetrics:
    """Every metric of a run: first turn, best turn, best within each turn count, per level.

    Args:
        attempts: the run's attempts (attempts of tasks not in ``task_levels`` are ignored).
        task_levels: task id -> level, for every task of the run.
        k: samples per task.
        turns: attempts allowed per episode.
        faster_threshold: speedup above which an answer is ``faster``.
        fast_p_thresholds: the ``p`` values of ``fast_p``.

    Example:
        >>> tries = [Attempt("a", 1, 0, 1, "incorrect"), Attempt("a", 1, 0, 2, "ok", 1.5)]
        >>> m = summarize(tries, {"a": 1}, k=1, turns=2)
        >>> m.first_turn.pass_at_1, m.best_turn.pass_at_1, m.best_turn.faster_eager
        (0.0, 1.0, 1.0)
    """
    if turns < 1:
        raise ValueError("turns must be at least 1")
    episodes = group_episodes(attempts)
    task_ids = list(task_levels)

    def metrics(ids: Sequence[str], upto_turn: int | None) -> MetricSet:
        return metric_set(episodes, ids, k, upto_turn, faster_threshold, fast_p_thresholds)

    per_turn = tuple(metrics(task_ids, t) for t in range(1, turns + 1))
    per_level = {}
    for level in sorted(set(task_levels.values())):
        ids = [t for t in task_ids if task_levels[t] == level]
        per_level[level] = {"first_turn": metrics(ids, 1), "best_turn": metrics(ids, None)}
    return BenchMetrics(
        k=k,
        turns=turns,
        faster_threshold=faster_threshold,
        first_turn=per_turn[0],
        best_turn=metrics(task_ids, None),
        per_turn=per_turn,
        per_level=per_level,
    )
