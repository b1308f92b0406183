"""The unit of work sent to a worker process.

Holds:
    JudgeJob: a candidate that passed the static stages, with everything the
        worker needs to build, check and time it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.result import EvalResult

__all__ = ["JudgeJob"]


@dataclass(frozen=True)
class JudgeJob:
    """A candidate program ready for the worker stages.

    Attributes:
        task: the task it answers.
        code: the extracted candidate program.
        backend: backend name.
        config: verifier settings.
        seeds: the seed models are built with, one per correctness trial, one
            for timing inputs and one for the post-timing re-check (drawn by the caller).
        extract_seconds: time the caller spent extracting.
        inspect_seconds: time the caller spent on static analysis.
        build_only: stop after the build stage (a build-ahead step that fills the
            content-addressed cache; the Ray pool runs it on CPU actors before a
            GPU actor checks and times the candidate).
        defer_builds: a build request the store cannot answer is not compiled by the judge: the job is left to
            the build workers (:class:`~kernelgym.verifier.channel.BuildsDeferred`) and judged when it is built.
        prebuild: build requests a build worker serves before it builds the answer (those a judge deferred).
        strict_rejection: the static stages' ``illegal`` verdict of an answer that broke only rules KernelBench's
            contract does not have (``kernelbench`` preset): the worker judges it under that contract, without
            them, and returns this verdict with the contract's (``kernelbench_status``).
        kernelbench_numerics: checked with KernelBench's own seeds, inputs and comparison
            (:mod:`~kernelgym.verifier.kernelbench_numerics`): the check of KernelBench's contract.
    """

    task: Task
    code: str
    backend: str
    config: VerifierConfig
    seeds: tuple[int, ...]
    extract_seconds: float = 0.0
    inspect_seconds: float = 0.0
    build_only: bool = False
    defer_builds: bool = False
    prebuild: tuple[dict[str, Any], ...] = ()
    strict_rejection: EvalResult | None = None
    kernelbench_numerics: bool = False
