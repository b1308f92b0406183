"""The ``solutions`` agent: replays the bundled reference solutions.

Holds:
    SolutionsAgent: answers every request with ``task.solution(backend)``.

It is the ceiling of a suite and a check of the whole pipeline: on a suite
whose solutions are honest, every answer should pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelgym.agents.base import AgentRequest, BaseAgent, register_agent

__all__ = ["SolutionsAgent"]


@register_agent("solutions")
class SolutionsAgent(BaseAgent):
    """Answers with the task's bundled solution for the request's backend.

    Raises:
        TaskError: (from :meth:`act`) a task ships no solution for that backend.

    Example:
        >>> from kernelgym.agents.base import AgentRequest
        >>> from kernelgym.tasks import load_suite
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> "ModelNew" in SolutionsAgent().act([AgentRequest(task, "cpp", task.source)])[0]
        True
    """

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """The bundled solution of each request's task."""
        return [request.task.solution(request.backend) for request in requests]
