"""Confinement applied to a worker process before it touches candidate code.

Holds:
    SandboxPolicy: what a worker may use (memory, file size, processes, paths).
    scrubbed_environment: the environment variables a worker keeps.
    apply_limits: resource limits via ``setrlimit``.
    restrict_filesystem: Landlock write confinement and TCP denial, where the kernel offers it.
    kill_session: kill every process of a worker's session (fork bombs included).
    die_with_parent: have the kernel kill this process when its parent dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SandboxPolicy", "scrubbed_environment", "apply_limits", "restrict_filesystem", "kill_session", "die_with_parent"]

_KEEP_ENV = (
    "PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES", "CC", "CXX", "TRITON_INTERPRET", "MUSA_HOME", "MUSA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST", "NVIDIA_VISIBLE_DEVICES",
)


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one worker.

    Attributes:
        memory_gb: address-space limit (``None``: none; CUDA needs a large virtual space).
        file_size_gb: largest file the worker may write (a precompiled header is ~0.8 GB).
        max_processes: process limit (enforced by the kernel for non-root users only).
        writable: directories the worker may write beneath; everything else is read-only.
        threads: OpenMP/torch threads per worker.
        cpu: index (into the CPUs this process may use) of the first CPU the worker and its candidates
            are pinned to (``None``: not pinned). The reference and the candidate run on it alike.
        cpu_count: how many CPUs from ``cpu`` on (a judge: one; build-ahead workers share the rest, so
            a build's compile steps run side by side).
    """

    memory_gb: float | None = 16.0
    file_size_gb: float = 2.0
    max_processes: int = 4096
    writable: tuple[str, ...] = ()
    threads: int = 1
    cpu: int | None = None
    cpu_count: int = 1


def scrubbed_environment(work_dir: Path, cache_dir: Path, threads: int) -> dict[str, str]:
    """A minimal environment: no credentials, private HOME and TMPDIR, caches in ``cache_dir``."""
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    # The worker imports kernelgym from wherever this process does, installed or not.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(
        HOME=str(work_dir),
        TMPDIR=str(work_dir),
        TORCH_EXTENSIONS_DIR=str(cache_dir / "torch_extensions"),
        TRITON_CACHE_DIR=str(cache_dir / "triton"),
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        MAX_JOBS=env.get("MAX_JOBS", "2"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def apply_limits(policy: SandboxPolicy) -> None:
    """Set address-space, file-size, process and core-dump limits on this process."""
    gib = 1024**3
    limits = [
        (resource.RLIMIT_FSIZE, int(policy.file_size_gb * gib)),
        (resource.RLIMIT_NPROC, policy.max_processes),
        (resource.RLIMIT_CORE, 0),
    ]
    if policy.memory_gb is not None:
        limits.append((resource.RLIMIT_AS, int(policy.memory_gb * gib)))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap if hard == resource.RLIM_INFINITY else hard))


# Landlock (Linux >= 5.13), x86-64/arm64 syscall numbers and uapi constants.
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_RULE_PATH_BENEATH = 1
_FS_WRITE_FILE, _FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_FS_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect
_SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict_filesystem(writable: tuple[str, ...]) -> str:
    """Make everything but ``writable`` read-only and deny TCP, with Landlock.

    Returns a short description of what was applied (``"unavailable"`` when the
    kernel has no Landlock; the other defenses still hold).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return "unavailable"
    fs = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    attr = _RulesetAttr(fs, _NET_TCP if abi >= 4 else 0, _SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return "unavailable"
    try:
        for path in (*writable, "/dev/null"):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = fs if os.path.isdir(path) else (_FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0))
                rule = _PathBeneath(rights, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    return "unavailable"
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "unavailable"
        if libc.syscall(_SYS_RESTRICT, ruleset, ctypes.c_uint32(0)) != 0:
            return "unavailable"
    finally:
        os.close(ruleset)
    return f"landlock abi {abi}"


def _session_members(sid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:  # after the name: state, ppid, pgrp, session
            members.append(int(entry))
    return members


def kill_session(sid: int, rounds: int = 50) -> None:
    """SIGKILL every process in session ``sid`` until none is left (bounded)."""
    for _ in range(rounds):
        members = _session_members(sid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when the thread that started it exits (Linux).

    A worker runs in its own session, so nothing else reaches it when its parent
    is killed outright (a Ray actor killed by ``ray.kill`` or the OOM killer); a
    parent that dies while the worker is idle is also noticed by the closed socket.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
