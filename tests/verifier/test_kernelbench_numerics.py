"""KernelBench's own numbers for the check of its contract: its seeds, its inputs, its ``torch.allclose``."""

from __future__ import annotations

import types

import torch

from kernelgym.verifier.kernelbench_numerics import allclose_mismatch, kernelbench_inputs, kernelbench_seeds


def test_the_trial_seeds_are_the_ones_kernelbench_draws_and_the_global_generator_is_left_alone() -> None:
    torch.manual_seed(7)
    before = torch.random.get_rng_state()
    seeds = kernelbench_seeds(5)
    assert torch.equal(torch.random.get_rng_state(), before)
    # run_and_check_correctness: torch.manual_seed(seed); [torch.randint(0, 2**32 - 1, (1,)).item() for each trial]
    torch.manual_seed(42)
    drawn = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert seeds == (42, *drawn, 42, 42)


def test_inputs_are_drawn_on_the_host_after_the_seed_floating_ones_cast_to_fp32_and_indices_kept() -> None:
    task = types.SimpleNamespace(get_inputs=lambda: [torch.randn(4, 3, dtype=torch.float64), torch.randint(0, 5, (4,)), 2.5])
    inputs = kernelbench_inputs(task, 1234, torch.device("cpu"))
    torch.manual_seed(1234)
    expected = [torch.randn(4, 3, dtype=torch.float64).float(), torch.randint(0, 5, (4,))]
    assert inputs[0].dtype is torch.float32 and torch.equal(inputs[0], expected[0])
    # Class targets stay integers (KernelBench's cast to fp32 breaks its own CrossEntropyLoss reference).
    assert inputs[1].dtype is torch.int64 and torch.equal(inputs[1], expected[1])
    assert inputs[2] == 2.5


def test_the_comparison_is_allclose_relative_to_the_candidate_with_no_scaling_to_the_output_s_magnitude() -> None:
    reference = torch.tensor([0.0, 100.0])
    assert allclose_mismatch(reference, [reference + 5e-5], 1e-4, 1e-4) is None
    # 1e-3 off: within 1e-4 + 1e-4 * 100 at the large element, not at the one near zero
    mismatch = allclose_mismatch(reference, [reference + 1e-3], 1e-4, 1e-4)
    assert mismatch is not None and "on 1 of 2 elements" in mismatch.message
    # 1.5e-4 off at magnitude 1: within atol + rtol * abs(candidate)
    assert allclose_mismatch(torch.tensor([1.0]), [torch.tensor([1.0 + 1.5e-4])], 1e-4, 1e-4) is None


def test_another_dtype_or_shape_or_nan_fails_as_kernelbench_s_allclose_does() -> None:
    reference = torch.ones(3)
    assert "dtypes" in allclose_mismatch(reference, [reference.half()], 1e-4, 1e-4).message
    assert "shape" in allclose_mismatch(reference, [torch.ones(1, 3)], 1e-4, 1e-4).message
    nan = torch.tensor([float("nan"), 1.0])
    assert allclose_mismatch(nan, [nan.clone()], 1e-4, 1e-4) is not None  # equal_nan=False in KernelBench's call
