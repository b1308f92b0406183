"""Maintenance of the content-addressed build cache: its size, a cap, least-recently-used eviction.

Holds:
    DEFAULT_MAX_GB: the default size cap of the build cache, in GB (10^9 bytes).
    MAX_GB_ENV: the environment variable that overrides it (``KERNELGYM_CACHE_MAX_GB``).
    MIN_IDLE_SECONDS: how long a build must have gone unused before eviction may remove it.
    CacheEntry: one build folder: its key, size and last use.
    CacheInfo: what the cache holds (``kernelgym cache info``).
    CleanReport: what a clean removed (``kernelgym cache clean``).
    BuildCache: read the cache, enforce its cap, clean it.
    default_cache_dir: ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``.
    max_bytes_from_env: the size cap, from ``$KERNELGYM_CACHE_MAX_GB`` or the default.

The layout (written by the trusted side, :mod:`kernelgym.backends.native` and
:mod:`kernelgym.backends.store`, only read here; candidates read it, never write it):
``<cache>/builds/<key>/`` holds one published extension (its ``.so``; the judge's
record of its hash is ``<cache>.trusted/store/<key>.json``), ``<cache>/builds/locks/<key>.lock``
is the lock a worker holds while it checks, builds or publishes that entry,
``<cache>/builds/pch/`` the precompiled headers; ``<cache>.trusted/baselines/``
holds cached reference timings.

Eviction never removes an entry in use: it skips every entry used less than
``MIN_IDLE_SECONDS`` ago (by the newest access or change time of its files),
and removes the others only while holding that entry's lock, taken without
waiting (a worker that holds it is building or loading the entry right now).
A worker that loaded a build keeps it mapped after its files are deleted; the
next request for it rebuilds it. Lock files are kept (they are empty): deleting
one while a worker waits on it would let two workers build the same entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelgym.backends.locks import open_lock
from kernelgym.backends.store import ExtensionStore
from kernelgym.errors import KernelGymError

__all__ = [
    "DEFAULT_MAX_GB",
    "MAX_GB_ENV",
    "MIN_IDLE_SECONDS",
    "BuildCache",
    "CacheEntry",
    "CacheInfo",
    "CleanReport",
    "default_cache_dir",
    "max_bytes_from_env",
]

DEFAULT_MAX_GB = 5.0
MAX_GB_ENV = "KERNELGYM_CACHE_MAX_GB"
MIN_IDLE_SECONDS = 600.0
_ENTRY = re.compile(r"^[0-9a-f]{32}$")


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _last_use(path: Path) -> float:
    # Files: the newest access (loading a .so reads it) or change. Folders: changes only, since
    # listing a folder, as this very walk does, updates its access time.
    newest = 0.0
    for root, _dirs, files in os.walk(path):
        with contextlib.suppress(OSError):
            newest = max(newest, os.lstat(root).st_mtime)
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                newest = max(newest, st.st_atime, st.st_mtime)
    return newest


def _human(size: float) -> str:
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


@dataclass(frozen=True)
class CacheEntry:
    """One build folder.

    Attributes:
        key: the folder's name (the first 32 hex digits of the build's hash).
        path: the folder.
        size: bytes of its files.
        last_use: newest access or change time of its files (seconds since the epoch).
        lock: the lock file a worker holds while it uses the folder.
    """

    key: str
    path: Path
    size: int
    last_use: float
    lock: Path


@dataclass(frozen=True)
class CacheInfo:
    """What the build cache holds.

    Attributes:
        root: the cache folder.
        entries: the builds, least recently used first.
        other_bytes: bytes of everything else (precompiled headers, baselines, Triton's and torch's caches).
        max_bytes: the size cap.
    """

    root: Path
    entries: tuple[CacheEntry, ...]
    other_bytes: int
    max_bytes: int

    @property
    def total_bytes(self) -> int:
        """Bytes of the whole cache."""
        return self.other_bytes + sum(e.size for e in self.entries)

    def report(self) -> str:
        """A few lines for a person."""
        lines = [
            f"build cache {self.root}",
            f"  {len(self.entries)} builds, {_human(sum(e.size for e in self.entries))}; "
            f"other files {_human(self.other_bytes)}; total {_human(self.total_bytes)} "
            f"of a {_human(self.max_bytes)} cap (${MAX_GB_ENV})",
        ]
        if self.entries:
            oldest, newest = self.entries[0].last_use, self.entries[-1].last_use
            lines.append(f"  last used: oldest {time.strftime('%Y-%m-%d %H:%M', time.localtime(oldest))}, "
                         f"newest {time.strftime('%Y-%m-%d %H:%M', time.localtime(newest))}")
        return "\n".join(lines)


@dataclass(frozen=True)
class CleanReport:
    """What a clean did.

    Attributes:
        removed: builds removed.
        freed_bytes: bytes they held.
        kept_in_use: builds that would have gone but were in use (locked, or used too recently).
        total_bytes: bytes the cache holds now.
    """

    removed: int
    freed_bytes: int
    kept_in_use: int
    total_bytes: int

    def report(self) -> str:
        """One line for a person."""
        busy = f"; kept {self.kept_in_use} in use" if self.kept_in_use else ""
        return f"removed {self.removed} builds ({_human(self.freed_bytes)}){busy}; the cache holds {_human(self.total_bytes)}"


def default_cache_dir() -> Path:
    """``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``."""
    return Path(os.environ.get("KERNELGYM_CACHE", Path.home() / ".cache" / "kernelgym"))


def max_bytes_from_env() -> int:
    """The size cap: ``$KERNELGYM_CACHE_MAX_GB`` GB, else :data:`DEFAULT_MAX_GB`.

    Raises:
        KernelGymError: the variable is not a non-negative number.
    """
    raw = os.environ.get(MAX_GB_ENV, "").strip()
    if not raw:
        return int(DEFAULT_MAX_GB * 1e9)
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise KernelGymError(f"${MAX_GB_ENV} must be a size in GB, e.g. 5 or 0.5, not {raw!r}")
    return int(value * 1e9)


class BuildCache:
    """The build cache of a cache folder.

    Args:
        cache_dir: the cache folder (``None``: ``$KERNELGYM_CACHE`` or ``~/.cache/kernelgym``).
        max_bytes: the size cap (``None``: :func:`max_bytes_from_env`).

    Example:
        >>> import tempfile
        >>> cache = BuildCache(tempfile.mkdtemp(), max_bytes=10**9)
        >>> cache.info().entries, cache.enforce_cap().removed
        ((), 0)
    """

    def __init__(self, cache_dir: str | Path | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        if self.max_bytes < 0:
            raise KernelGymError(f"the cache size cap must be >= 0 bytes, not {self.max_bytes}")

    @property
    def builds(self) -> Path:
        """The folder that holds the build entries."""
        return self.root / "builds"

    def entries(self) -> list[CacheEntry]:
        """Every build, least recently used first."""
        if not self.builds.is_dir():
            return []
        found = [
            CacheEntry(path.name, path, _size(path), _last_use(path), self.builds / "locks" / f"{path.name}.lock")
            for path in self.builds.iterdir()
            if _ENTRY.match(path.name) and path.is_dir() and not path.is_symlink()
        ]
        return sorted(found, key=lambda e: e.last_use)

    def _headers(self) -> list[CacheEntry]:
        """The precompiled headers (one folder per toolchain and flag set)."""
        folder = self.builds / "pch"
        if not folder.is_dir():
            return []
        lock = self.builds / "pch.lock"
        return [CacheEntry(p.name, p, _size(p), _last_use(p), lock) for p in folder.iterdir() if p.is_dir()]

    def info(self) -> CacheInfo:
        """Sizes and entries."""
        entries = self.entries()
        total = _size(self.root) if self.root.is_dir() else 0
        return CacheInfo(self.root, tuple(entries), total - sum(e.size for e in entries), self.max_bytes)

    @staticmethod
    @contextlib.contextmanager
    def _locked(lock: Path) -> Iterator[bool]:
        """Hold ``lock`` if nobody else does; yields whether it was taken."""
        with open_lock(lock) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _remove(self, entries: list[CacheEntry], enough: int | None, min_idle_seconds: float) -> CleanReport:
        """Remove ``entries`` in order (skipping those in use) until ``enough`` bytes are freed (``None``: all)."""
        now = time.time()
        removed = freed = busy = 0
        for entry in entries:
            if enough is not None and freed >= enough:
                break
            if now - entry.last_use < min_idle_seconds:
                busy += 1
                continue
            with self._locked(entry.lock) as taken:
                if not taken:
                    busy += 1
                    continue
                ExtensionStore(self.builds).forget(entry.key)
                shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
            freed += entry.size
        return CleanReport(removed, freed, busy, self.info().total_bytes)

    def enforce_cap(self, min_idle_seconds: float = MIN_IDLE_SECONDS) -> CleanReport:
        """Remove the least recently used builds until the cache fits its cap (builds in use stay)."""
        info = self.info()
        excess = info.total_bytes - self.max_bytes
        if excess <= 0:
            return CleanReport(0, 0, 0, info.total_bytes)
        return self._remove(list(info.entries), excess, min_idle_seconds)

    def clean(self, everything: bool = False, min_idle_seconds: float = MIN_IDLE_SECONDS) -> CleanReport:
        """Enforce the cap, or with ``everything`` remove every build and precompiled header not in use.

        A worker that finds its precompiled header gone compiles with torch's own header (slower, same result).
        """
        if not everything:
            return self.enforce_cap(min_idle_seconds)
        return self._remove(self.entries() + self._headers(), None, min_idle_seconds)
