"""The ``random`` agent: random text and random mutations, the floor of a benchmark.

Holds:
    RandomAgent: answers each request with one of three kinds of noise, chosen by the request's seed.
    MUTATION_MODES: the kinds of noise.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Sequence

from kernelgym.agents.base import AgentError, AgentRequest, BaseAgent, register_agent

__all__ = ["MUTATION_MODES", "RandomAgent"]

MUTATION_MODES = ("garbage", "reference", "solution")
"""``garbage``: random printable text. ``reference``: the reference program renamed to ``ModelNew``
with one token mutated. ``solution``: the bundled solution (the reference when there is none) with
one token mutated."""

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|[^\sA-Za-z0-9_]")
_REPLACEMENTS = ("0", "1", "2", "-", "+", "*", "x", "i", "(", ")", "]", ";", "")


@register_agent("random")
class RandomAgent(BaseAgent):
    """Noise: the score any real agent must beat.

    Each answer depends only on the run seed and the request's seed, so a rerun
    gives the same answers.

    Args:
        seed: mixed into every request's seed.
        modes: the kinds of noise to draw from (see :data:`MUTATION_MODES`).
        max_chars: length limit of ``garbage`` answers.

    Example:
        >>> from kernelgym.agents.base import AgentRequest
        >>> from kernelgym.tasks import load_suite
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> agent = RandomAgent(seed=1)
        >>> request = AgentRequest(task, "cpp", task.source, seed=7)
        >>> agent.act([request]) == agent.act([request])
        True
    """

    def __init__(self, seed: int = 0, modes: Sequence[str] = MUTATION_MODES, max_chars: int = 2000) -> None:
        unknown = [m for m in modes if m not in MUTATION_MODES]
        if unknown or not modes:
            raise AgentError(f"random agent modes must be a non-empty subset of {MUTATION_MODES}, got {list(modes)}")
        if max_chars < 1:
            raise AgentError("random agent max_chars must be at least 1")
        self.seed = seed
        self.modes = tuple(modes)
        self.max_chars = max_chars

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """One noisy answer per request."""
        return [self._answer(request) for request in requests]

    def _answer(self, request: AgentRequest) -> str:
        rng = random.Random(f"{self.seed}:{request.seed}:{request.task_id}:{request.sample}:{request.turn}")
        mode = rng.choice(self.modes)
        if mode == "garbage":
            length = rng.randint(1, self.max_chars)
            return "".join(rng.choice(string.printable) for _ in range(length))
        if mode == "reference":
            program = re.sub(r"\bModel\b", "ModelNew", request.task.source)
        else:
            program = request.task.solutions.get(request.backend, request.task.source)
        return "```python\n" + _mutate_one_token(program, rng) + "\n```"


def _mutate_one_token(program: str, rng: random.Random) -> str:
    tokens = list(_TOKEN.finditer(program))
    if not tokens:
        return program
    token = rng.choice(tokens)
    return program[: token.start()] + rng.choice(_REPLACEMENTS) + program[token.end():]
