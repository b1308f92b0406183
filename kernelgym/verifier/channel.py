"""How the trusted judge talks to the candidate's process (the process itself lives in the executor).

Holds:
    CandidateChannel: what the judge needs of a candidate process.
    CandidateTimeout / CandidateCrash / CandidateProtocolError: how a request can fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["CandidateChannel", "CandidateTimeout", "CandidateCrash", "CandidateProtocolError"]


class CandidateTimeout(Exception):
    """The candidate did not answer within its deadline."""


class CandidateCrash(Exception):
    """The candidate process died; the message says how."""


class CandidateProtocolError(Exception):
    """The candidate sent something the protocol does not allow (a forged or unsolicited message)."""


class CandidateChannel(Protocol):
    """A candidate process as the judge sees it.

    Attributes:
        dir: the candidate's private directory (host buffers shared with it are files here).
    """

    dir: Path

    def request(self, command: tuple, timeout: float) -> dict[str, Any]:
        """Send a command, return the candidate's JSON reply (raises the exceptions above)."""
        ...

    def cpu_seconds(self) -> float:
        """CPU time the candidate's main thread has run so far, read from outside."""
        ...

    def libraries(self) -> list[str]:
        """Paths of the shared objects mapped into the candidate process, read from outside."""
        ...

    def process_state(self) -> dict[str, Any]:
        """Threads, affinity, signal handlers and resource limits of the candidate process, read from outside."""
        ...
