"""The native (C++/CUDA) sources inside a candidate Python program.

Holds:
    NativeSource: one C++/CUDA source text with its line mapping.
    CPP_HINT / CUDA_HINT: what makes a string literal look like C++ / CUDA.
    SourceFinder: finds ``load_inline`` sources and C++-looking literals.
    native_sources: the C++/CUDA sources of a candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from kernelgym.verifier.rules.program import PyProgram
from kernelgym.verifier.rules.syntax import Lines, field_of, join_lines, node_key, node_text, string_lines

# --------------------------------------------------------------------------------------------
# Public data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NativeSource:
    """One C++/CUDA source text found in a candidate program.

    Attributes:
        language: ``"cpp"`` or ``"cuda"``.
        text: the decoded source text (escapes resolved, f-string fields replaced by ``0``).
        line: 1-based line in the candidate program where ``text`` starts.
        lines: for each line of ``text``, its 1-based line in the candidate program.
    """

    language: str
    text: str
    line: int
    lines: tuple[int, ...] = ()

    def code_line(self, text_row: int) -> int:
        """The 1-based program line of the 0-based ``text_row`` of ``text``."""
        if 0 <= text_row < len(self.lines):
            return self.lines[text_row]
        return self.line + max(text_row, 0)


CPP_HINT = re.compile(
    r"#\s*include\b|__global__|\btorch::|\bat::|\bTORCH_CHECK\b|\bPYBIND11_MODULE\b|\bTORCH_LIBRARY|\bstd::|"
    r'extern\s+"C"|\bAT_DISPATCH_|\bc10::'
)
CUDA_HINT = re.compile(r"__global__|__device__|<<<|\bthreadIdx\b|\bblockIdx\b|\bcuda[A-Z]\w*\(|\bmusa[A-Z]")



# --------------------------------------------------------------------------------------------
# Native sources inside the Python program
# --------------------------------------------------------------------------------------------


class SourceFinder:
    """Finds C++/CUDA text: ``load_inline`` source arguments first, then C++-looking string literals."""

    def __init__(self, program: PyProgram) -> None:
        self.p = program
        self.consumed: set[tuple[int, int, str]] = set()

    def find(self) -> list[NativeSource]:
        found: list[NativeSource] = []
        for call in self.p.loader_calls():
            args = field_of(call, "arguments")
            if args is None:
                continue
            positional = [a for a in args.named_children if a.type not in ("keyword_argument", "comment")]
            for index, arg in enumerate(positional[1:3], start=1):
                found.extend(self._sources(arg, "cpp" if index == 1 else "cuda"))
            for arg in args.named_children:
                if arg.type == "keyword_argument":
                    name = node_text(field_of(arg, "name"))
                    if name.endswith("_sources") or name == "sources":
                        language = "cpp" if name == "cpp_sources" else "cuda"
                        found.extend(self._sources(field_of(arg, "value"), language))
        for node, _ in self.p.nodes:
            if node.type not in ("string", "concatenated_string") or node_key(node) in self.consumed:
                continue
            if node_key(node) in self.p.docstrings or (
                node.parent is not None and node.parent.type == "concatenated_string"
            ):
                continue
            pieces = node.named_children if node.type == "concatenated_string" else [node]
            part = join_lines(string_lines(c, self.p.source) for c in pieces if c.type == "string")
            text = "\n".join(t for t, _ in part)
            if CPP_HINT.search(text):
                self.consumed.update(node_key(c) for c in [node, *pieces])
                found.append(self._native(part, "cuda" if CUDA_HINT.search(text) else "cpp"))
        unique: dict[tuple[str, str, int], NativeSource] = {}
        for source in found:
            unique.setdefault((source.language, source.text, source.line), source)
        return sorted(unique.values(), key=lambda s: (s.line, s.language))

    def _sources(self, node: tree_sitter.Node | None, language: str) -> list[NativeSource]:
        if node is None:
            return []
        out = []
        for part in self._fragments(node, 0):
            text = "\n".join(t for t, _ in part)
            if text.strip():
                out.append(self._native(part, "cuda" if language == "cuda" or CUDA_HINT.search(text) else "cpp"))
        return out

    @staticmethod
    def _native(part: Lines, language: str) -> NativeSource:
        rows = tuple(row + 1 for _, row in part)
        return NativeSource(language, "\n".join(t for t, _ in part), rows[0] if rows else 1, rows)

    def _fragments(self, node: tree_sitter.Node | None, depth: int) -> list[Lines]:
        """Decoded string values an expression may build (each element one source text)."""
        if node is None or depth > 8:
            return []
        kind = node.type
        if kind == "string":
            self.consumed.add(node_key(node))
            return [string_lines(node, self.p.source)]
        if kind == "concatenated_string":
            self.consumed.add(node_key(node))
            for child in node.named_children:
                self.consumed.add(node_key(child))
            return [join_lines(string_lines(c, self.p.source) for c in node.named_children if c.type == "string")]
        if kind == "parenthesized_expression" and node.named_children:
            return self._fragments(node.named_children[0], depth + 1)
        if kind == "binary_operator" and node_text(field_of(node, "operator")) == "+":
            left = self._fragments(field_of(node, "left"), depth + 1)
            right = self._fragments(field_of(node, "right"), depth + 1)
            if len(left) == 1 and len(right) == 1:
                return [join_lines([left[0], right[0]])]
            return left + right
        if kind in ("list", "tuple", "expression_list"):
            return [f for child in node.named_children for f in self._fragments(child, depth + 1)]
        if kind == "identifier":
            name = node_text(node)
            return [f for key, value in self.p.assignments if key == name for f in self._fragments(value, depth + 1)]
        if kind == "call":
            function = field_of(node, "function")
            args = field_of(node, "arguments")
            positional = [a for a in args.named_children if a.type != "keyword_argument"] if args is not None else []
            is_module_function = any(not t.startswith("<") for t in self.p.resolve(field_of(function, "object")))
            if function is not None and function.type == "attribute" and not is_module_function:
                receiver = self._fragments(field_of(function, "object"), depth + 1)
                if node_text(field_of(function, "attribute")) == "join" and positional:
                    items = self._fragments(positional[0], depth + 1)
                    if len(receiver) == 1:
                        separator = receiver[0]
                        joined: list[Lines] = []
                        for item in items:
                            joined.extend([separator, item] if joined else [item])
                        return [join_lines(joined)] if joined else []
                    return items
                return receiver
            if positional:
                return self._fragments(positional[0], depth + 1)
        return []


def native_sources(code: str) -> list[NativeSource]:
    """Return the C++/CUDA sources of a candidate program.

    Sources passed to ``load_inline`` (``cpp_sources=``/``cuda_sources=``, directly,
    through variables, lists, ``+``, ``join`` or ``textwrap.dedent``) come first in
    meaning; any other string literal that looks like C++/CUDA (``#include``,
    ``__global__``, ``torch::``, ``TORCH_CHECK``, ...) is returned too. Docstrings
    are not sources.

    Args:
        code: the candidate program.

    Returns:
        The sources in program order, each with its line mapping.

    Example:
        >>> src = "cpp = '''\\n#include <torch/extension.h>\\nint f() { return 1; }\\n'''\\n"
        >>> [(s.language, s.line, s.code_line(2)) for s in native_sources(src)]
        [('cpp', 1, 3)]
    """
    return SourceFinder(PyProgram(code)).find()


