"""Weighing samples of where a candidate's forward ran (kernelgym.verifier.sampled_compute), on hand-made samples.

The share of ATen's compute decides ``aten-compute-sampled``; the own share is the forward's kernel time in the
answer's own builds against ATen's; ``settled`` ends sampling once the verdict can no longer turn.
"""

from __future__ import annotations

import math

import pytest

from kernelgym.verifier.sampled_compute import (
    MIN_FORWARD_SAMPLES,
    MIN_KERNEL_SAMPLES,
    SHARE_LIMIT,
    UNMAPPED,
    CodeSample,
    ComputeShare,
    compute_share,
    poisson_bound,
    settled,
)

OWN = CodeSample("/cache/builds/0123/kg_relu.so", "_Z12relu_forwardN2at6TensorE._omp_fn.0")
GEMM = CodeSample("/torch/lib/libtorch_cpu.so", "mkl_blas_avx2_sgemm_kernel_0")
COPY = CodeSample("/torch/lib/libtorch_cpu.so", "_ZN2at6native12_GLOBAL__N_111copy_kernelERNS_18TensorIteratorBaseEb")
PYTHON = CodeSample("/usr/lib/libpython3.11.so.1.0", "_PyEval_EvalFrameDefault")
GOMP = CodeSample("/usr/lib/libgomp.so.1", "gomp_team_barrier_wait_end")
BUILDS = frozenset({OWN.path})


def test_the_own_share_is_the_answers_kernels_against_atens_beyond_the_probes() -> None:
    # Per call: 3 samples in the answer's kernel, 1 in MKL, 2 in Python and libgomp; the probes run copies and Python.
    calls = ([OWN] * 3 + [GEMM] + [PYTHON, GOMP] + [COPY, PYTHON]) * 20
    probes = [COPY, PYTHON] * 20
    share = compute_share(calls, probes, 20, 20, BUILDS)
    assert share.forward_samples == 120 and share.own_samples == 60 and share.torch_samples == 20
    assert share.own == pytest.approx(0.75)


def test_an_answer_that_leaves_its_work_to_pytorch_has_a_low_own_share() -> None:
    lazy = compute_share(([OWN] + [GEMM] * 9 + [PYTHON]) * 10, [PYTHON] * 10, 10, 10, BUILDS)
    assert lazy.own == pytest.approx(0.1)
    honest = compute_share(([OWN] * 4 + [COPY] + [PYTHON]) * 10, [COPY, PYTHON] * 10, 10, 10, BUILDS)
    assert honest.own == 1.0 and not honest.computed_in_aten


def test_the_own_share_counts_only_the_answers_builds() -> None:
    other = CodeSample("/cache/builds/4567/kg_other.so", "kernel")
    share = compute_share([OWN] * 10 + [other] * 10 + [GEMM] * 10, [], 10, 10, BUILDS)
    assert share.own_samples == 10 and share.own == pytest.approx(0.5)
    assert compute_share([OWN] * 30, [], 10, 10).own is None  # no builds named: none of it is the answer's kernels


def test_probes_are_weighed_by_the_calls_they_stand_for() -> None:
    # Ten calls against five probes: each probe's samples count twice.
    share = compute_share([OWN] * 40 + [COPY] * 20, [COPY] * 10 + [OWN] * 2, 10, 5, BUILDS)
    assert share.forward_samples == 60 - 24 and share.own_samples == 36


def test_too_few_kernel_samples_leave_the_own_share_unknown() -> None:
    few = compute_share(([OWN] + [PYTHON] * 9) * (MIN_KERNEL_SAMPLES - 1), [], 10, 10, BUILDS)
    assert few.forward_samples >= MIN_FORWARD_SAMPLES and few.own is None
    assert compute_share([OWN] * MIN_KERNEL_SAMPLES, [], 10, 10, BUILDS).own == 1.0
    assert ComputeShare(10, 10, 0.0, 0.0, refused="ptrace of thread 1 refused").own is None
    assert compute_share([], [], 0, 0, BUILDS).own is None


@pytest.mark.parametrize("count", [0, 1, 2, 5, 10, 40, 160])
def test_poisson_bounds_lie_beyond_the_exact_ones(count: int) -> None:
    def at_most(n: int, mean: float) -> float:
        if mean == 0:
            return 1.0
        return sum(math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1)) for i in range(n + 1))

    upper, lower = poisson_bound(count, True), poisson_bound(count, False)
    assert at_most(count, upper) <= 1e-3 < at_most(count, 0.97 * upper)  # beyond the exact bound, by under 3%
    assert lower == 0.0 if count == 0 else lower < count and 1 - at_most(count - 1, lower) <= 1e-3


def test_an_honest_forward_settles_once_the_upper_bound_of_atens_share_is_under_the_limit() -> None:
    # The forward's samples are the calls' beyond the probes'; none of them computes in ATen.
    needed = math.ceil(poisson_bound(0, True) / SHARE_LIMIT)
    assert MIN_FORWARD_SAMPLES < needed < 80
    assert not settled([OWN] * (needed - 1) + [COPY] * 30, [COPY] * 30)
    assert settled([OWN] * needed + [COPY] * 30, [COPY] * 30)


def test_samples_that_may_be_atens_delay_the_honest_verdict() -> None:
    assert not settled([OWN] * 78 + [GEMM] * 2, [])
    assert not settled([OWN] * 78 + [CodeSample(UNMAPPED)] * 2, [])  # code mapped since sampling began: not yet placed
    assert settled([OWN] * 150 + [GEMM] * 2, [])


def test_a_forward_computing_in_aten_settles_once_the_lower_bound_is_over_the_limit() -> None:
    assert settled([GEMM] * 30 + [PYTHON] * 30, [])
    assert compute_share([GEMM] * 30 + [PYTHON] * 30, [], 10, 10).computed_in_aten
    assert not settled([GEMM] * 12 + [PYTHON] * 60, [])  # 12 seen: its lower bound is under MIN_COMPUTE_SAMPLES
    assert not settled([GEMM] * 30 + [PYTHON] * 30, [GEMM] * 10)  # the probes' own compute is taken away first


def test_nothing_settles_under_the_fewest_forward_samples() -> None:
    assert not settled([GEMM] * (MIN_FORWARD_SAMPLES - 1), [])
    assert not settled([OWN] * 100, [PYTHON] * (100 - MIN_FORWARD_SAMPLES + 1))


def test_the_forwards_kernels_bound_its_samples_from_below_however_the_harness_varied() -> None:
    # The probes happened to hold more samples than the calls (the machine was busy): the kernels are still the forward's.
    calls, probes = [OWN] * 80 + [PYTHON] * 100, [PYTHON] * 200
    share = compute_share(calls, probes, 10, 10, BUILDS)
    assert share.forward_samples == 80 and share.own == 1.0
    assert settled(calls, probes, BUILDS) and not settled(calls, probes)


def test_sampling_settles_once_the_calls_left_could_not_show_enough_of_atens_compute() -> None:
    # No sample of ATen's compute in the calls made: at the upper bound of its rate, the calls the time left allows
    # would show fewer than MIN_COMPUTE_SAMPLES once they are made as well as with a third more.
    assert settled([OWN] * 5, [], remaining=0.5)
    assert not settled([OWN] * 5, [], remaining=1.0)
    assert not settled([OWN] * 5 + [GEMM] * 3, [], remaining=0.5)
