"""Command-line options from a dataclass, CleanRL style: one flag per field, the field's docstring its help.

Holds:
    parse_options: parse the command line into an instance of a dataclass of options.

The examples keep their options in a dataclass with a docstring per field; this turns that
dataclass into an ``argparse`` parser whose ``--help`` shows those docstrings and the defaults.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import textwrap
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["parse_options"]

_Options = TypeVar("_Options")


def _field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right under it), whitespace collapsed; ``{}`` without source."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # defined where no source file is kept (an interactive prompt, a doctest)
        return {}
    body = ast.parse(textwrap.dedent(source)).body[0].body
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def parse_options(cls: type[_Options], description: str = "", argv: Sequence[str] | None = None) -> _Options:
    """Parse ``argv`` (default: the command line) into ``cls``: ``--field-name`` per field, ``--[no-]flag`` for a bool.

    ``--help`` shows each field's docstring (written right under the field, as CleanRL does) and its default.

    Example:
        >>> @dataclasses.dataclass
        ... class Args:
        ...     total_steps: int = 8
        ...     \"\"\"training steps\"\"\"
        ...     plot: bool = True
        ...     \"\"\"draw the curve\"\"\"
        >>> parse_options(Args, argv=["--total-steps", "3", "--no-plot"])
        Args(total_steps=3, plot=False)
    """
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    docs = _field_docs(cls)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag = f"--{field.name.replace('_', '-')}"
        kind: dict[str, Any] = (
            {"action": argparse.BooleanOptionalAction} if isinstance(field.default, bool) else {"type": type(field.default)}
        )
        parser.add_argument(flag, default=field.default, help=docs.get(field.name, " "), **kind)
    return cls(**vars(parser.parse_args(argv)))
