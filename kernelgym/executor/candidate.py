"""The candidate's own process, apart from the judge: ``python -m kernelgym.executor.candidate``.

Holds:
    CandidateFactory: a process that imports torch and the candidate side once,
        then forks a fresh candidate process for every answer (a fork costs
        milliseconds; starting Python and torch costs seconds).
    CandidateProcess: the trusted side's handle on one candidate process:
        confined, leading a process group of its own, pinned, with nothing of the
        judge's (no descriptors, no modules, no files but its own directory); send it
        commands with deadlines, read its process state from ``/proc``, kill it
        and everything it started.
    main: the factory's entry point.

A candidate process serves exactly one answer and is then killed, with every
process it started: none can leave its process group (the seccomp filter
refuses ``setsid`` and ``setpgid``), and the group stays in the worker's
session, so a stopped worker takes them along. The factory never touches a
GPU, so each forked candidate creates its own device context.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import io
import json
import os
import pickle
import resource
import secrets
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kernelgym.backends.aten_observer import RECORD_BYTES, read_record
from kernelgym.backends.store import judge_dir
from kernelgym.executor.sampling import ThreadSampler
from kernelgym.executor.sandbox import (
    SandboxPolicy,
    apply_limits,
    deny_syscalls,
    die_with_parent,
    drop_privileges,
    kill_group,
    own_group,
    restrict_filesystem,
    runtime_paths,
    seccomp_unavailable,
)
from kernelgym.verifier.channel import BuildService, CandidateCrash, CandidateProtocolError, CandidateTimeout

__all__ = ["CandidateFactory", "CandidateProcess", "main", "prepare_factory"]

_MAX_REPLY_BYTES = 16 * 1024**2
_FATAL_SIGNALS = (("Segmentation fault", "SIGSEGV"), ("Aborted", "SIGABRT"), ("Bus error", "SIGBUS"),
                  ("Floating-point exception", "SIGFPE"), ("Floating point exception", "SIGFPE"), ("Illegal instruction", "SIGILL"))
_WATCHED_LIMITS = ("RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CPU")
# The payload of the frame that carries descriptors for the next command (a pickled command starts with b"\x80").
_DESCRIPTORS_FRAME = b"descriptors"
_MAX_DESCRIPTORS = 16
# The commands whose call arms the native observer once (see CandidateSide._made_call).
_OBSERVED_COMMANDS = ("call", "probe", "profile", "kernelbench_time")


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
    """One confined candidate process (forked by a :class:`CandidateFactory`), driven by the trusted judge.

    Args:
        pid: its process id (it leads a process group of its own, in the worker's session).
        directory: its private directory (its log and module files; shared buffers are memfds, not files here).
        conn: the judge's end of its channel.
    """

    build_service: BuildService | None = None
    """The trusted build step that serves the candidate's build requests (``None``: they are refused)."""
    build_budget: float = 900.0
    """Seconds one build request may take (the job's build budget), whatever is left of the command's."""

    def __init__(self, pid: int, directory: Path, conn: Connection, record_fd: int = -1) -> None:
        self.pid = pid
        self.dir = directory
        self.conn = conn
        self.record_fd = record_fd  # the memfd the native observer writes its records to (this side's descriptor)
        self.observer = False  # whether its process has the observer (said in its ready message, before any candidate code)
        self.armed = 0  # how many observed commands it was sent: the sequence number its observer's record must carry
        self.sweeps: list[int] | None = None  # where close leaves its process group to be swept later (see close)
        self.build_seconds = 0.0  # spent serving its build requests
        self._ready = False

    def wait_ready(self, timeout: float) -> None:
        """Wait until it has imported torch and confined itself."""
        if not self._ready:
            reply = self._receive(timeout)
            if reply.get("ready") is not True:
                raise CandidateProtocolError(f"unexpected first message {reply!r:.200}")
            self.observer = reply.get("observer") is True
            self._ready = True

    def observed(self) -> list[str] | None:
        """The operator names its observer recorded in the last observed command, read from the judge's memfd.

        ``[]`` when its process has no observer; ``None`` when the record is missing, malformed or
        not the last command's (see :func:`~kernelgym.backends.aten_observer.read_record`).
        """
        if not self.observer:
            return []
        return read_record(self.record_fd, self.armed)

    def pin(self, cpus: set[int]) -> None:
        """Pin it to ``cpus`` (set from outside: the candidate cannot ask for more than it is given)."""
        with contextlib.suppress(OSError):
            os.sched_setaffinity(self.pid, cpus)

    def send_descriptors(self, fds: list[int]) -> None:
        """Send open descriptors, which arrive with the next command (a closed channel shows at that request)."""
        frame = struct.pack("!i", len(_DESCRIPTORS_FRAME)) + _DESCRIPTORS_FRAME
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self.conn.fileno())) as sock:
            socket.send_fds(sock, [frame], fds)

    def request(self, command: tuple, timeout: float) -> dict[str, Any]:
        """Send ``command`` and return its reply, serving the native builds the candidate asks for meanwhile.

        While a command runs, the candidate may send build requests (``{"build": ..., "nonce": ...}``
        carrying the command's nonce, see :data:`~kernelgym.verifier.channel.BuildService`): each is
        served by :attr:`build_service` within :attr:`build_budget` and answered with ``("built", nonce, reply)``;
        the command's deadline moves by the time each took (counted in :attr:`build_seconds`). Any other
        extra message is a protocol error.
        """
        nonce = secrets.token_hex(8)
        deadline = time.monotonic() + timeout
        if command[0] in _OBSERVED_COMMANDS:
            self.armed += 1
        self._send(_dumps((command[0], nonce, *command[1:])))
        reply = self._receive(timeout)
        while "build" in reply:
            if reply.get("nonce") != nonce or set(reply) != {"build", "nonce"} or not isinstance(reply["build"], dict):
                raise CandidateProtocolError("a build request did not belong to the command it came with (forged or replayed message)")
            if self.build_service is None:
                answer = {"ok": False, "error": "build", "message": "native builds are not available for this backend"}
            else:
                started = time.monotonic()
                answer = self.build_service(reply["build"], self.build_budget)
                spent = time.monotonic() - started
                self.build_seconds += spent
                deadline += spent  # the build's time is the build's, not the command's
            self._send(_dumps(("built", nonce, answer)))
            reply = self._receive(deadline - time.monotonic())
        if reply.get("nonce") != nonce:
            raise CandidateProtocolError("a reply did not answer the command it was given (forged or replayed message)")
        if self.conn.poll(0):
            raise CandidateProtocolError("the candidate sent a message nobody asked for")
        return reply

    def _send(self, data: bytes) -> None:
        try:
            self.conn.send_bytes(data)
        except OSError as exc:
            raise CandidateCrash(self._crash_reason()) from exc

    def _receive(self, timeout: float) -> dict[str, Any]:
        if not self.conn.poll(max(timeout, 0.0)):
            raise CandidateTimeout
        try:
            data = self.conn.recv_bytes(_MAX_REPLY_BYTES)
        except (EOFError, OSError) as exc:
            raise CandidateCrash(self._crash_reason()) from exc
        try:
            reply = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            raise CandidateProtocolError("the candidate wrote bytes that are not a reply on the judge's channel") from None
        if not isinstance(reply, dict):
            raise CandidateProtocolError("the candidate wrote bytes that are not a reply on the judge's channel")
        return reply

    def _crash_reason(self) -> str:
        text = _log_tail(self.dir / "candidate.log", 65536)
        # The candidate's fault handler names the fatal signal in its log (it is the factory's child, not ours to wait for).
        fatal = next((f"killed by signal {name}" for cue, name in _FATAL_SIGNALS if f"Fatal Python error: {cue}" in text), None)
        tail = text.split("\nExtension modules:")[0][-1500:].strip()
        return (fatal or "the process ended") + (f"; last output:\n{tail}" if tail else "")

    def runnable_threads(self) -> int:
        """How many of its threads are running or ready to run now (state ``R`` in ``/proc/<pid>/task/*/stat``)."""
        count = 0
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return 0
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as handle:
                    count += handle.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                continue
        return count

    def thread_cpu_seconds(self) -> dict[int, float]:
        """CPU time each of its threads has run so far, by thread id (``/proc/<pid>/task/*/schedstat``).

        Threads that ended are missing; the judge compares readings taken around one call, where a
        thread that ended during it is counted from what it had run when last seen.
        """
        seconds: dict[int, float] = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return seconds
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as handle:
                    seconds[int(tid)] = int(handle.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                continue
        return seconds

    def libraries(self) -> list[str]:
        """Files mapped executable into the process, from ``/proc/<pid>/maps`` (whatever loaded them, whatever
        their names: a library loaded under another name or from a memfd is code all the same)."""
        try:
            with open(f"/proc/{self.pid}/maps") as handle:
                fields = [line.split(None, 5) for line in handle]
        except OSError:
            return []
        return sorted({f[5].strip() for f in fields if len(f) == 6 and "x" in f[1] and f[5].startswith("/")})

    def sampler(self) -> ThreadSampler:
        """A sampler of where its threads run, from this process with ``ptrace`` (:class:`~kernelgym.executor.sampling.ThreadSampler`)."""
        return ThreadSampler(self.pid)

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
        """Kill it and everything it started (its process group, which none of them can leave); remove its directory.

        With :attr:`sweeps` set, every process of its group is sent SIGKILL once and the group's id is
        left in that list: the owner sweeps it (:func:`~kernelgym.executor.sandbox.kill_group`) before
        the next timed calls, instead of waiting here until the processes are gone.
        """
        with contextlib.suppress(OSError):
            self.conn.close()
        if self.record_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.record_fd)
            self.record_fd = -1
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        if self.sweeps is None:
            kill_group(self.pid)
        else:
            kill_group(self.pid, rounds=1)
            self.sweeps.append(self.pid)
        shutil.rmtree(self.dir, ignore_errors=True)


