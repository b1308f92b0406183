"""The full judge on the bundled cpu suite: every reference solution is ok; broken ones are caught."""

from __future__ import annotations

import json

import pytest

from kernelgym import Verifier
from kernelgym.verifier import EvalResult, Status

pytestmark = pytest.mark.slow

# (task id, a fragment of its bundled solution, a wrong replacement)
WRONG = [
    ("level1/1_ReLU", "v > 0.0f ? v : 0.0f", "v > 0.0f ? v : 0.1f"),
    ("level1/2_Sigmoid", "std::exp(-v)", "std::exp(-v * 1.01f)"),
    ("level1/7_Sum_Reduction_Over_Dim", "for (int64_t k = 1; k < r; ++k)", "for (int64_t k = 2; k < r; ++k)"),
    ("level1/10_Softmax", "for (int64_t j = 0; j < n; ++j) s +=", "for (int64_t j = 1; j < n; ++j) s +="),
    ("level1/14_Small_Matmul", "for (int64_t k = 0; k < K; ++k)", "for (int64_t k = 1; k < K; ++k)"),
    ("level2/1_Linear_ReLU", "double acc = pb[n];", "double acc = 0.0;"),
]
NOT_COMPILING = [task_id for task_id, _, _ in WRONG[:5]]
# One solution of each kind (elementwise, reduction, softmax, normalisation, matmul, convolution, a fused level-2 task)
# in the default run; every other solution of the suite under ``extended`` (each is a ~20 s build on 2 cores).
KINDS = ("level1/1_ReLU", "level1/2_Sigmoid", "level1/5_Add", "level1/7_Sum_Reduction_Over_Dim", "level1/10_Softmax",
         "level1/12_LayerNorm", "level1/14_Small_Matmul", "level1/16_Conv1D", "level2/1_Linear_ReLU")


def built_ahead(suite: dict, _items: list) -> list:
    """The answers this module's default tests build (``answers_built_ahead`` in ``tests/conftest.py``)."""
    task_id, old, new = WRONG[0]
    return [(suite[t], suite[t].solution("cpp")) for t in KINDS] + [(suite[task_id], suite[task_id].solution("cpp").replace(old, new, 1))]


def _judged(verifier: Verifier, tasks: list) -> dict[str, EvalResult]:
    results = verifier.evaluate_many([(t, t.solution("cpp")) for t in tasks])
    return {t.id: r for t, r in zip(tasks, results, strict=True)}


def _assert_all_ok(results: dict[str, EvalResult]) -> None:
    failures = {tid: r.feedback for tid, r in results.items() if r.status is not Status.OK}
    assert failures == {}
    for result in results.values():
        assert result.legal and result.compiled and result.correct
        assert result.speedup_eager is not None and result.speedup_eager > 0
        assert result.custom_kernel_calls >= 1
        assert 0.6 <= result.score <= 1.0


@pytest.fixture(scope="module")
def reference_results(cpu_verifier: Verifier, cpu_suite) -> dict[str, EvalResult]:
    return _judged(cpu_verifier, [t for t in cpu_suite if t.id in KINDS])


def test_suite_is_large_enough(cpu_suite) -> None:
    assert len(cpu_suite) >= 20
    assert all("cpp" in t.solutions and t.variants for t in cpu_suite)
    assert set(KINDS) <= {t.id for t in cpu_suite}


def test_a_reference_solution_of_each_kind_is_ok(reference_results: dict[str, EvalResult]) -> None:
    assert len(reference_results) == len(KINDS)
    _assert_all_ok(reference_results)


@pytest.mark.extended
def test_every_other_reference_solution_is_ok(cpu_verifier: Verifier, cpu_suite) -> None:
    _assert_all_ok(_judged(cpu_verifier, [t for t in cpu_suite if t.id not in KINDS]))


def test_results_are_json_round_trips(reference_results: dict[str, EvalResult]) -> None:
    for result in reference_results.values():
        assert EvalResult.from_dict(json.loads(result.to_json())) == result


def test_identical_candidate_skips_the_build(reference_results, cpu_verifier: Verifier, cpu_suite) -> None:
    task = cpu_suite["level1/5_Add"]
    again = cpu_verifier.evaluate(task, task.solution("cpp"))
    assert again.status is Status.OK
    assert again.cache_hit
    assert again.seconds.build < 2.0


@pytest.mark.parametrize(("task_id", "old", "new"), [WRONG[0], *(pytest.param(*w, marks=pytest.mark.extended) for w in WRONG[1:])])
def test_wrong_kernels_are_incorrect(cpu_verifier: Verifier, cpu_suite, task_id: str, old: str, new: str) -> None:
    task = cpu_suite[task_id]
    solution = task.solution("cpp")
    assert old in solution
    result = cpu_verifier.evaluate(task, solution.replace(old, new, 1))
    assert result.status is Status.INCORRECT, result.feedback
    assert result.compiled and result.legal and not result.correct
    assert "max abs error" in result.feedback and "max rel error" in result.feedback
    assert "first mismatch at index (" in result.feedback
    assert 0.0 < result.score < 0.6


@pytest.mark.parametrize("task_id", [NOT_COMPILING[0], *(pytest.param(t, marks=pytest.mark.extended) for t in NOT_COMPILING[1:])])
def test_broken_code_is_a_compile_error(cpu_verifier: Verifier, cpu_suite, cache_dir, task_id: str) -> None:
    task = cpu_suite[task_id]
    solution = task.solution("cpp").replace(
        "#include <torch/extension.h>", "#include <torch/extension.h>\nstatic int kg_broken = undefined_symbol_xyz;", 1
    )
    result = cpu_verifier.evaluate(task, solution)
    assert result.status is Status.COMPILE_ERROR
    status, first_error, code = result.feedback.splitlines()[:3]
    assert status == "Status: compile_error"
    assert first_error.startswith("main.cpp:") and "error" in first_error and "undefined_symbol_xyz" in first_error
    assert "undefined_symbol_xyz" in code
    assert str(cache_dir) not in result.feedback
    assert not result.compiled and result.score == 0.0
