"""Agents and the agent benchmark.

Holds (from ``kernelgym.agents.base``): the Agent protocol and its request types, the agent
registry. The benchmark runner lives in ``kernelgym.agents.bench`` (``BenchConfig``,
``run_bench``) and its metrics in ``kernelgym.agents.metrics``; they are not imported here so
that ``import kernelgym.agents`` stays light.
"""

from __future__ import annotations

from kernelgym.agents.base import (
    DEFAULT_SYSTEM_PROMPT,
    Agent,
    AgentError,
    AgentRequest,
    BaseAgent,
    Exchange,
    agent_names,
    chat_messages,
    make_agent,
    register_agent,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Agent",
    "AgentError",
    "AgentRequest",
    "BaseAgent",
    "Exchange",
    "agent_names",
    "chat_messages",
    "make_agent",
    "register_agent",
]
