"""tree-sitter helpers for Python and C++/CUDA: parsers, walking, node text, decoded string literals.

Holds:
    language_for / parser_for: the grammar and a per-thread parser for ``python`` or ``cpp``.
    walk, node_text, child, line_of, node_key: small node helpers.
    Lines, string_lines, join_lines: the decoded text lines of string literals with their rows.
"""

from __future__ import annotations

import codecs
import functools
import threading
from collections.abc import Iterable, Iterator

import tree_sitter
import tree_sitter_cpp
import tree_sitter_python

# --------------------------------------------------------------------------------------------
# tree-sitter plumbing
# --------------------------------------------------------------------------------------------


@functools.cache
def _language(language: str) -> tree_sitter.Language:
    grammar = tree_sitter_python if language == "python" else tree_sitter_cpp
    return tree_sitter.Language(grammar.language())


_PARSERS = threading.local()


def parser_for(language: str) -> tree_sitter.Parser:
    """A parser for ``language`` owned by the calling thread (parsers are not thread-safe)."""
    parser = getattr(_PARSERS, language, None)
    if parser is None:
        parser = tree_sitter.Parser(_language(language))
        setattr(_PARSERS, language, parser)
    return parser


def walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Every node under ``node`` (itself included), in source order, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def node_text(node: tree_sitter.Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def field_of(node: tree_sitter.Node | None, name: str) -> tree_sitter.Node | None:
    return None if node is None else node.child_by_field_name(name)


def line_of(node: tree_sitter.Node) -> int:
    return node.start_point.row + 1


def node_key(node: tree_sitter.Node) -> tuple[int, int, str]:
    return (node.start_byte, node.end_byte, node.type)


# --------------------------------------------------------------------------------------------
# Python: strings
# --------------------------------------------------------------------------------------------

Lines = list[tuple[str, int]]  # decoded text lines, each with its 0-based row in the code


def _unescape(segment: str) -> str:
    try:
        return codecs.decode(segment.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, UnicodeEncodeError, ValueError):
        return segment


def string_lines(node: tree_sitter.Node, source: bytes) -> Lines:
    """Decode one Python ``string`` node into text lines mapped to code rows (interpolations become ``0``)."""
    start = field_of(node, "start") or (node.children[0] if node.children else None)
    children = node.children
    if not children or start is None or start.type != "string_start":
        return [(node_text(node), node.start_point.row)]
    prefix = node_text(children[0]).lower()
    end_node = children[-1] if children[-1].type == "string_end" else None
    body_start = children[0].end_byte
    body_end = end_node.start_byte if end_node is not None else node.end_byte
    is_raw = "r" in prefix
    is_f = "f" in prefix
    pieces: list[str] = []
    cursor = body_start
    if is_f:
        for child in children:
            if child.type == "interpolation":
                pieces.append(source[cursor : child.start_byte].decode("utf-8", "replace"))
                pieces.append("0")
                cursor = child.end_byte
    pieces.append(source[cursor:body_end].decode("utf-8", "replace"))
    raw = "".join(pieces)
    if is_f:
        raw = raw.replace("{{", "{").replace("}}", "}")
    lines: Lines = [("", children[0].end_point.row)]
    row = children[0].end_point.row
    segments = raw.split("\n")
    for index, segment in enumerate(segments):
        continued = False
        if not is_raw:
            trailing = len(segment) - len(segment.rstrip("\\"))
            if trailing % 2 == 1 and index < len(segments) - 1:
                segment, continued = segment[:-1], True
            segment = _unescape(segment)
        chunks = segment.split("\n")
        lines[-1] = (lines[-1][0] + chunks[0], lines[-1][1])
        lines.extend((chunk, row) for chunk in chunks[1:])
        row += 1
        if index < len(segments) - 1 and not continued:
            lines.append(("", row))
    return lines


def join_lines(parts: Iterable[Lines]) -> Lines:
    """Concatenate decoded strings (the first line of each part continues the last line of the previous)."""
    out: Lines = []
    for part in parts:
        if not part:
            continue
        if out:
            text, row = out[-1]
            out[-1] = (text + part[0][0], row if text.strip() else part[0][1])
            out.extend(part[1:])
        else:
            out.extend(part)
    return out


