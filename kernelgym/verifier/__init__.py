"""The judge: extract -> inspect -> build -> check -> time -> score.

Holds the verifier's data and stages: ``VerifierConfig``, ``StageTimeouts``,
``RewardSpec``, ``EvalResult``, ``Status``, ``Violation``, ``StageSeconds``,
``JudgeJob``, ``run_static_stages`` / ``StaticOutcome`` and ``backend_language``.
The worker-side stages live in ``judge`` (imported only by worker processes).
The front door that pairs these stages with an executor is ``kernelgym.Verifier``
(``kernelgym.executor.front``), one layer up.
"""

from __future__ import annotations

from kernelgym.backends import backend_language
from kernelgym.verifier.config import StageTimeouts, VerifierConfig
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import STAGES, EvalResult, StageSeconds, Status, Violation
from kernelgym.verifier.reward import RewardSpec
from kernelgym.verifier.static import StaticOutcome, run_static_stages

__all__ = [
    "STAGES", "EvalResult", "JudgeJob", "RewardSpec", "StageSeconds", "StageTimeouts", "StaticOutcome", "Status",
    "VerifierConfig", "Violation", "backend_language", "run_static_stages",
]
