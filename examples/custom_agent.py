"""Benchmark your own agent: a short class with ``act(requests) -> answers``, then ``run_bench``.

The agent here is a cheater: it answers every task with the reference program
itself, renamed ``ModelNew`` (a PyTorch fallback, no kernel of its own). The
verifier flags every answer ``illegal``, so it scores 0 and the hack rate is 1.
Replace ``act`` with calls to your model. The same class also runs from the
command line: ``kernelgym bench --agent examples/custom_agent.py:PyTorchFallbackAgent``.

    python examples/custom_agent.py --limit 3
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kernelgym.agents import AgentRequest, BaseAgent, register_agent
from kernelgym.bench import BenchConfig, run_bench
from kernelgym.options import parse_options


@register_agent("pytorch-fallback")
class PyTorchFallbackAgent(BaseAgent):
    """Answers with the reference program renamed to ``ModelNew``: what a reward hacker would try first."""

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        # A request carries the task, the prompt, the backend, and the episode so far
        # (request.history: earlier answers with their feedback) for multi-turn agents.
        return ["```python\n" + re.sub(r"\bModel\b", "ModelNew", r.task.source) + "\n```" for r in requests]


@dataclass
class Args:
    suite: str = "cpu"
    """the task suite"""
    limit: int = 3
    """run only the first tasks"""
    k: int = 1
    """samples per task"""
    turns: int = 1
    """attempts per episode"""
    out: str = "runs/bench/custom-agent"
    """run folder (attempts.jsonl, summary.json, plots); an earlier run there is replaced"""


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


if __name__ == "__main__":
    args = parse_args()
    config = BenchConfig(
        suite=args.suite, agent="pytorch-fallback", k=args.k, turns=args.turns, limit=args.limit,
        out_dir=args.out, overwrite=True, progress=False,
    )
    summary = run_bench(config, agent=PyTorchFallbackAgent())
    print(summary.report())
    print(f"wrote {', '.join(summary.files)} to {summary.out_dir}")
