"""The samples in this corpus are candidate answers, not tests: never import them (doctest collection would).

Every ``cpp`` sample this run selected is built ahead, two at a time, before the first of them is judged:
a build is one C++ translation unit (one core for ~20 s on the 2-core CI machine), and the tests judge
one answer after another.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

collect_ignore_glob = ["*/*.py"]

_TESTS = Path(__file__).resolve().parents[1]


def _cpp_sample(item: pytest.Item) -> Path | None:
    """The cpp sample (or honest answer) ``item`` judges, if any."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if isinstance(params.get("path"), Path) and params.get("backend") == "cpp":
        return params["path"]
    if isinstance(params.get("sample"), str) and (_TESTS / "hacks" / "cpp" / f"{params['sample']}.py").is_file():
        return _TESTS / "hacks" / "cpp" / f"{params['sample']}.py"
    return None


@pytest.fixture(scope="session", autouse=True)
def cpp_samples_built_ahead(request: pytest.FixtureRequest, cache_dir: Path) -> None:
    from kernelgym import Verifier
    from kernelgym.tasks import load_suite

    tasks = {task.id: task for task in load_suite("cpu")}
    pairs = []
    for path in sorted({p for p in map(_cpp_sample, request.session.items) if p is not None}):
        text = path.read_text()
        header = re.search(r"^#\s*task:\s*(\S+)", text, re.M)
        task = tasks.get(header.group(1)) if header else None
        if task is not None:
            pairs.append((task, text))
            if "cpp" in task.solutions:
                pairs.append((task, task.solution("cpp")))  # the honest answer judged beside them
    if pairs:
        with Verifier(backend="cpp", num_workers=2, cache_dir=cache_dir) as verifier:
            verifier.build_many(list(dict((text, (task, text)) for task, text in pairs).values()))
