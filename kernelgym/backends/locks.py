"""Build locks: an exclusive lock held by a live process, in a file a candidate can open neither way.

Holds:
    file_lock / lock_holder: an exclusive ``flock`` held by a live process for a block, and who holds one.
    open_lock / LOCK_MODE: a lock file opened the one way a candidate cannot (write-only, for its owner).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LOCK_MODE", "file_lock", "lock_holder", "open_lock"]

_LOCK_PATIENCE_SECONDS = 5.0


def lock_holder(path: Path) -> str:
    """Who holds the ``flock`` on ``path`` (from ``/proc/locks``): ``"PID 123 (python)"``, or a sentence saying it is unknown."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return "an unknown process"
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or fields[5].rsplit(":", 1)[-1] != str(inode):
            continue
        try:
            with open(f"/proc/{fields[4]}/comm") as comm:
                return f"PID {fields[4]} ({comm.read().strip()})"
        except OSError:
            return f"PID {fields[4]}"
    return "an unknown process"


LOCK_MODE = 0o200
"""A lock file's mode: write-only, for its owner only.

A ``flock`` needs an open descriptor, of any access mode. Candidates may read the cache (Landlock
denies them every write outside their own directory), so a readable lock file let an answer open one
and hold the judge's build lock for as long as it ran, stalling the builds of every other answer.
With no read bit and no capability to override it, a candidate can open it neither way.
"""


def open_lock(path: Path) -> Any:
    """Open the lock file ``path`` for writing (created with its parents, mode :data:`LOCK_MODE`, no symlink followed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_MODE)
    try:
        if os.fstat(fd).st_mode & 0o777 != LOCK_MODE:  # made before locks were write-only
            os.fchmod(fd, LOCK_MODE)
    except OSError:
        pass  # another user's lock: taken as it is
    return os.fdopen(fd, "wb")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created with its parents) for the block.

    The kernel drops a ``flock`` when the process holding it dies, so a killed holder never leaves a
    stale lock behind. A wait longer than a few seconds says, on stderr, which process holds it.
    """
    with open_lock(path) as handle:
        waited, pause = 0.0, 0.005
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if waited >= _LOCK_PATIENCE_SECONDS:
                    print(f"kernelgym: waiting for the lock {path}, held by {lock_holder(path)}", file=sys.stderr, flush=True)
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    break
                time.sleep(pause)
                waited += pause
                pause = min(pause * 2, 0.1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