class CandidateFactory:
    """Forks confined candidate processes from one process that has imported torch already.

    Args:
        backend: backend name.
        cache_dir: the build cache (candidates read it; only the trusted side writes it).
        policy: limits of each candidate.
        environment: the factory's (and its candidates') environment, scrubbed by the caller.
        parent_dir: where candidates' private directories are created.
    """

    def __init__(self, backend: str, cache_dir: Path, policy: SandboxPolicy, environment: dict[str, str], parent_dir: Path) -> None:
        from kernelgym.backends import get_backend

        self.backend, self.cache_dir, self.parent_dir = backend, cache_dir, parent_dir
        # Not the cache: builds reach the store through the trusted build step, and it is read-only here.
        self.writable = list(get_backend(backend).writable_paths(cache_dir / "builds"))
        control, child = socket.socketpair()
        log = open(parent_dir / "factory.log", "ab")  # noqa: SIM115 (handed to the child)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kernelgym.executor.candidate", str(child.fileno()), str(cache_dir),
                 json.dumps(asdict(policy)), backend],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=environment, cwd=parent_dir, **own_group(),  # in the worker's session: stopped with it
            )
        finally:
            child.close()
            log.close()
        self.control = control

    def spawn(self, timeout: float, cpus: set[int] | None = None) -> CandidateProcess:
        """A new candidate process (it confines itself and says ``ready``; see :meth:`CandidateProcess.wait_ready`)."""
        directory = Path(tempfile.mkdtemp(prefix="candidate-", dir=self.parent_dir))
        parent, child = socket.socketpair()
        from kernelgym.verifier.trial_inputs import sealed_memfd  # (imports torch: not at the worker's start)

        record = sealed_memfd(RECORD_BYTES, "kernelgym-observer-record")
        request = json.dumps({"dir": str(directory), "writable": [str(directory), *self.writable],
                              "cpus": sorted(cpus) if cpus else None}).encode()
        try:
            self.control.settimeout(timeout)
            socket.send_fds(self.control, [struct.pack("!I", len(request)) + request], [child.fileno(), record])
            pid = struct.unpack("!q", _read_exactly(self.control, 8))[0]
        except (OSError, ValueError) as exc:
            os.close(record)
            raise CandidateCrash(f"the candidate factory did not answer: {exc}; {self._log_tail()}") from None
        finally:
            child.close()
        return CandidateProcess(pid, directory, Connection(parent.detach()), record)

    def _log_tail(self) -> str:
        log = self.parent_dir / "factory.log"
        return log.read_bytes()[-1500:].decode(errors="replace").strip() if log.exists() else ""

    def close(self) -> None:
        """Stop the factory (its candidates die with it)."""
        with contextlib.suppress(OSError):
            self.control.close()
        kill_group(self.process.pid)  # its own builds (the observer's) included
        with contextlib.suppress(OSError):
            self.process.kill()
        self.process.wait()


