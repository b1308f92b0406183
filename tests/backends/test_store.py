"""The judge's store of built extensions (hash-checked records) and the build locks (held by live processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.backends import native
from kernelgym.backends.native import BuildError, file_lock
from kernelgym.backends.store import ExtensionStore, judge_dir
from kernelgym.backends.trusted_build import NativeToolchain, plan_build


def _published(tmp_path: Path) -> tuple[ExtensionStore, Path]:
    store = ExtensionStore(tmp_path / "cache" / "builds")
    built = tmp_path / "built.so"
    built.write_bytes(b"\x7fELF library bytes")
    record = store.publish("ab" * 32, "kg_abab", built, ["malloc"], ["PyInit_kg_abab"])
    return store, store.library(record.key, record.module)


def test_a_published_entry_is_found_while_its_bytes_hash_to_the_judges_record(tmp_path: Path) -> None:
    store, library = _published(tmp_path)
    assert store.lookup("ab" * 32) is not None and store.verified(library) is not None
    assert store.record_path("ab" * 32).parent == judge_dir(tmp_path / "cache") / "store"  # outside the cache
    os.chmod(library, 0o644)
    library.write_bytes(b"\x7fELF rewritten by someone")
    assert store.lookup("ab" * 32) is None  # rebuilt on the next request
    assert store.verified(library) is None  # and illegal if mapped
    assert store.verified(tmp_path / "built.so") is None  # not a store entry at all


def test_build_requests_are_checked_on_the_trusted_side() -> None:
    toolchain = NativeToolchain(compilers=("c++",), cuda=False)
    plan = plan_build(toolchain, {"cpp_sources": ["int f();"], "functions": ["f"], "extra_cflags": ["-O3"]})
    assert plan.module == f"kg_{plan.key[:20]}" and plan.arguments["extra_cflags"] == list(native.CANONICAL_CFLAGS)
    for bad in ({"cpp_sources": ["x"], "extra_cflags": ["-fplugin=/tmp/p.so"]}, {"cpp_sources": ["x"], "extra_include_paths": ["/"]},
                {"cpp_sources": ["x"], "device_sources": ["__global__ void k() {}"]}, {"cpp_sources": [1]}):
        with pytest.raises(BuildError):
            plan_build(toolchain, bad)


_HOLD = "import fcntl, sys, time\nh = open(sys.argv[1], 'a')\nfcntl.flock(h, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"


def test_a_killed_holder_releases_its_build_lock_at_once(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "key.lock"
    lock.parent.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        start = time.monotonic()
        with file_lock(lock):
            assert time.monotonic() - start < 2.0
    finally:
        holder.kill()
        holder.wait()


def test_a_long_wait_names_the_process_holding_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(native, "_LOCK_PATIENCE_SECONDS", 0.3)
    lock = tmp_path / "key.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD.replace("time.sleep(600)", "time.sleep(1.5)"), str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with file_lock(lock):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert f"held by PID {holder.pid}" in capsys.readouterr().err


def test_lock_files_are_write_only_for_their_owner_even_those_made_before(tmp_path: Path) -> None:
    """A candidate may read the cache; a lock it could open (any mode) it could hold. Old readable locks are fixed on use."""
    fresh, old = tmp_path / "locks" / "fresh.lock", tmp_path / "old.lock"
    old.write_text("")
    old.chmod(0o644)
    for lock in (fresh, old):
        with file_lock(lock):
            pass
        assert lock.stat().st_mode & 0o777 == native.LOCK_MODE == 0o200
    link = tmp_path / "link.lock"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError), file_lock(link):  # no link followed
        pass
    assert not (tmp_path / "elsewhere").exists()
