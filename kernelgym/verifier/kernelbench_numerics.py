"""KernelBench's own numbers, for the verdict under its contract (trusted side).

KernelBench's evaluator (``eval_kernel_against_ref``) builds both models after seeding 42, draws each of its five
correctness trials' inputs with ``get_inputs()`` on the host after seeding that trial's seed (the five drawn with
``torch.randint`` after ``torch.manual_seed(42)``), casts the input tensors to fp32, moves them to the device, seeds
again and moves each model ``.to(device, dtype=torch.float32)`` before the calls, and calls an output right when ``torch.allclose(output, output_new, atol=tol, rtol=tol)``.
The contract's check does the same, so an answer near the tolerance, or one whose result depends on the values
drawn, gets the verdict KernelBench gives it. kernelgym's own check keeps fresh seeds (an answer cannot know its
inputs) and its own comparison (:func:`~kernelgym.verifier.compare.compare_outputs`).

Holds:
    KERNELBENCH_SEED / KERNELBENCH_TRIALS: the seed and number of correctness trials KernelBench uses.
    kernelbench_seeds: the seeds of a judgement under the contract (models, trials, timing inputs, re-check).
    kernelbench_inputs: a task's inputs drawn as KernelBench draws them.
    reseed: the seeding KernelBench does between drawing a trial's inputs and calling the models.
    job_inputs: a job's inputs from a seed: KernelBench's way under its numbers, else kernelgym's (on the device).
    allclose_mismatch: KernelBench's comparison of one output with the reference's.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType
from typing import Any

import torch

from kernelgym.verifier.compare import Mismatch, flatten_outputs
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.trial_inputs import draw_inputs

__all__ = ["KERNELBENCH_SEED", "KERNELBENCH_TRIALS", "allclose_mismatch", "job_inputs", "kernelbench_inputs", "kernelbench_seeds",
           "reseed"]

KERNELBENCH_SEED = 42
"""The seed KernelBench's evaluator builds both models from, draws its trial seeds from and draws timing inputs from."""

KERNELBENCH_TRIALS = 5
"""Correctness trials of KernelBench's evaluation (``num_correct_trials`` as its scripts call it)."""


@cache
def kernelbench_seeds(trials: int = KERNELBENCH_TRIALS) -> tuple[int, ...]:
    """The seeds of a judgement as KernelBench seeds it: the models' seed, one per trial, then the timing inputs'
    and the re-check's (its timing draws with the models' seed).

    The trial seeds are what ``torch.manual_seed(42)`` then ``torch.randint(0, 2**32 - 1, (1,)).item()`` per trial
    gives (on a generator of its own here: the judge's global one is left alone).

    Example:
        >>> seeds = kernelbench_seeds(5)
        >>> len(seeds), seeds[0], seeds[-1]
        (8, 42, 42)
    """
    generator = torch.Generator().manual_seed(KERNELBENCH_SEED)
    drawn = [int(torch.randint(0, 2**32 - 1, (1,), generator=generator).item()) for _ in range(trials)]
    return (KERNELBENCH_SEED, *drawn, KERNELBENCH_SEED, KERNELBENCH_SEED)


def reseed(seed: int) -> None:
    """KernelBench's ``set_seed``: the host's generator and every device's (``torch.manual_seed`` seeds both)."""
    torch.manual_seed(seed)


def kernelbench_inputs(module: ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``get_inputs()`` drawn on the host after seeding ``seed``, each floating tensor cast to fp32, every tensor moved
    to ``device``.

    KernelBench's current ``_process_input_tensor`` casts integer tensors to fp32 too, which breaks its own reference
    wherever they are indices or class targets (its ``level1/95_CrossEntropyLoss``: "expected target dtype to be Long");
    they keep their dtype here, so such a task has a verdict under the contract.
    """
    reseed(seed)
    values = list(module.get_inputs())
    return [(v.to(dtype=torch.float32) if v.is_floating_point() else v).to(device) if isinstance(v, torch.Tensor) else v
            for v in values]


def job_inputs(job: JudgeJob, module: ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``job``'s inputs from ``seed``: as KernelBench draws them (:func:`kernelbench_inputs`) where it is checked with
    KernelBench's numbers (``JudgeJob.kernelbench_numerics``), else on the device (:func:`draw_inputs`)."""
    return (kernelbench_inputs if job.kernelbench_numerics else draw_inputs)(module, seed, device)


def allclose_mismatch(expected: Any, got: list[Any], atol: float, rtol: float) -> Mismatch | None:
    """KernelBench's check of the candidate's outputs ``got`` (leaves) against the reference's ``expected``.

    Per tensor leaf, as its evaluator compares its one output: another shape fails; otherwise the leaf passes when
    ``torch.allclose(reference, candidate, atol, rtol)`` (``|reference - candidate| <= atol + rtol * |candidate|``)
    holds, computed by torch in the leaves' own dtype; outputs of two dtypes fail, as ``allclose`` raises on them.
    Where the leaves themselves differ (count, kind), :func:`~kernelgym.verifier.compare.compare_outputs`'s
    structure check has already said so.

    Example:
        >>> ref = torch.tensor([1.0, 2.0])
        >>> allclose_mismatch(ref, [ref + 5e-5], 1e-4, 1e-4) is None
        True
        >>> allclose_mismatch(ref, [ref + 1e-3], 1e-4, 1e-4).rule
        'wrong-output'
    """
    refs = flatten_outputs(expected)
    for index, (ref, new) in enumerate(zip(refs, got, strict=True)):
        if not isinstance(ref, torch.Tensor) or not isinstance(new, torch.Tensor):
            continue
        label = f"output {index}" if len(refs) > 1 else "the output"
        if new.shape != ref.shape:
            return Mismatch("wrong-output", f"{label} has shape {tuple(new.shape)}, expected {tuple(ref.shape)}")
        if new.dtype != ref.dtype:
            return Mismatch("wrong-output", f"{label} is {new.dtype}, the reference's {ref.dtype}: KernelBench's "
                                            "torch.allclose raises on two dtypes")
        new = new.to(ref.device)
        try:
            if torch.allclose(ref, new, atol=atol, rtol=rtol, equal_nan=False):
                continue
        except RuntimeError as exc:  # a dtype allclose cannot compare (bool): as KernelBench's run fails on it
            return Mismatch("wrong-output", f"KernelBench's torch.allclose cannot compare {label}: {str(exc).splitlines()[0][:200]}")
        diff = (ref.double() - new.double()).abs()
        finite = diff[torch.isfinite(diff)]
        worst = float(finite.max()) if finite.numel() else float("inf")
        beyond = int((~torch.isclose(ref, new, atol=atol, rtol=rtol)).sum())
        return Mismatch("wrong-output", f"{label} differs from the reference beyond KernelBench's torch.allclose "
                                        f"(atol={atol:g}, rtol={rtol:g}) on {beyond} of {ref.numel()} elements "
                                        f"(max abs difference {worst:.3g}, mean {float(diff.mean()):.3g})")
    return None
