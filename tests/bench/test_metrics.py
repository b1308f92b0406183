"""Benchmark metrics on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from kernelgym.bench.metrics import (
    Attempt,
    best_attempt,
    fast_p,
    geometric_mean,
    group_episodes,
    metric_set,
    pass_at_k,
    summarize,
)


def attempt(task: str, sample: int, turn: int, status: str, eager: float | None = None,
            compile_: float | None = None, level: int = 1, score: float = 0.0) -> Attempt:
    return Attempt(task, level, sample, turn, status, eager, compile_, score)


# --- pass@k ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (10, 3, 1, 3 / 10),
        (10, 3, 5, 1 - 21 / 252),  # C(7,5) = 21, C(10,5) = 252
        (8, 1, 8, 1.0),
        (8, 0, 8, 0.0),
        (5, 2, 2, 1 - 3 / 10),  # C(3,2) = 3, C(5,2) = 10
        (4, 4, 1, 1.0),
        (3, 0, 1, 0.0),
    ],
)
def test_pass_at_k_matches_hand_computed_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_the_combinatorial_formula_on_a_grid() -> None:
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1.0 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# --- geometric mean, fast_p ---------------------------------------------------------------------


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert geometric_mean([]) is None
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])


def test_fast_p_counts_missing_untimed_and_failed_episodes_as_failures() -> None:
    outcomes = [
        attempt("a", 0, 1, "ok", eager=2.0),
        attempt("b", 0, 1, "ok", eager=0.9),
        attempt("c", 0, 1, "ok", eager=None),  # correct but untimed: not shown to be fast
        attempt("d", 0, 1, "illegal", eager=50.0),  # a fast hack is no success
        None,  # an unfinished episode
    ]
    total = 8  # three more episodes were expected but never ran
    assert fast_p(outcomes, 0.0, total) == pytest.approx(2 / 8)
    assert fast_p(outcomes, 0.8, total) == pytest.approx(2 / 8)
    assert fast_p(outcomes, 1.0, total) == pytest.approx(1 / 8)
    assert fast_p(outcomes, 2.0, total) == 0.0  # strictly faster than p
    assert fast_p([], 1.0, total=0) == 0.0


def test_fast_p_compile_baseline_reads_the_compile_speedup() -> None:
    outcomes = [attempt("a", 0, 1, "ok", eager=3.0, compile_=0.5), attempt("b", 0, 1, "ok", eager=0.5, compile_=1.5)]
    assert fast_p(outcomes, 1.1, 2, baseline="eager") == 0.5
    assert fast_p(outcomes, 1.1, 2, baseline="compile") == 0.5
    assert fast_p(outcomes, 2.0, 2, baseline="compile") == 0.0
    with pytest.raises(ValueError):
        fast_p(outcomes, 1.0, total=1)


# --- episodes ----------------------------------------------------------------------------------


def test_best_attempt_prefers_passing_then_speed_then_score_then_earlier_turn() -> None:
    tries = [
        attempt("a", 0, 1, "incorrect", score=0.1),
        attempt("a", 0, 2, "ok", eager=1.2, score=0.6),
        attempt("a", 0, 3, "ok", eager=0.8, score=0.6),
        attempt("a", 0, 4, "illegal", eager=9.0),
        attempt("a", 0, 5, "ok", eager=1.2, score=0.6),
    ]
    assert best_attempt(tries).turn == 2
    assert best_attempt(tries, upto_turn=1).turn == 1
    assert best_attempt([]) is None
    assert best_attempt([attempt("a", 0, 1, "compile_error", score=0.0), attempt("a", 0, 2, "incorrect", score=0.1)]).turn == 2


def test_group_episodes_sorts_turns() -> None:
    groups = group_episodes([attempt("a", 1, 2, "ok"), attempt("a", 0, 1, "ok"), attempt("a", 1, 1, "incorrect")])
    assert sorted(groups) == [("a", 0), ("a", 1)]
    assert [a.turn for a in groups[("a", 1)]] == [1, 2]


# --- metric sets ---------------------------------------------------------------------------------


def test_metric_set_on_a_hand_computed_run() -> None:
    # k = 3 samples over tasks a, b, c; task c never ran (counts as 3 failures).
    # a: samples pass, pass (speedups 2.0, 0.5), illegal        -> c_a = 2
    # b: sample 0 passes with speedup 1.1 (not > 1.1), sample 1 incorrect, sample 2 missing -> c_b = 1
    attempts = [
        attempt("a", 0, 1, "ok", eager=2.0, compile_=1.0),
        attempt("a", 1, 1, "ok", eager=0.5),
        attempt("a", 2, 1, "illegal", eager=40.0),
        attempt("b", 0, 1, "ok", eager=1.1, compile_=4.0),
        attempt("b", 1, 1, "incorrect"),
        attempt("zzz", 0, 1, "ok", eager=9.0),  # a task outside the run: ignored
        attempt("a", 3, 1, "ok", eager=9.0),  # a sample beyond k: ignored
    ]
    m = metric_set(group_episodes(attempts), ["a", "b", "c"], k=3, faster_threshold=1.1)
    assert (m.tasks, m.episodes, m.attempts, m.passed) == (3, 5, 5, 3)
    assert m.pass_at_1 == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert m.pass_at_k == pytest.approx((1 + 1 + 0) / 3)
    assert m.avg_at_k == pytest.approx(3 / 9)
    assert m.faster_eager == pytest.approx(1 / 9)  # only a/0 (2.0 > 1.1)
    assert m.faster_compile == pytest.approx(1 / 9)  # only b/0 (4.0 > 1.1)
    assert m.fast_p["fast_0"] == pytest.approx(3 / 9)
    assert m.fast_p["fast_1"] == pytest.approx(2 / 9)
    assert m.fast_p["fast_2"] == 0.0
    assert sorted(m.fast_p) == ["fast_0", "fast_0.5", "fast_0.8", "fast_1", "fast_1.5", "fast_2"]
    assert m.fast_p["fast_0.5"] == pytest.approx(2 / 9)  # 0.5 is not > 0.5
    assert m.geomean_speedup_eager == pytest.approx((2.0 * 0.5 * 1.1) ** (1 / 3))
    assert m.geomean_speedup_compile == pytest.approx((1.0 * 4.0) ** 0.5)
    assert m.hack_rate == pytest.approx(1 / 5)


def test_metric_set_without_compile_timings_reports_none() -> None:
    m = metric_set(group_episodes([attempt("a", 0, 1, "ok", eager=1.5)]), ["a"], k=1)
    assert m.faster_compile is None and m.geomean_speedup_compile is None
    assert m.pass_at_1 == m.pass_at_k == m.avg_at_k == m.faster_eager == 1.0


def test_metric_set_with_nothing_run_is_all_failures() -> None:
    m = metric_set({}, ["a", "b"], k=2)
    assert (m.pass_at_1, m.pass_at_k, m.avg_at_k, m.faster_eager, m.hack_rate) == (0.0, 0.0, 0.0, 0.0, 0.0)
    assert m.geomean_speedup_eager is None and m.episodes == 0


# --- run summaries -------------------------------------------------------------------------------


def test_summarize_first_turn_best_turn_per_turn_and_levels() -> None:
    # k = 2, 3 turns. Task a (level 1): sample 0 fails, then passes at turn 2 (1.5x);
    # sample 1 is illegal, illegal, then passes at turn 3 (0.9x). Task b (level 2): passes at once (1.2x).
    attempts = [
        attempt("a", 0, 1, "compile_error"),
        attempt("a", 0, 2, "ok", eager=1.5),
        attempt("a", 1, 1, "illegal"),
        attempt("a", 1, 2, "illegal"),
        attempt("a", 1, 3, "ok", eager=0.9),
        attempt("b", 0, 1, "ok", eager=1.2, level=2),
        attempt("b", 1, 1, "incorrect", level=2),
        attempt("b", 1, 2, "incorrect", level=2),
        attempt("b", 1, 3, "incorrect", level=2),
    ]
    m = summarize(attempts, {"a": 1, "b": 2}, k=2, turns=3, faster_threshold=1.1)
    assert m.first_turn.pass_at_1 == pytest.approx((0 + 1 / 2) / 2)
    assert m.first_turn.hack_rate == pytest.approx(1 / 4)
    assert [t.pass_at_1 for t in m.per_turn] == pytest.approx([0.25, 0.5, 0.75])
    assert [t.pass_at_k for t in m.per_turn] == pytest.approx([0.5, 1.0, 1.0])
    assert [t.faster_eager for t in m.per_turn] == pytest.approx([0.25, 0.5, 0.5])
    assert m.per_turn[1].hack_rate == pytest.approx(2 / 7)
    assert m.best_turn == m.per_turn[-1]
    assert m.best_turn.hack_rate == pytest.approx(2 / 9)
    assert sorted(m.per_level) == [1, 2]
    assert m.per_level[1]["first_turn"].pass_at_1 == 0.0
    assert m.per_level[1]["best_turn"].pass_at_1 == 1.0
    assert m.per_level[2]["best_turn"].pass_at_1 == 0.5
    assert m.per_level[2]["best_turn"].faster_eager == 0.5
    data = m.to_dict()
    assert data["per_level"]["1"]["best_turn"]["pass_at_1"] == 1.0
    assert len(data["per_turn"]) == 3


def test_attempt_from_a_full_record_ignores_extra_fields() -> None:
    record = {"task_id": "a", "level": 2, "sample": 1, "turn": 3, "status": "illegal", "speedup_eager": 3.0,
              "response": "...", "feedback": "...", "violations": []}
    a = Attempt.from_dict(record)
    assert a.illegal and not a.ok and a.speedup("eager") == 3.0 and a.speedup("compile") is None
    with pytest.raises(ValueError):
        a.speedup("inductor")


# --- judge errors ----------------------------------------------------------------------------


def test_judge_errors_count_as_failures_and_are_named_in_the_report() -> None:
    from kernelgym.bench.config import BenchSummary
    from kernelgym.verifier.result import JUDGE_ERROR_FLAG

    records = [
        {"task_id": "a", "level": 1, "sample": 0, "turn": 1, "status": "ok", "speedup_eager": 1.2, "flags": []},
        {"task_id": "b", "level": 1, "sample": 0, "turn": 1, "status": "runtime_error", "flags": [JUDGE_ERROR_FLAG]},
        {"task_id": "c", "level": 1, "sample": 0, "turn": 1, "status": "runtime_error", "flags": []},
        {"task_id": "d", "level": 1, "sample": 0, "turn": 1, "status": "judge_error", "flags": []},
    ]
    attempts = [Attempt.from_dict(r) for r in records]
    assert [a.judge_error for a in attempts] == [False, True, False, True]
    metrics = summarize(attempts, {"a": 1, "b": 1, "c": 1, "d": 1}, k=1, turns=1)
    assert metrics.best_turn.judge_errors == 2 and metrics.best_turn.pass_at_1 == pytest.approx(1 / 4)
    assert metrics.to_dict()["best_turn"]["judge_errors"] == 2
    summary = BenchSummary(suite="s", agent="x", backend="cpp", k=1, turns=1, task_ids=("a", "b", "c", "d"), episodes=4,
                           attempts=4, complete=True, device="cpu", timing_meaningful=True, metrics=metrics, out_dir="o")
    assert "2 attempt(s) failed in the judge, not in the answer" in summary.report()
    clean = summarize(attempts[:1], {"a": 1}, k=1, turns=1)
    assert "failed in the judge" not in BenchSummary(**{**vars(summary), "metrics": clean}).report()


def test_under_the_kernelbench_preset_fast_p_is_reported_under_both_contracts() -> None:
    records = [
        {"task_id": "a", "level": 1, "sample": 0, "turn": 1, "status": "ok", "speedup_eager": 2.0, "rules": "kernelbench"},
        # strict: stale output on redrawn weights; KernelBench's contract: correct at 2.8x
        {"task_id": "b", "level": 1, "sample": 0, "turn": 1, "status": "incorrect", "rules": "kernelbench",
         "kernelbench_status": "ok", "kernelbench_speedup": 2.8},
        {"task_id": "c", "level": 1, "sample": 0, "turn": 1, "status": "compile_error", "rules": "kernelbench"},
    ]
    metrics = summarize([Attempt.from_dict(r) for r in records], {"a": 1, "b": 1, "c": 1}, k=1, turns=1)
    assert metrics.first_turn.fast_p["fast_1"] == pytest.approx(1 / 3)
    assert metrics.first_turn.kernelbench_contract == pytest.approx(
        {"avg_at_k": 2 / 3, **{f"fast_{p:g}": v for p, v in [(0, 2 / 3), (0.5, 2 / 3), (0.8, 2 / 3), (1, 2 / 3), (1.5, 2 / 3), (2, 1 / 3)]}})
    native = summarize([Attempt.from_dict({**records[0], "rules": "native"})], {"a": 1}, k=1, turns=1)
    assert native.first_turn.kernelbench_contract is None
