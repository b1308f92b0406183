"""The time budget of ``.ci/run``: extended tests not started by ``KERNELGYM_EXTENDED_UNTIL`` are skipped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, until: float) -> str:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_setup  # noqa: F401\n")
    (tmp_path / "test_budget.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.extended
        def test_extended():
            pass

        def test_default():
            pass
    """))
    env = {**os.environ, "KERNELGYM_EXTENDED_UNTIL": str(until),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning",
                           "-rs", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout


@pytest.mark.parametrize(("offset", "expected"), [(-60.0, "1 passed, 1 skipped"), (3600.0, "2 passed")])
def test_extended_tests_run_only_until_the_budget_is_spent(tmp_path: Path, offset: float, expected: str) -> None:
    out = _run(tmp_path, time.time() + offset)
    assert expected in out, out
    if "skipped" in expected:
        assert "time budget" in out
