"""The ``inspect`` stage: static rules over a candidate program (Python and its native sources).

Holds:
    RULES: static rule id -> one-line summary (from the catalogue in ``kernelgym.verifier.rules``).
    NativeSource: one C++/CUDA source text found in the candidate, with its line mapping.
    native_sources: the C++/CUDA sources of a candidate (``load_inline`` arguments and
        string literals that look like C++).
    inspect_program: every static rule the candidate breaks, as
        :class:`~kernelgym.verifier.result.Violation` records.

Both languages are parsed with tree-sitter, which tolerates broken code, so
this stage never raises on garbage and never runs candidate code.

The Python rules (``rules.python``, ``rules.forward``) look at ``ModelNew.forward``
and at everything it reaches in the file (helper functions and methods it calls
or passes along, lambdas, entry points such as ``__call__`` and forward hooks),
resolving names through imports and module-level aliases (``rules.program``:
``F = torch.nn.functional``, ``mm = getattr(torch, "mat" + "mul")``). Other rules
(threads, streams, files, network, processes, monkey-patching, global flags,
introspection, dynamic code) apply to the whole program, because module-level
code runs too. Arithmetic operators count as compute only when an operand is
known to be a tensor; anything the static rules cannot resolve is left to the
runtime ATen guard, which sees every ATen op the forward dispatches.

The C++ rules (``rules.cpp``) look at every native source (``rules.sources``):
``torch::``/``at::`` operators (only allocation, metadata and device/stream
helpers are allowed), tensor methods and tensor arithmetic, processes and
threads, files, extra streams, timer interposition, L2 persistence, vendor
libraries and reduced precision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from kernelgym.verifier.result import Violation
from kernelgym.verifier.rules.catalogue import Findings, catalogue
from kernelgym.verifier.rules.cpp import CppRules
from kernelgym.verifier.rules.forward import walk_args
from kernelgym.verifier.rules.program import PyProgram
from kernelgym.verifier.rules.python import PythonRules
from kernelgym.verifier.rules.sources import NativeSource, SourceFinder, native_sources
from kernelgym.verifier.rules.syntax import field_of, node_text

__all__ = ["RULES", "NativeSource", "native_sources", "inspect_program"]

RULES: Mapping[str, str] = MappingProxyType(
    {rule.id: rule.summary for rule in catalogue().values() if rule.stage != "runtime"}
)


_HALF_IN_REFERENCE = re.compile(r"float16|bfloat16|\.half\(\)|torch\.half\b|autocast")
_PYBIND_DEF = re.compile(r"""\.def\(\s*"(\w+)""")


def inspect_program(code: str, backend: str, *, reference: str | None = None) -> tuple[Violation, ...]:
    """Return every static rule the candidate program breaks.

    Args:
        code: the extracted candidate program (see :func:`~kernelgym.verifier.extract.extract_program`).
        backend: the backend the candidate targets (``"cpp"``, ``"cuda"``, ``"triton"``, ``"musa"``).
        reference: the task's reference program; when it uses fp16/bf16 itself, reduced
            precision is not a violation.

    Returns:
        Violations sorted by line; empty when the program passes every static rule.
        Garbage input never raises: tree-sitter parses what it can.

    Example:
        >>> bad = "import torch\\nclass ModelNew(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.relu(x)\\n"
        >>> sorted({v.rule for v in inspect_program(bad, "cpp")})
        ['kernel-not-called', 'no-native-kernel', 'torch-compute-in-forward']
    """
    findings = Findings()
    if not isinstance(code, str) or not code.strip():
        return ()
    half_ok = bool(reference and _HALF_IN_REFERENCE.search(reference))
    program = PyProgram(code)
    finder = SourceFinder(program)
    sources = finder.find()
    for call in program.loader_calls():
        args = field_of(call, "arguments")
        for arg in args.named_children if args is not None else []:
            if arg.type == "keyword_argument" and node_text(field_of(arg, "name")) == "functions":
                for item in walk_args([field_of(arg, "value")] if field_of(arg, "value") is not None else []):
                    name = program.const_str(item)
                    if name:
                        program.ext_entry_names.add(name)
    for source in sources:
        program.ext_entry_names.update(_PYBIND_DEF.findall(source.text))
        CppRules(source, findings, half_ok).run()
    PythonRules(program, backend, half_ok, finder.consumed, findings).run()
    return findings.result()
