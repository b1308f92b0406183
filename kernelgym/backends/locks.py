"""The judge's locks: ``flock`` locks held by live processes, in files a candidate can open neither way.

Holds:
    file_lock / lock_holder: an exclusive ``flock`` held by a live process for a block, and who holds one.
    open_lock / LOCK_MODE: a lock file opened the one way a candidate cannot (write-only, for its owner).
    device_lock / DEVICE_LOCK_ENV / given_device_lock: a readers-writer lock shared by the judges of one device (timing
        holds it alone), the variable that gives a judge worker its device's, and the one it was given.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["DEVICE_LOCK_ENV", "LOCK_MODE", "device_lock", "file_lock", "given_device_lock", "lock_holder", "open_lock"]

_LOCK_PATIENCE_SECONDS = 5.0
_LONGEST_PAUSE_SECONDS = 0.02
_WAITING_EVERY_SECONDS = 10.0

DEVICE_LOCK_ENV = "KERNELGYM_DEVICE_LOCK"
"""The variable that gives a judge worker the :func:`device_lock` of its device (set only where judges share one)."""


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


@contextlib.contextmanager
def device_lock(path: Path, exclusive: bool, waiting: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Hold the readers-writer lock ``path`` (created with its parents) for the block: ``exclusive``, or shared with others.

    The judges of one device check side by side (shared) and time alone (exclusive). Writers are not starved by a
    stream of readers: a turnstile, the lock file ``<path>.turnstile``, is held exclusively by a reader only while it
    takes its shared hold, and by a writer from before it waits for its exclusive hold until the block ends; once a
    writer waits, no reader gets in, and the readers inside finish. The locks go with the holder's descriptors, so a
    killed holder releases them. Each wait is a poll (at most :data:`_LONGEST_PAUSE_SECONDS` apart) that calls
    ``waiting()`` when it finds the lock taken and every :data:`_WAITING_EVERY_SECONDS` after, for a caller whose own
    watchdog must hear from it.

    Example:
        >>> import tempfile
        >>> with device_lock(Path(tempfile.mkdtemp()) / "device-0.lock", exclusive=False):
        ...     pass
    """
    with open_lock(path.with_name(path.name + ".turnstile")) as turnstile, open_lock(path) as lock:
        _wait_for(turnstile, fcntl.LOCK_EX, waiting)
        _wait_for(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, waiting)
        if not exclusive:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield  # closing the files releases what is still held


def given_device_lock() -> Path | None:
    """The :func:`device_lock` this process was given in :data:`DEVICE_LOCK_ENV` (``None``: its judge has the device alone)."""
    path = os.environ.get(DEVICE_LOCK_ENV)
    return Path(path) if path else None


def _wait_for(handle: Any, operation: int, waiting: Callable[[], None]) -> None:
    """Take ``flock(operation)`` on ``handle``, polling; ``waiting()`` as :func:`device_lock` says."""
    pause, told = 0.001, None
    while True:
        try:
            fcntl.flock(handle, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            now = time.monotonic()
            if told is None or now - told >= _WAITING_EVERY_SECONDS:
                waiting()
                told = now
            time.sleep(pause)
            pause = min(pause * 2, _LONGEST_PAUSE_SECONDS)
