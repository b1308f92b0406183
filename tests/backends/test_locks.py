"""The device lock the judges of one GPU share: readers side by side, a writer alone and never starved, across processes."""

from __future__ import annotations

import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelgym.backends import locks
from kernelgym.backends.locks import LOCK_MODE, device_lock

_HOLDER = """
import sys
from pathlib import Path
from kernelgym.backends.locks import device_lock
with device_lock(Path(sys.argv[1]), exclusive=sys.argv[2] == "exclusive"):
    print("held", flush=True)
    sys.stdin.readline()
"""

_PATIENCE = 10.0  # seconds a holder that should get the lock may take (a process start on a loaded machine)
_SHUT_OUT = 0.5  # seconds a holder that should wait is watched not getting it


class Holder:
    """A process that takes the lock (shared or exclusive), says ``held``, and lets go when told."""

    def __init__(self, lock: Path, exclusive: bool) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock), "exclusive" if exclusive else "shared"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def holds(self, within: float = _PATIENCE) -> bool:
        """Whether it says ``held`` within ``within`` seconds."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], within)
        return bool(ready) and self.process.stdout.readline().strip() == "held"

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.process.wait(timeout=_PATIENCE) == 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.kill()


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    return tmp_path / "judge" / "devices" / "device-0.lock"


def _start(holders: list[Holder], lock: Path, exclusive: bool) -> Holder:
    holder = Holder(lock, exclusive)
    holders.append(holder)
    return holder


def test_readers_hold_the_lock_side_by_side(lock: Path, holders: list[Holder]) -> None:
    first = _start(holders, lock, exclusive=False)
    assert first.holds()
    second = _start(holders, lock, exclusive=False)
    assert second.holds()
    first.release()
    second.release()


@pytest.mark.parametrize("first_exclusive, second_exclusive", [(True, False), (True, True), (False, True)])
def test_a_writer_holds_the_lock_alone(lock: Path, holders: list[Holder], first_exclusive: bool, second_exclusive: bool) -> None:
    first = _start(holders, lock, first_exclusive)
    assert first.holds()
    second = _start(holders, lock, second_exclusive)
    assert not second.holds(within=_SHUT_OUT)
    first.release()
    assert second.holds()
    second.release()


def test_a_waiting_writer_goes_before_readers_that_come_after_it(lock: Path, holders: list[Holder]) -> None:
    """Readers that keep overlapping would hold a plain shared lock forever; past the turnstile, the writer is next."""
    reader = _start(holders, lock, exclusive=False)
    assert reader.holds()
    writer = _start(holders, lock, exclusive=True)
    assert not writer.holds(within=_SHUT_OUT)  # waiting for the reader, holding the turnstile
    later = _start(holders, lock, exclusive=False)
    assert not later.holds(within=_SHUT_OUT)  # would overlap the first reader but for the writer waiting
    reader.release()
    assert writer.holds()
    assert not later.holds(within=_SHUT_OUT)
    writer.release()
    assert later.holds()
    later.release()


def test_a_wait_is_told_at_once_and_then_at_intervals(lock: Path, holders: list[Holder], monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge tells its watchdog it is alive while it waits (its stage's budget is not running)."""
    monkeypatch.setattr(locks, "_WAITING_EVERY_SECONDS", 0.1)
    writer = _start(holders, lock, exclusive=True)
    assert writer.holds()
    told: list[float] = []

    def take() -> None:
        with device_lock(lock, exclusive=False, waiting=lambda: told.append(time.monotonic())):
            pass

    taker = threading.Thread(target=take)
    taker.start()
    time.sleep(0.5)
    writer.release()
    taker.join(timeout=_PATIENCE)
    assert not taker.is_alive() and len(told) >= 3
    with device_lock(lock, exclusive=True, waiting=lambda: told.append(0.0)):
        pass
    assert told[-1] != 0.0  # nothing to wait for: not told


def test_the_lock_files_are_write_only_for_their_owner(lock: Path) -> None:
    """A candidate that could open a device's lock could hold every judge of its GPU."""
    with device_lock(lock, exclusive=True):
        pass
    turnstile = lock.with_name(lock.name + ".turnstile")
    assert [path.stat().st_mode & 0o777 for path in (lock, turnstile)] == [LOCK_MODE, LOCK_MODE] == [0o200, 0o200]
