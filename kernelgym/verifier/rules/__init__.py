"""The rules the verifier enforces, one module per concern, all in one catalogue.

Holds (``catalogue``): ``Rule``, the ``rule`` decorator, ``catalogue()`` (every rule,
static and runtime), ``Findings``. The modules, by concern:
    names: Python name tables (what computes, allocates, or falls under a rule).
    syntax: tree-sitter helpers (parsers, walking, string literals).
    program: the name resolver (imports, aliases, classes, definitions).
    python, forward: the Python rules (whole program; ``forward`` and the code it reaches).
    sources: the C++/CUDA sources inside a Python program.
    cpp_names, cpp: the C++/CUDA tables and rules.
    runtime: the rules the worker checks while running a candidate.

The ``inspect`` stage that runs the static rules is ``kernelgym.verifier.inspect``.
"""

from __future__ import annotations

from kernelgym.verifier.rules import cpp, forward, python, runtime  # noqa: F401  (register their rules)
from kernelgym.verifier.rules.catalogue import STAGES, Findings, Rule, catalogue, rule

__all__ = ["STAGES", "Findings", "Rule", "catalogue", "rule"]
