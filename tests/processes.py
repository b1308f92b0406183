"""Processes a test looks for after a judgement: what a candidate or a task's program may have left running.

Holds:
    left_behind: the processes of one name that have not exited.
"""

from __future__ import annotations

import os

__all__ = ["left_behind"]


def left_behind(name: str) -> list[int]:
    """Processes named ``name`` that have not exited (zombies, already dead, are not counted)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                head, tail = handle.read().rsplit(")", 1)
        except OSError:
            continue
        if head.split("(", 1)[1] == name and tail.split()[0] != "Z":
            found.append(int(entry))
    return found
