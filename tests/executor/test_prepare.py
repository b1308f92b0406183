"""``kernelgym prepare``: the one-time builds done ahead, so that no worker builds them at its start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.cli import main
from kernelgym.executor.prepare import one_time_builds, pending_builds

_ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_backend_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prepare", "--backend", "no-such-backend"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelgym: error: unknown backend") and "\n" not in err


def test_a_fresh_cache_lists_every_one_time_build_as_pending(tmp_path: Path) -> None:
    names = [build.name for build in one_time_builds("cpp", tmp_path)]
    assert pending_builds("cpp", tmp_path) == names
    assert any("precompiled" in name for name in names) and any("observer" in name for name in names)


@pytest.mark.slow
def test_after_prepare_nothing_is_left_for_a_worker_to_build(cache_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "kernelgym.cli", "prepare", "--backend", "cpp", "--cache-dir", str(cache_dir)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    for build in one_time_builds("cpp", cache_dir):  # each says it was built now, or before
        assert f"{build.name}: built in" in done.stderr or f"{build.name}: already built" in done.stderr, done.stderr
    assert pending_builds("cpp", cache_dir) == []
