"""The judge: extract -> inspect -> build -> check -> time -> score.

Holds the public API: ``Verifier``, ``VerifierConfig``, ``StageTimeouts``,
``RewardSpec``, ``EvalResult``, ``Status``, ``Violation``, ``StageSeconds``,
``JudgeJob``, the executor registry and ``backend_language``. The worker-side
stages live in ``judge`` (imported only by worker processes).
"""

from __future__ import annotations

from kernelgym.verifier.config import StageTimeouts, VerifierConfig
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import STAGES, EvalResult, StageSeconds, Status, Violation
from kernelgym.verifier.reward import RewardSpec
from kernelgym.executor.front import (
    Executor,
    Verifier,
    backend_language,
    executor_names,
    make_executor,
    register_executor,
)

__all__ = [
    "STAGES", "EvalResult", "Executor", "JudgeJob", "RewardSpec", "StageSeconds", "StageTimeouts", "Status",
    "Verifier", "VerifierConfig", "Violation", "backend_language", "executor_names", "make_executor",
    "register_executor",
]
