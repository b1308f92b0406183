"""Rule presets: which rules a judgement enforces.

Holds:
    RulePreset: a named preset: the rules it waives, the native-symbol concerns it admits, the hint for an illegal answer.
    PRESETS: ``native`` (the default) and ``kernelbench``.
    get_preset: a preset by name, with a clear error for an unknown one.
    CONTRACT_WAIVED / contract_preset: what KernelBench's own contract does not check.
    KERNELBENCH_TOLERANCE / tolerances: the tolerances a judgement compares with (KernelBench's floor under its preset).

``native`` is MooreEval's rule: no PyTorch/ATen fallback, every output computed
by the candidate's own kernel. ``kernelbench`` judges by KernelBench's own rule,
where PyTorch operators are allowed inside ``ModelNew`` (numbers comparable with
its leaderboard); every hack defense stays on: streams, threads, caches,
forging, timing tricks, process state, precision, host array libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kernelgym.errors import KernelGymError

if TYPE_CHECKING:
    from kernelgym.verifier.job import JudgeJob

__all__ = ["CONTRACT_WAIVED", "KERNELBENCH_TOLERANCE", "RulePreset", "PRESETS", "contract_preset", "get_preset", "tolerances"]

CONTRACT_WAIVED = frozenset({"global-flags", "torch-compiler", "precision-downgrade", "file-access", "forbidden-import"})
"""Static rules of the ``kernelbench`` preset that KernelBench's own contract does not have: process-wide settings
(TF32, ``cudnn.benchmark``), PyTorch's compilers and CUDA graphs, a lower precision within its tolerance, files and
modules beyond the allowed ones (the candidate's sandbox bounds what they reach). They stay in the strict verdict;
an answer that breaks only these is also judged without them (:func:`contract_preset`), for its verdict under
KernelBench's contract (``EvalResult.kernelbench_status``)."""


def contract_preset(preset: RulePreset) -> RulePreset:
    """``preset`` as KernelBench's contract judges: without :data:`CONTRACT_WAIVED`, settings the answer changes
    allowed (functions it replaces are not) and mirrored for the reference, inputs written in place and returned
    allowed (KernelBench calls the reference first, on the same inputs)."""
    return replace(preset, waived=preset.waived | CONTRACT_WAIVED | {"input-mutation", "output-aliases-input"})


@dataclass(frozen=True)
class RulePreset:
    """What a preset changes from the full rule set.

    Attributes:
        name: the preset's name (recorded in every result).
        waived: rule ids not enforced (static and runtime).
        admitted_concerns: native-symbol concerns a built extension may link against
            (see :mod:`kernelgym.backends.symbols`).
        summary: one sentence, for docs and ``--help``.
        illegal_hint: the hint under an ``illegal`` verdict (what this preset asks of an answer).
        tf32_convolutions: cuDNN convolutions in TF32, PyTorch's default, for the reference and the answer alike
            (KernelBench's process keeps it; its fp32 references are ~1e-3 off full fp32). ``False``: both compute
            convolutions in full fp32, which an exact answer can match within the fp32 tolerance.
    """

    name: str
    waived: frozenset[str]
    admitted_concerns: frozenset[str]
    summary: str
    illegal_hint: str
    tf32_convolutions: bool = False


PRESETS = {
    "native": RulePreset(
        "native", frozenset(), frozenset(),
        "native kernels only: no PyTorch/ATen compute in ModelNew or its extensions (MooreEval's rule; the default)",
        "Compute every output in your own native kernel; PyTorch/ATen may only allocate and reshape.",
    ),
    "kernelbench": RulePreset(
        "kernelbench",
        frozenset({
            "torch-compute-in-forward", "kernel-not-called", "no-native-kernel", "native-torch-compute", "native-library",
            "try-except-fallback", "aten-fallback", "aten-compute-sampled", "decoy-kernel", "private-torch-compute",
            # its purpose is hidden PyTorch compute, which this preset allows (nn.ModuleList loops call run-time names)
            "unresolved-call",
        }),
        frozenset({"ATen compute", "vendor library"}),
        "PyTorch operators allowed in ModelNew, as KernelBench allows them; every hack defense stays on",
        "PyTorch operators are allowed here, but not what the rule above names: compute each call's outputs from "
        "its own inputs, on the default stream, without threads, patches or timing tricks.",
        tf32_convolutions=True,
    ),
}


def get_preset(name: str) -> RulePreset:
    """The preset called ``name``.

    Raises:
        KernelGymError: no preset has that name.

    Example:
        >>> sorted(get_preset("kernelbench").waived)[:2]
        ['aten-compute-sampled', 'aten-fallback']
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise KernelGymError(f"unknown rule preset {name!r}; choose one of: {', '.join(PRESETS)}") from None


KERNELBENCH_TOLERANCE = 1e-4
"""KernelBench's ``atol`` and ``rtol`` for fp32 outputs (its evaluator's ``get_tolerance_for_precision``; 1e-2 for fp16
and bf16, as ``low_precision_tol``; its v0 and v0.1 used 1e-2 for all): the least the ``kernelbench`` preset uses."""


def tolerances(job: JudgeJob) -> tuple[float, float]:
    """The task's own tolerances, else the config's (at least KernelBench's under the ``kernelbench`` preset)."""
    task, config = job.task, job.config
    floor = KERNELBENCH_TOLERANCE if config.rules == "kernelbench" else 0.0
    return (
        task.atol if task.atol is not None else max(config.atol, floor),
        task.rtol if task.rtol is not None else max(config.rtol, floor),
    )
