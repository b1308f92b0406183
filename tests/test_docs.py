"""Every python and bash snippet of README.md and docs/ runs as written (those marked not-run are skipped).

A snippet that cannot run on a CPU-only machine (it needs a GPU, a cluster, a
model, or installs packages) is marked by an HTML comment on the line before
its fence: ``<!-- not-run: why -->``. The snippets of one file run in order, in
one scratch folder that links the checkout's ``kernelgym/``, ``examples/`` and
``benchmarks/`` (so paths like ``kernelgym/tasks/suites/...`` resolve), with
``kernelgym`` and ``python`` on the PATH meaning this checkout and this
interpreter. Bash snippets run with ``set -e -o pipefail``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the snippets build the bundled solutions (cached for the session)

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_EXTENDED = {"bench.md"}  # its walkthrough judges whole suites (minutes): run with -m extended
_NEEDS = {"trl.md": "trl"}  # documents of an optional extra: skipped where its module is not installed
FENCE = re.compile(r"^```(python|bash)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.+?)\s*-->$")


def snippets(document: Path) -> list[tuple[int, str, str, str | None]]:
    """``(line, language, code, why-not-run)`` for each python/bash fence of ``document``."""
    found = []
    lines = document.read_text(encoding="utf-8").splitlines()
    previous = ""
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            previous = lines[i].strip() or previous
            i += 1
            continue
        end = lines.index("```", i + 1)
        marker = NOT_RUN.match(previous)
        found.append((i + 1, match.group(1), "\n".join(lines[i + 1:end]) + "\n", marker.group(1) if marker else None))
        previous = ""
        i = end + 1
    return found


def test_every_document_has_snippets_and_markers_name_a_reason() -> None:
    found = {doc.name: snippets(doc) for doc in DOCUMENTS}
    assert all(found.values()), [name for name, items in found.items() if not items]
    assert all(why for items in found.values() for *_, why in items if why is not None)


@pytest.fixture
def scratch(tmp_path: Path, cache_dir: Path) -> tuple[Path, dict[str, str]]:
    """A folder that looks like the checkout's root, and an environment that runs this checkout."""
    for name in ("kernelgym", "examples", "benchmarks"):
        (tmp_path / name).symlink_to(REPO / name)
    bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"
    bin_dir.mkdir()
    # Shims, not symlinks: a virtual environment's interpreter started through a link elsewhere finds no
    # pyvenv.cfg beside it and runs without the environment's packages.
    for name, command in (("python", ""), ("kernelgym", " -m kernelgym.cli")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n')
        shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "KERNELGYM_CACHE": str(cache_dir),
        "MPLBACKEND": "Agg",
    }
    return tmp_path, env


def _marks(document: Path) -> list[pytest.MarkDecorator]:
    marks = [pytest.mark.extended] if document.name in _EXTENDED else []
    module = _NEEDS.get(document.name)
    if module is not None:
        marks.append(pytest.mark.skipif(importlib.util.find_spec(module) is None,
                                        reason=f"needs pip install 'kernelgym[{module}]'"))
    return marks


@pytest.mark.parametrize("document", [pytest.param(d, marks=_marks(d)) for d in DOCUMENTS],
                         ids=lambda path: path.relative_to(REPO).as_posix())
def test_snippets_run_as_written(document: Path, scratch: tuple[Path, dict[str, str]]) -> None:
    folder, env = scratch
    runnable = [(line, language, code) for line, language, code, why in snippets(document) if why is None]
    if not runnable:
        pytest.skip(f"every snippet of {document.name} is marked not-run")
    for line, language, code in runnable:
        command = [sys.executable, "-c", code] if language == "python" else ["bash", "-e", "-o", "pipefail", "-c", code]
        out = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
        where = f"{document.name}:{line} ({language})"
        assert out.returncode == 0, f"{where} failed:\n{code}\n--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-3000:]}"
        assert "Traceback" not in out.stderr, f"{where}:\n{out.stderr[-3000:]}"
