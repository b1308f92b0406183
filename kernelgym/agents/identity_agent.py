"""The ``identity`` agent: the reference program itself as ``ModelNew``, the calibration of a judge's timing.

Holds:
    IdentityAgent: answers every request with the task's own code, renamed.
    identity_answer: that answer for one task source.

Judged under the ``kernelbench`` rules preset (PyTorch operators allowed), the
identity answer computes exactly what the reference computes, the same way, so
its speedup is 1.00x up to timing noise: any systematic gap is what the judge's
harness costs the answer. ``kernelgym bench --agent identity --rules kernelbench``
is the calibration run; under the default ``native`` preset it is (rightly) illegal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelgym.agents.base import AgentRequest, BaseAgent, register_agent

__all__ = ["IdentityAgent", "identity_answer"]


def identity_answer(source: str) -> str:
    """``source`` with its ``Model`` class renamed ``ModelNew``, in a fenced block.

    Example:
        >>> print(identity_answer("class Model(nn.Module):\\n    pass"))
        ```python
        class ModelNew(nn.Module):
            pass
        ```
    """
    return "```python\n" + re.sub(r"\bModel\b", "ModelNew", source).strip() + "\n```"


@register_agent("identity")
class IdentityAgent(BaseAgent):
    """The reference as the answer: a correct, exactly-as-fast program, for calibrating the timing.

    Example:
        >>> from kernelgym.agents.base import AgentRequest
        >>> from kernelgym.tasks import load_suite
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> "class ModelNew(nn.Module)" in IdentityAgent().act([AgentRequest(task, "cpp", task.source)])[0]
        True
    """

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        return [identity_answer(request.task.source) for request in requests]
