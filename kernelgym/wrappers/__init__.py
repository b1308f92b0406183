"""Wrappers for kernelgym environments.

Holds:
    PrimeEcho, prime_echo_rewards, PrimeEchoRewards: the first-turn-anchored multi-turn reward.
    BufferedDynamicRetry, RetryBuffer, RepairTask, RetryStats, Attempt, FailureRank, failure_rank,
        most_advanced_failure, repair_prompt: groups of episodes per task, failed groups recycled as repair tasks.
    ChatObservation, to_messages, DEFAULT_SYSTEM_PROMPT: chat messages for LLM agents.
    RecordEpisodes: one JSON line per step.
"""

from __future__ import annotations

from kernelgym.wrappers.chat import DEFAULT_SYSTEM_PROMPT, ChatObservation, to_messages
from kernelgym.wrappers.prime_echo import PrimeEcho, PrimeEchoRewards, prime_echo_rewards
from kernelgym.wrappers.record import RecordEpisodes
from kernelgym.wrappers.retry import (
    Attempt,
    BufferedDynamicRetry,
    FailureRank,
    RepairTask,
    RetryBuffer,
    RetryStats,
    failure_rank,
    most_advanced_failure,
    repair_prompt,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Attempt",
    "BufferedDynamicRetry",
    "ChatObservation",
    "FailureRank",
    "PrimeEcho",
    "PrimeEchoRewards",
    "RecordEpisodes",
    "RepairTask",
    "RetryBuffer",
    "RetryStats",
    "failure_rank",
    "most_advanced_failure",
    "prime_echo_rewards",
    "repair_prompt",
    "to_messages",
]
