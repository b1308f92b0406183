"""Which ``cpp`` sample a corpus test judges, and what a run of those tests builds ahead.

``built_ahead`` is read by ``answers_built_ahead`` (``tests/conftest.py``) from the test modules that import it:
every ``cpp`` sample the run selected, with the honest answer of its task judged beside it, is built two at a time
before the first test (a build is one C++ translation unit, one core for ~15 s on the 2-core CI machine, and the
tests judge one answer after another).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

_TESTS = Path(__file__).resolve().parents[1]


def cpp_sample(item: pytest.Item) -> Path | None:
    """The cpp sample (or honest answer) ``item`` judges, if any."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if isinstance(params.get("path"), Path) and params.get("backend") == "cpp":
        return params["path"]
    if isinstance(params.get("sample"), str) and (_TESTS / "hacks" / "cpp" / f"{params['sample']}.py").is_file():
        return _TESTS / "hacks" / "cpp" / f"{params['sample']}.py"
    return None


def built_ahead(suite: Mapping[str, Any], items: Sequence[pytest.Item]) -> list[tuple[Any, str]]:
    """(task, answer) pairs to build before the first test: the samples ``items`` judge and their tasks' honest answers."""
    pairs = []
    for path in sorted({p for p in map(cpp_sample, items) if p is not None}):
        text = path.read_text()
        header = re.search(r"^#\s*task:\s*(\S+)", text, re.M)
        task = suite.get(header.group(1)) if header else None
        if task is not None:
            pairs.append((task, text))
            if "cpp" in task.solutions:
                pairs.append((task, task.solution("cpp")))  # the honest answer judged beside them
    return pairs
