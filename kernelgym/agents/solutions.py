"""The ``solutions`` agent: replays the bundled reference solutions.

Holds:
    SolutionsAgent: answers every request with ``task.solution(backend)``.

It is the ceiling of a suite and a check of the whole pipeline: on a suite
whose solutions are honest, every answer should pass. A task that ships no
solution for the run's backend (``level1/7_RMSNorm`` of the ``gpu`` suite has
only a Triton one) is skipped by the benchmark, with the reason, rather than
counted as a failure: a missing reference answer says nothing about the judge.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelgym.agents.base import AgentRequest, BaseAgent, register_agent
from kernelgym.tasks.task import Task

__all__ = ["SolutionsAgent"]


@register_agent("solutions")
class SolutionsAgent(BaseAgent):
    """Answers with the task's bundled solution for the request's backend.

    Raises:
        TaskError: (from :meth:`act`) a task ships no solution for that backend
            (:meth:`skip_reason` says so beforehand, and the benchmark skips such a task).

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

    def skip_reason(self, task: Task, backend: str) -> str | None:
        """Why ``task`` cannot be answered for ``backend``: it ships no solution for it (``None``: it does).

        Example:
            >>> from kernelgym.tasks import load_suite
            >>> SolutionsAgent().skip_reason(load_suite("gpu")["level1/7_RMSNorm"], "cuda")
            "no bundled 'cuda' solution (it has: triton)"
        """
        if backend in task.solutions:
            return None
        return f"no bundled {backend!r} solution (it has: {', '.join(sorted(task.solutions)) or 'none'})"
