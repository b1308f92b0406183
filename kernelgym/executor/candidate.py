"""The candidate's own process, apart from the judge: ``python -m kernelgym.executor.candidate``.

Holds:
    CandidateProcess: the trusted side's handle on one candidate process: spawn it
        confined, pinned and with nothing of the judge's (no descriptors, no
        modules, no files but its own directory), send commands with deadlines,
        read its process state from ``/proc``, kill it.
    main: the candidate process's entry point.

A candidate process serves exactly one answer and is then killed. The judge
keeps one spare process started ahead, so importing torch and creating a device
context never delays the next answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kernelgym.executor.sandbox import SandboxPolicy, apply_limits, die_with_parent, kill_session, restrict_filesystem
from kernelgym.verifier.channel import CandidateCrash, CandidateProtocolError, CandidateTimeout

__all__ = ["CandidateProcess", "main"]

_MAX_REPLY_BYTES = 16 * 1024**2
_WATCHED_LIMITS = ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CPU")


class _Pickler(pickle.Pickler):
    """Host tensors travel by value; device tensors as IPC handles (they stay on the device)."""

    def reducer_override(self, obj: Any) -> Any:
        import torch

        if isinstance(obj, torch.Tensor) and obj.device.type != "cpu":
            from torch.multiprocessing.reductions import reduce_tensor

            return reduce_tensor(obj)
        return NotImplemented


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


class CandidateProcess:
    """One confined candidate process, driven by the trusted judge.

    Args:
        backend: backend name.
        cache_dir: the build cache (the only shared directory it may write).
        policy: limits; ``writable`` is replaced by the candidate's own list.
        environment: its environment variables (scrubbed by the caller).
        parent_dir: where its private directory is created.
        startup_cpus: CPUs it may use while it starts (importing torch); it is
            pinned to the judge's CPUs when it is put to work.
    """

    def __init__(self, backend: str, cache_dir: Path, policy: SandboxPolicy, environment: dict[str, str], parent_dir: Path,
                 startup_cpus: set[int] | None = None) -> None:
        from kernelgym.backends import get_backend

        self.dir = Path(tempfile.mkdtemp(prefix="candidate-", dir=parent_dir))
        writable = [str(self.dir), str(cache_dir), *get_backend(backend).writable_paths(cache_dir / "builds")]
        parent, child = socket.socketpair()
        log = open(self.dir / "candidate.log", "wb")  # noqa: SIM115 (handed to the child)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kernelgym.executor.candidate", str(child.fileno()), str(self.dir), str(cache_dir),
                 json.dumps(asdict(policy) | {"writable": writable}), backend],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=environment | {"HOME": str(self.dir), "TMPDIR": str(self.dir)}, cwd=self.dir, start_new_session=True,
            )
        finally:
            child.close()
            log.close()
        self.conn = Connection(parent.detach())
        if startup_cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.process.pid, startup_cpus)
        self._ready = False

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def wait_ready(self, timeout: float) -> None:
        """Wait until it has imported torch and confined itself."""
        if not self._ready:
            reply = self._receive(timeout)
            if reply.get("ready") is not True:
                raise CandidateProtocolError(f"unexpected first message {reply!r:.200}")
            self._ready = True

    def pin(self, cpus: set[int]) -> None:
        """Pin it to ``cpus`` (set from outside: the candidate cannot ask for more than it is given)."""
        with contextlib.suppress(OSError):
            os.sched_setaffinity(self.process.pid, cpus)

    def request(self, command: tuple, timeout: float) -> dict[str, Any]:
        """Send ``command`` and return its reply; any unsolicited extra message is a protocol error."""
        nonce = secrets.token_hex(8)
        data = _dumps((command[0], nonce, *command[1:]))
        try:
            self.conn.send_bytes(data)
        except OSError as exc:
            raise CandidateCrash(self._crash_reason()) from exc
        reply = self._receive(timeout)
        if reply.get("nonce") != nonce:
            raise CandidateProtocolError("a reply did not answer the command it was given (forged or replayed message)")
        if self.conn.poll(0):
            raise CandidateProtocolError("the candidate sent a message nobody asked for")
        return reply

    def _receive(self, timeout: float) -> dict[str, Any]:
        if not self.conn.poll(max(timeout, 0.0)):
            raise CandidateTimeout
        try:
            data = self.conn.recv_bytes(_MAX_REPLY_BYTES)
        except (EOFError, OSError) as exc:
            raise CandidateCrash(self._crash_reason()) from exc
        try:
            reply = json.loads(data)
        except ValueError:
            raise CandidateProtocolError("the candidate wrote bytes that are not a reply on the judge's channel") from None
        if not isinstance(reply, dict):
            raise CandidateProtocolError("the candidate wrote bytes that are not a reply on the judge's channel")
        return reply

    def _crash_reason(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            reason = f"killed by signal {signal.Signals(-code).name}"
        else:
            reason = f"exited with code {code}"
        log = self.dir / "candidate.log"
        tail = log.read_bytes()[-1500:].decode(errors="replace").strip() if log.exists() else ""
        return reason + (f"; last output:\n{tail}" if tail else "")

    def cpu_seconds(self) -> float:
        """CPU time its main thread has run so far (``/proc/<pid>/schedstat``; waiting for a CPU does not count)."""
        try:
            with open(f"/proc/{self.pid}/schedstat") as handle:
                return int(handle.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    def process_state(self) -> dict[str, Any]:
        """What the candidate could change about its own process: threads, affinity, signal handlers, limits."""
        state: dict[str, Any] = {}
        try:
            with open(f"/proc/{self.pid}/status") as handle:
                for line in handle:
                    key, _, value = line.partition(":")
                    if key in ("Threads", "SigCgt", "SigIgn", "SigBlk"):
                        state[key.lower()] = value.strip()
            state["affinity"] = sorted(os.sched_getaffinity(self.pid))
            for name in _WATCHED_LIMITS:
                state[name] = list(resource.prlimit(self.pid, getattr(resource, name)))
        except (OSError, ProcessLookupError):
            state["gone"] = True
        return state

    def close(self) -> None:
        """Kill it and everything it started; remove its directory."""
        with contextlib.suppress(OSError):
            self.conn.close()
        kill_session(self.process.pid)
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Entry point: ``argv`` = [fd, work_dir, cache_dir, policy_json, backend]."""
    die_with_parent()
    fd, work_dir, cache_dir, policy_json, backend_name = int(argv[0]), Path(argv[1]), Path(argv[2]), argv[3], argv[4]
    raw = json.loads(policy_json)
    policy = SandboxPolicy(**{**raw, "writable": tuple(raw["writable"])})
    conn = Connection(socket.socket(fileno=fd).detach())
    os.chdir(work_dir)
    apply_limits(policy)

    import torch  # noqa: F401  (before confinement: slow, writes nothing)

    from kernelgym.backends import get_backend
    from kernelgym.verifier.candidate_side import CandidateSide

    backend = get_backend(backend_name)
    build_root = cache_dir / "builds"
    backend.prepare_worker(build_root)
    restrict_filesystem(policy.writable)
    # Host array libraries cannot compute outputs: the candidate cannot import them.
    for name in ("numpy", "cupy", "jax", "scipy", "numba"):
        sys.modules[name] = None  # type: ignore[assignment]
    side = CandidateSide(backend, work_dir, build_root)
    conn.send_bytes(json.dumps({"ready": True}).encode())
    side.serve(lambda: pickle.loads(conn.recv_bytes()), conn.send_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
