"""The reference timed the way the answer is: in a twin of the candidate's process (trusted side, host devices).

Holds:
    ReferenceTwin: a process made like the candidate's, running the task's own ``Model``, called beside it.
    TwinUnavailable: the twin could not be started or stopped answering (the worker then times the reference).

On a host the time of a call depends on the process it runs in as well as on its code: the same
forward, timed in the judge's worker right after each candidate call, ran 10-40% faster there than in
the candidate's process (the bundled CPU tasks, 2 cores), which read as a 0.6-0.9x "speedup" of an
answer identical to the reference. The twin is forked from the same factory, confined the same way,
fed the same fresh inputs through the same kind of shared buffers and called with the same request,
watched by the same guards on the same calls: whatever the harness and the process switches cost,
both programs pay it, and an identical answer scores 1.00x. It runs only the task's code, never the
candidate's; the judge still computes the expected outputs itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernelgym.verifier.channel import CandidateChannel, CandidateCrash, CandidateProtocolError, CandidateTimeout
from kernelgym.verifier.trial_inputs import share_buffers

__all__ = ["ReferenceTwin", "TwinUnavailable"]


class TwinUnavailable(Exception):
    """The twin process could not be started, or failed; the message says how."""


class ReferenceTwin:
    """The task's ``Model`` in a process made like the candidate's.

    Args:
        process: a fresh candidate process (ready, pinned where the candidate is).
        seconds_left: how long a request may still take (the timing stage's budget).
    """

    def __init__(self, process: CandidateChannel, seconds_left: Callable[[], float]) -> None:
        self.process = process
        self.seconds_left = seconds_left
        self.local_inputs: list[Any] = []

    def _ask(self, *command: Any) -> dict[str, Any]:
        try:
            reply = self.process.request(command, max(self.seconds_left(), 1.0))
        except (CandidateTimeout, CandidateCrash, CandidateProtocolError) as exc:
            raise TwinUnavailable(f"{command[0]}: {type(exc).__name__}: {exc}") from None
        if not reply.get("ok"):
            raise TwinUnavailable(f"{command[0]}: {reply.get('message', reply)!s:.300}")
        return reply

    def start(self, source: str, seed: int, init_inputs: list[Any], state: dict[str, torch.Tensor],
              inputs: list[Any], outputs: list[Any]) -> None:
        """Load the task's program as the answer, build it with the reference's init inputs and state, bind buffers like ``inputs`` and ``outputs``."""
        self._ask("load", f"{source}\n\nModelNew = Model\n")
        self._ask("construct", seed, init_inputs, state)
        self.local_inputs, _, remote = share_buffers(self.process, inputs, outputs)
        self._ask("bind", *remote)

    def call(self, inputs: list[Any], python_guard: bool, fetch: bool, training: bool | None = False, grad: bool = False) -> float:
        """One call on ``inputs`` (copied into its buffers), watched as the candidate's call is; its ms.

        ``fetch``: the outputs are then fetched, as the candidate's are when they are read again (the twin
        gets the candidate's requests, in the candidate's order).
        """
        for dst, src in zip(self.local_inputs, inputs, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        ms = float(self._ask("call", training, grad, python_guard)["ms"])
        if fetch:
            self._ask("fetch")
        return ms

    def reuse(self) -> None:
        """Its freed host memory reused from now on, as the candidate's is (see ``CandidateSide.cmd_reuse``)."""
        self._ask("reuse")

    def probe(self, training: bool | None = False) -> None:
        """A probe request, as the candidate gets before some calls."""
        self._ask("probe", training, False)

    def close(self) -> None:
        """Stop its process."""
        close = getattr(self.process, "close", None)
        if close is not None:
            close()
