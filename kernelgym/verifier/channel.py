"""How the trusted judge talks to the candidate's process (the process itself lives in the executor).

Holds:
    CandidateChannel: what the judge needs of a candidate process.
    CandidateTimeout / CandidateCrash / CandidateProtocolError: how a request can fail.
    BuildService: the trusted build step as the channel calls it.
    BuildsDeferred: a judge left a job to the build workers, with the builds it asked for.

The protocol: the judge sends ``(name, nonce, *args)`` (pickled) and the candidate
answers one JSON object echoing the nonce. While a command runs, the candidate may
ask for native builds: ``{"build": request, "nonce": nonce}`` with the command's
nonce, answered by the judge with ``("built", nonce, reply)`` (see
:class:`~kernelgym.backends.trusted_build.StoreBuilder`); the command's reply follows.
Any other message is a protocol error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kernelgym.verifier.sampled_compute import CodeSampler

__all__ = ["BuildService", "BuildsDeferred", "CandidateChannel", "CandidateTimeout", "CandidateCrash", "CandidateProtocolError"]

BuildService = Callable[[dict[str, Any], float], dict[str, Any]]
"""Serves one build request of the candidate within a number of seconds; returns the reply it is sent."""


class BuildsDeferred(Exception):
    """A judge met a build request that is not in the store: it leaves the job, which goes to a build worker with
    ``requests`` (built there, ahead) and comes back. No judge, nor the device it times on, waits on a compiler.

    Attributes:
        requests: the build requests (:func:`~kernelgym.backends.trusted_build.plan_build`'s fields) to build ahead.
    """

    def __init__(self, requests: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(requests)} build(s) left to the build workers")
        self.requests = list(requests)


class CandidateTimeout(Exception):
    """The candidate did not answer within its deadline."""


class CandidateCrash(Exception):
    """The candidate process died; the message says how."""


class CandidateProtocolError(Exception):
    """The candidate sent something the protocol does not allow (a forged or unsolicited message)."""


class CandidateChannel(Protocol):
    """A candidate process as the judge sees it.

    Attributes:
        dir: the candidate's private directory (its log and module files; the judge follows no path there).
        build_seconds: seconds spent so far serving its build requests (measured on the judge's side); a
            command's deadline is moved by the time its builds took, so no stage but the build stage pays for them.
    """

    dir: Path
    build_seconds: float

    def request(self, command: tuple, timeout: float) -> dict[str, Any]:
        """Send a command, return the candidate's JSON reply (raises the exceptions above)."""
        ...

    def runnable_threads(self) -> int:
        """How many threads of the candidate are running or ready to run, read from outside."""
        ...

    def thread_cpu_seconds(self) -> dict[int, float]:
        """CPU time each thread of the candidate has run so far, by thread id, read from outside."""
        ...

    def send_descriptors(self, fds: list[int]) -> None:
        """Send open descriptors (duplicated into the candidate), which arrive with the next command."""
        ...

    def observed(self) -> list[str] | None:
        """The operator names the native observer recorded in the last observed call, written by it to the judge's descriptor.

        ``[]`` when the process has no observer; ``None`` when the record is missing, malformed or not that call's.
        """
        ...

    def libraries(self) -> list[str]:
        """Paths of the files mapped executable into the candidate process (its native code), read from outside."""
        ...

    def process_state(self) -> dict[str, Any]:
        """Threads, affinity, signal handlers and resource limits of the candidate process, read from outside."""
        ...

    def sampler(self) -> CodeSampler:
        """A sampler of where the candidate's threads run, from outside (:mod:`kernelgym.verifier.sampled_compute`)."""
        ...
