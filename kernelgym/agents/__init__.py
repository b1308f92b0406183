"""Agents: the Agent protocol, its request types, the agent registry and the bundled agents.

Holds (from ``kernelgym.agents.base``): the Agent protocol and its request types, the agent
registry. The benchmark runner that drives agents lives in ``kernelgym.bench``; the verl
training integration in ``kernelgym.training``.
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