def _log_tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of a log the candidate could have replaced: no link followed, no FIFO waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # a device, a FIFO, or a link to a file elsewhere
            return ""
        return os.pread(fd, size, max(info.st_size - size, 0)).decode(errors="replace")
    finally:
        os.close(fd)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("closed")
        data += chunk
    return data


class _CommandReader:
    """The candidate's end of the judge's commands: framed pickles, and descriptors sent for the next command.

    Descriptors come in a frame of their own (see :meth:`CandidateProcess.send_descriptors`)
    and are appended to the arguments of the command that follows it (``bind``).
    """

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=os.dup(fd))
        self.fds: list[int] = []

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk, fds, _, _ = socket.recv_fds(self.sock, size - len(data), _MAX_DESCRIPTORS, socket.MSG_CMSG_CLOEXEC)
            self.fds += fds
            if not chunk:
                raise EOFError
            data += chunk
        return bytes(data)

    def __call__(self) -> tuple:
        """The next command (as :class:`~multiprocessing.connection.Connection` frames it), with any descriptors last."""
        while True:
            size = struct.unpack("!i", self._read(4))[0]
            if size == -1:
                size = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(size)
            if payload != _DESCRIPTORS_FRAME:
                break
        command = pickle.loads(payload)
        fds, self.fds = self.fds, []
        return (*command, fds) if fds else command


