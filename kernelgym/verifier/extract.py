"""The ``extract`` stage: take the candidate program out of an LLM response.

Holds:
    FormatError: the response holds no usable ``ModelNew`` program; its message is a
        sentence the LLM can act on.
    extract_program: return the code of the answer (fenced block or bare code),
        checked for a top-level ``class ModelNew(...)`` and valid syntax.

Nothing here runs candidate code: the syntax check uses ``compile`` only.
"""

from __future__ import annotations

import ast
import re

__all__ = ["FormatError", "extract_program", "MAX_RESPONSE_BYTES"]

MAX_RESPONSE_BYTES = 1_000_000

# An opening fence: three or more backticks or tildes, then an optional info string.
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_PYTHON_TAGS = {"python", "py", "python3", "py3", "pytorch", "torch"}
_MODELNEW_DEF = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
_MODELNEW_ANY = re.compile(r"\bModelNew\b")
# PEP 263: a comment on line 1 or 2 that names the file's encoding.
_CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_CODE_HINT = re.compile(r"^(?:import |from \S+ import |class |def |@)", re.MULTILINE)


class FormatError(Exception):
    """The response holds no usable ``ModelNew`` program.

    The message is written for the model that produced the response: it says
    what was wrong and what the answer should look like.
    """


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Return ``(info, body)`` for every fenced code block (an unclosed last fence runs to the end)."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        fence = match.group("fence")
        info = match.group("info").strip().split(" ")[0].lower() if match.group("info").strip() else ""
        body = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[i])
            i += 1
        blocks.append((info, "\n".join(body)))
        i += 1
    return blocks


def _choose_block(blocks: list[tuple[str, str]]) -> str:
    """The block that defines ``ModelNew``, else the longest Python-tagged block, else the longest."""
    defining = [body for _, body in blocks if _MODELNEW_DEF.search(body)]
    if defining:
        return defining[-1]
    python = [body for info, body in blocks if info in _PYTHON_TAGS or info == ""]
    pool = python or [body for _, body in blocks]
    return max(pool, key=len)


def _syntax_tree(code: str) -> ast.Module:
    """Compile ``code`` (never run it) and return its syntax tree, or raise :class:`FormatError`."""
    try:
        compile(code, "<candidate>", "exec", dont_inherit=True)
        return ast.parse(code, "<candidate>")
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
        snippet = (exc.text or "").strip()
        shown = f": `{snippet[:120]}`" if snippet else ""
        raise FormatError(
            f"The program has a Python syntax error at {where} ({exc.msg or 'invalid syntax'}){shown}; "
            "fix it and answer with the whole program."
        ) from None
    except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
        raise FormatError(
            f"The program could not be parsed ({type(exc).__name__}: it is nested too deeply or contains "
            "invalid characters); answer with ordinary Python source code."
        ) from None


def _check_program(code: str) -> None:
    """Raise :class:`FormatError` unless ``code`` compiles and defines ``class ModelNew(Base)`` at top level."""
    tree = _syntax_tree(code)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if classes:
        if not classes[-1].bases:
            raise FormatError(
                f"`class ModelNew` (line {classes[-1].lineno}) has no base class; write `class ModelNew(nn.Module):`."
            )
        return
    for node in tree.body:
        if isinstance(
            node, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)
        ):
            names = _bound_names(node)
            if "ModelNew" in names:
                raise FormatError(
                    f"`ModelNew` (line {node.lineno}) must be a class defined in the answer "
                    "(`class ModelNew(nn.Module):`), not a variable, function or import."
                )
    nested = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if nested:
        raise FormatError(
            f"`class ModelNew` (line {nested[0].lineno}) must be defined at the top level of the program, "
            "not inside another block; move it to column 0."
        )
    raise FormatError(
        "The program does not define `class ModelNew(nn.Module)`; the answer must define that class with "
        "the same constructor arguments and forward inputs as `Model`."
    )


def _bound_names(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def extract_program(text: str) -> str:
    """Return the candidate program contained in an LLM response.

    Fenced code blocks win over bare text. Among several blocks, the one that
    defines ``class ModelNew`` wins (the last such one), else the longest
    Python block. A response without fences is taken whole as code. The code
    must compile and define ``class ModelNew(<base>)`` at top level; it is never
    executed here.

    Args:
        text: the full response text.

    Returns:
        The program source, without fences.

    Raises:
        FormatError: empty or oversized response, prose without code, no top-level
            ``ModelNew`` class, ``ModelNew`` not a class, or a syntax error (the
            message names the line).

    Example:
        >>> reply = "Here it is:\\n```python\\nimport torch.nn as nn\\nclass ModelNew(nn.Module):\\n    pass\\n```"
        >>> extract_program(reply).splitlines()[1]
        'class ModelNew(nn.Module):'
    """
    if not isinstance(text, str):
        raise FormatError("The response must be text containing a Python program that defines `class ModelNew`.")
    if len(text) > MAX_RESPONSE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_RESPONSE_BYTES:
        raise FormatError(
            f"The response is larger than {MAX_RESPONSE_BYTES // 1_000_000} MB; answer with one concise program."
        )
    if "\x00" in text:
        raise FormatError("The response contains NUL characters; answer with plain Python source code.")
    if not text.strip():
        raise FormatError(
            "The response is empty; answer with a Python program in a ```python block that defines "
            "`class ModelNew(nn.Module)`."
        )
    blocks = [(info, body) for info, body in _fenced_blocks(text) if body.strip()]
    if blocks:
        code = _choose_block(blocks)
    else:
        first = _CODE_HINT.search(text)
        if first is None:
            mention = " (it mentions ModelNew but contains no code)" if _MODELNEW_ANY.search(text) else ""
            raise FormatError(
                f"The response contains no code{mention}; answer with the complete program in a ```python block "
                "that defines `class ModelNew(nn.Module)`."
            )
        # Bare code: drop prose lines before the first line that starts a Python statement.
        code = text[first.start() :]
    code = _one_reading(code).strip("\n")
    if "\t" not in code:
        code = _dedent(code)
    _check_program(code)
    return code + "\n"


def _one_reading(code: str) -> str:
    """The program as both the static rules and the interpreter will read it.

    The candidate is written to a file as UTF-8 and imported, so anything that
    makes the interpreter decode or split lines differently from the text the
    rules inspect is refused (an encoding cookie, a byte-order mark, characters
    UTF-8 cannot hold); line endings are made ``\n`` (a lone ``\r`` ends a line
    for Python but not inside a comment for every parser).
    """
    if code.startswith("\ufeff") or "\ufeff" in code[:4]:
        raise FormatError("The program starts with a byte-order mark; send plain UTF-8 source without one.")
    try:
        code.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError("The program contains characters that are not valid Unicode text; send plain UTF-8 source.") from None
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    for line in code.split("\n")[:2]:
        match = _CODING_COOKIE.match(line)
        if match and match.group(1).lower().replace("_", "-") not in ("utf-8", "utf8"):
            raise FormatError(
                f"The program declares the source encoding {match.group(1)!r}; only UTF-8 is accepted, "
                "so remove the coding line."
            )
    return code


def _dedent(code: str) -> str:
    """Remove indentation common to all non-blank lines (fenced blocks inside list items are indented)."""
    lines = code.split("\n")
    widths = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(widths, default=0)
    if cut == 0:
        return code
    return "\n".join(ln[cut:] if ln.strip() else "" for ln in lines)
