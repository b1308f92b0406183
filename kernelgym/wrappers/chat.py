"""Chat-message views of a KernelEnv episode, for LLM agents.

Holds:
    DEFAULT_SYSTEM_PROMPT: the system message used unless another is given (``kernelgym.envs.prompt.SYSTEM_PROMPT``).
    to_messages: the chat messages of an episode from its prompt and its (attempt, feedback) turns.
    ChatObservation: a wrapper that keeps the episode's history and puts its messages in ``info``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym

from kernelgym.envs.prompt import SYSTEM_PROMPT, conversation

__all__ = ["DEFAULT_SYSTEM_PROMPT", "ChatObservation", "to_messages"]

DEFAULT_SYSTEM_PROMPT = SYSTEM_PROMPT


def to_messages(
    prompt: str,
    turns: Sequence[tuple[str, str]] = (),
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
) -> list[dict[str, str]]:
    """Build the chat messages of an episode (:func:`kernelgym.envs.prompt.conversation`).

    The order is: the system message, the task prompt as a user message, then for
    each previous turn the attempt as an assistant message and the verifier
    feedback as a user message asking for a fix.

    Args:
        prompt: the task prompt (``obs["prompt"]``).
        turns: ``(attempt, feedback)`` pairs of the previous turns, oldest first.
        system_prompt: the system message.

    Returns:
        ``[{"role": ..., "content": ...}, ...]``, ready for a chat template.

    Example:
        >>> [m["role"] for m in to_messages("Write ModelNew.", [("attempt 1", "does not compile")])]
        ['system', 'user', 'assistant', 'user']
    """
    return conversation(prompt, turns, system_prompt)


class ChatObservation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Put the chat messages for the agent's next turn into ``info["messages"]``.

    The observation itself is left unchanged, so it stays inside the inner env's
    ``observation_space`` (a list of messages is not a Gymnasium space); the
    messages are built by :func:`to_messages` from ``obs["prompt"]`` at reset and
    from each action and the ``obs["feedback"]`` that answered it. They are also
    available as :attr:`messages`.

    Args:
        env: a ``KernelEnv``-shaped env (``obs["prompt"]`` and ``obs["feedback"]``).
        system_prompt: the system message.

    Example:
        >>> import gymnasium as gym, kernelgym
        >>> env = ChatObservation(gym.make("kernelgym/CPU-v0", max_turns=2))
        >>> obs, info = env.reset(seed=0)
        >>> [m["role"] for m in info["messages"]]
        ['system', 'user']
        >>> obs, reward, terminated, truncated, info = env.step("I do not know.")
        >>> [m["role"] for m in info["messages"]]
        ['system', 'user', 'assistant', 'user']
        >>> env.close()
    """

    def __init__(self, env: gym.Env, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, system_prompt=system_prompt)
        gym.Wrapper.__init__(self, env)
        self.system_prompt = system_prompt
        self._prompt = ""
        self._turns: list[tuple[str, str]] = []

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat messages for the next turn."""
        return to_messages(self._prompt, self._turns, self.system_prompt)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env and start a new conversation from its prompt."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._prompt = obs["prompt"]
        self._turns = []
        info["messages"] = self.messages
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env and add the attempt and its feedback to the conversation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._turns.append((str(action), obs["feedback"]))
        info["messages"] = self.messages
        return obs, reward, terminated, truncated, info
