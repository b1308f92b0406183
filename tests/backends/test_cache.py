"""Build cache maintenance: size, LRU eviction under a cap, entries in use kept, `kernelgym cache`."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.backends.cache import MAX_GB_ENV, BuildCache, max_bytes_from_env
from kernelgym.errors import KernelGymError

REPO = Path(__file__).resolve().parents[2]
HOUR = 3600.0


def make_entry(cache: Path, index: int, size: int, age_seconds: float) -> Path:
    """A fake build folder of ``size`` bytes, last used ``age_seconds`` ago."""
    entry = cache / "builds" / f"{index:032x}"
    entry.mkdir(parents=True)
    (entry / "kg.so").write_bytes(b"\0" * size)
    (entry / "ok").write_text("key")
    when = time.time() - age_seconds
    for path in (entry / "kg.so", entry / "ok", entry):
        os.utime(path, (when, when))
    return entry


def test_info_counts_builds_and_other_files(tmp_path: Path) -> None:
    make_entry(tmp_path, 1, 1000, HOUR)
    make_entry(tmp_path, 2, 2000, 2 * HOUR)
    (tmp_path / "builds" / "pch" / "abc").mkdir(parents=True)
    (tmp_path / "builds" / "pch" / "abc" / "extension.h.gch").write_bytes(b"\0" * 500)
    info = BuildCache(tmp_path, max_bytes=10**9).info()
    assert [e.key[-1] for e in info.entries] == ["2", "1"]  # least recently used first
    assert [e.size for e in info.entries] == [2003, 1003]  # the .so and the ok marker
    assert info.other_bytes == 500 and info.total_bytes == 3506
    assert "2 builds" in info.report()


def test_enforce_cap_evicts_least_recently_used_first(tmp_path: Path) -> None:
    old, middle, new = (make_entry(tmp_path, i, 1000, age) for i, age in ((1, 3 * HOUR), (2, 2 * HOUR), (3, HOUR)))
    report = BuildCache(tmp_path, max_bytes=2100).enforce_cap()
    assert report.removed == 1 and report.freed_bytes == 1003
    assert not old.exists() and middle.exists() and new.exists()
    assert BuildCache(tmp_path, max_bytes=10**9).enforce_cap().removed == 0  # under the cap: nothing goes


def test_entries_in_use_are_never_removed(tmp_path: Path) -> None:
    locked = make_entry(tmp_path, 1, 1000, 3 * HOUR)
    recent = make_entry(tmp_path, 2, 1000, 60.0)
    idle = make_entry(tmp_path, 3, 1000, 2 * HOUR)
    lock = tmp_path / "builds" / "locks" / f"{locked.name}.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a worker is building or loading this entry
        report = BuildCache(tmp_path, max_bytes=0).clean(everything=True)
    assert locked.exists() and recent.exists() and not idle.exists()
    assert report.removed == 1 and report.kept_in_use == 2


def test_the_cap_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_GB_ENV, "0.5")
    assert max_bytes_from_env() == 500_000_000
    monkeypatch.setenv(MAX_GB_ENV, "lots")
    with pytest.raises(KernelGymError, match=MAX_GB_ENV):
        max_bytes_from_env()


def test_cache_command(tmp_path: Path) -> None:
    for i, age in ((1, 3 * HOUR), (2, 2 * HOUR), (3, 60.0)):
        make_entry(tmp_path, i, 1000, age)

    def cache(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kernelgym.cli", "cache", *args, "--cache-dir", str(tmp_path)],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})

    info = cache("info")
    assert info.returncode == 0 and "3 builds" in info.stdout
    capped = cache("clean", "--max-gb", "0.0000025")
    assert capped.returncode == 0 and "removed 1 builds" in capped.stdout, capped.stdout + capped.stderr
    everything = cache("clean", "--all")
    assert everything.returncode == 0 and "removed 1 builds" in everything.stdout and "kept 1 in use" in everything.stdout
