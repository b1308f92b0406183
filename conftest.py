"""Doctest collection: skip modules whose optional extra is not installed (they raise a clear MissingExtraError instead)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_OPTIONAL = {
    "verl": ["kernelgym/training/verl_plugin.py", "kernelgym/training/agent_loop.py", "kernelgym/training/sampler.py"],
    "ray": ["kernelgym/executor/ray_pool.py"],
    "stable_baselines3": ["examples/sb3_*.py"],
    "transformers": ["kernelgym/agents/hf_agent.py"],
}

collect_ignore_glob: list[str] = []
for module, patterns in _OPTIONAL.items():
    if importlib.util.find_spec(module) is None:
        collect_ignore_glob += patterns

collect_ignore = [str(p) for p in Path(__file__).parent.glob("kernelgym/tasks/suites/**/*.py")]