def _serve_one(fd: int, spec: dict[str, Any], cache_dir: Path, policy: SandboxPolicy, backend: Any, observer: Any,
               record_fd: int) -> None:
    """In a freshly forked child: become a confined candidate process and serve one answer.

    Confinement comes in this order: its own process group, limits, no privileges (before the device
    context, so the driver's threads start without any), the device context, Landlock (writes to its
    directory, reads of the installed runtime, the store and its directory), and the seccomp filter
    (on every thread, the driver's included). Candidate code runs only after all of it; a mechanism
    the kernel offers that cannot be applied ends the process before ``ready``.
    """
    from kernelgym.verifier.candidate_side import BLOCKED_MODULES, CandidateSide

    # The factory ignores SIGCHLD (the kernel reaps its children); a candidate must not, or every
    # compiler it runs would look successful to subprocess (ECHILD reads as exit status 0).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # The observer writes its records to the judge's memfd from C++, set before any candidate code can intervene.
    if observer is None or not observer.record_to(record_fd):
        os.close(record_fd)
    # A group of its own in the worker's session: killed whole when the job ends, and with the worker's session.
    os.setpgid(0, 0)
    die_with_parent()
    directory = Path(spec["dir"])
    # Never readable: the judge's directories, the worker's (HOME and TMPDIR until here), other candidates'.
    private = (str(directory.parent), str(cache_dir), str(judge_dir(cache_dir)), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""))
    log = os.open(directory / "candidate.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    faulthandler.enable()  # a fatal signal is named in the log
    os.environ.update(HOME=str(directory), TMPDIR=str(directory))
    # Python caches its temporary directory at first use: in the factory, that was the worker's, which the
    # candidate may not write (Triton's JIT makes its files with tempfile, and failed there with EACCES).
    tempfile.tempdir = str(directory)
    os.chdir(directory)
    if spec.get("cpus"):
        os.sched_setaffinity(0, set(spec["cpus"]))
    conn = Connection(fd)
    apply_limits(policy)
    confinement = [drop_privileges()]
    build_root = cache_dir / "builds"
    backend.prepare_worker(build_root)  # a device context, created here and never in the factory
    readable = (*runtime_paths(tuple(p for p in private if p)), str(build_root))
    confinement.append(f"landlock: {restrict_filesystem(tuple(spec['writable']), readable)}")
    confinement.append(deny_syscalls())
    missing = [c for c in confinement if "unavailable" in c]
    if missing:  # said in its log; the ready message carries the whole account
        print("kernelgym: candidate confinement incomplete:", "; ".join(missing), flush=True)
    if not backend.host_array_libraries_needed:  # host array libraries cannot compute outputs: not importable
        for name in BLOCKED_MODULES:
            sys.modules[name] = None  # type: ignore[assignment]
    side = CandidateSide(backend, directory, build_root, observer, watch_state=not policy.builds_only)
    conn.send_bytes(json.dumps({"ready": True, "confinement": confinement, "observer": observer is not None}).encode())
    side.serve(_CommandReader(fd), conn.send_bytes)


def prepare_factory(cache_dir: Path, backend_name: str, watch_state: bool = True) -> tuple[Any, Any]:
    """What every candidate inherits: torch and the candidate side imported, the backend's host setup, the observer.

    Nothing here may initialize a GPU driver, or every forked candidate fails to create its device context.
    ``torch.utils.cpp_extension`` asks at import whether CUDA is available (to find ``CUDA_HOME``); asked
    through the CUDA runtime, that initializes the driver; asked through NVML, as set here, it does not.
    """
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch  # (the slow import, done once for every candidate)

    # The precision the reference computes in (the worker's): full fp32 convolutions, not cuDNN's default TF32,
    # which made the reference's own code as an answer 2x "faster" on level-2 convolutions. A candidate that turns
    # it back on changes global state (rule global-flags). A preset that keeps PyTorch's default (kernelbench) has
    # the judge set it at load, before the answer runs, for the reference and the answer alike.
    torch.backends.cudnn.allow_tf32 = False

    import kernelgym.verifier.candidate_side  # noqa: F401

    if watch_state:  # what a global-state snapshot imports first (seconds): once here, not in every candidate
        import torch._dynamo  # noqa: F401
    from kernelgym.backends import get_backend
    from kernelgym.backends.aten_observer import load_observer
    from kernelgym.backends.native import BuildError

    backend = get_backend(backend_name)
    if backend.device_type == "cpu":
        backend.prepare_worker(cache_dir / "builds")  # host setup (the precompiled header) once, before forking
    backend.prepare_factory()
    try:  # the guard below Python, built once per cache; every candidate inherits it
        observer: Any = load_observer(cache_dir / "builds")
    except BuildError as exc:
        print(f"kernelgym: the ATen observer could not be built, only the Python guard watches calls: {exc}", flush=True)
        observer = None
    return backend, observer


def main(argv: list[str]) -> int:
    """The factory: ``argv`` = [control fd, cache_dir, policy_json, backend]; forks one candidate per request."""
    die_with_parent()
    fd, cache_dir, policy_json, backend_name = int(argv[0]), Path(argv[1]), argv[2], argv[3]
    policy = SandboxPolicy(**json.loads(policy_json))
    backend, observer = prepare_factory(cache_dir, backend_name, watch_state=not policy.builds_only)
    missing = seccomp_unavailable()
    if missing:  # candidates run with Landlock, limits and no privileges, without the system-call filter
        print(f"kernelgym: candidates run without a seccomp filter ({missing}): they may open network sockets "
              "and start processes outside their process group, which outlive their job", flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    gc.freeze()  # the garbage collector of a child never writes to (and so never copies) the factory's objects
    control = socket.socket(fileno=fd)
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(control, 4, 2)
            if len(header) < 4 or len(fds) != 2:
                return 0
            spec = json.loads(_read_exactly(control, struct.unpack("!I", header)[0]))
        except (OSError, ValueError):
            return 0
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                _serve_one(fds[0], spec, cache_dir, policy, backend, observer, fds[1])
            except BaseException:  # noqa: BLE001 (a child never returns into the factory's loop)
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        for received in fds:
            os.close(received)
        control.sendall(struct.pack("!q", pid))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
