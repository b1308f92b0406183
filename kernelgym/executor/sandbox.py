"""Confinement applied to a worker process before it touches candidate code.

Holds:
    SandboxPolicy: what a worker may use (memory, file size, processes, paths).
    scrubbed_environment: the environment variables a worker keeps.
    apply_limits: resource limits via ``setrlimit``.
    restrict_filesystem: Landlock confinement of writes (and, when asked, reads and execution), TCP denied,
        where the kernel offers it.
    runtime_paths: the installed runtime a confined candidate reads and runs (Python, libraries, toolchains).
    kill_session: kill every process of a worker's session (fork bombs included).
    kill_group, own_group: start a trusted helper in a process group of the worker's session, and stop a group
        whole (a candidate's too: it leads a group of its own that none of its processes can leave).
    die_with_parent: have the kernel kill this process when its parent dies.
    SandboxError: a confinement the OS offers could not be applied (the candidate must not run).
    drop_privileges: ``no_new_privs`` and no capability left (bounding set included).
    DENIED_SYSCALLS / deny_syscalls: the seccomp filter of a candidate (EPERM for what no honest kernel needs,
        sockets of any family but AF_UNIX included).
    seccomp_unavailable: why a machine cannot take that filter, if it cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import resource
import shutil
import signal
import stat
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ALLOCATOR_ENV", "SandboxPolicy", "scrubbed_environment", "apply_limits", "restrict_filesystem", "runtime_paths",
           "kill_session", "kill_group", "own_group", "die_with_parent", "SandboxError", "drop_privileges", "DENIED_SYSCALLS", "deny_syscalls", "seccomp_unavailable"]

_KEEP_ENV = (
    "PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES", "CC", "CXX", "TRITON_INTERPRET", "MUSA_HOME", "MUSA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST", "NVIDIA_VISIBLE_DEVICES",
)

# The C allocator's thresholds, fixed. glibc raises its mmap and trim thresholds as a process frees large blocks, so
# two processes running the same code differ by their history: whether each call's buffers come from the heap or from
# fresh pages. A 16x4096 RMSNorm on the CPU: 28 us per call with the heap reused, 60-100 us when the heap is trimmed
# after every call, 140 us with fresh pages for every buffer. Fixed at what a long-running process converges to
# (32 MB, the largest the dynamic threshold reaches, and twice that for trimming), the candidate's process and the
# reference's twin allocate alike, whatever each did before.
ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * 1024**2), "MALLOC_TRIM_THRESHOLD_": str(64 * 1024**2)}


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one worker.

    Attributes:
        memory_gb: address-space limit (``None``: none; CUDA needs a large virtual space).
        file_size_gb: largest file the worker may write (a precompiled header is ~0.8 GB).
        max_processes: process limit (enforced by the kernel for non-root users only).
        threads: OpenMP/torch threads per worker.
        cpu: index (into the CPUs this process may use) of the first CPU the worker and its candidates
            are pinned to (``None``: not pinned). The reference and the candidate run on it alike.
        cpu_count: how many CPUs from ``cpu`` on (a judge: one; build-ahead workers share the rest, so
            a build's compile steps run side by side).
        builds_only: a build-ahead worker: its candidates are loaded for their builds and never judged, so
            they keep no watch on global state (that takes importing ``torch._dynamo``: seconds of every
            build worker's start); the worker refuses a job to judge.
    """

    memory_gb: float | None = 16.0
    file_size_gb: float = 2.0
    max_processes: int = 4096
    threads: int = 1
    cpu: int | None = None
    cpu_count: int = 1
    builds_only: bool = False


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
        **ALLOCATOR_ENV,
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


class SandboxError(RuntimeError):
    """A confinement the OS offers could not be applied: the candidate must not run unconfined."""


# Landlock (Linux >= 5.13), x86-64/arm64 syscall numbers and uapi constants.
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REMOVE_DIR, _FS_REMOVE_FILE = 1 << 4, 1 << 5
_FS_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def restrict_filesystem(writable: tuple[str, ...], readable: tuple[str, ...] | None = None) -> str:
    """Make everything but ``writable`` read-only and deny TCP, with Landlock.

    With ``readable``, reads and ``execve`` are confined too: only what lies beneath
    ``readable`` may be read or run, and what lies beneath ``writable`` may be read
    and written but never run (nothing a confined process writes is executed). Paths
    in ``readable`` that do not exist are skipped. From ABI 6 on, neither signals nor
    abstract UNIX sockets reach a process outside the confined one's domain.

    Returns a short description of what was applied (``"unavailable"`` when the
    kernel has no Landlock; the other defenses still hold). Raises :class:`SandboxError`
    when the kernel has Landlock but these rules could not be put in force.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return "unavailable"
    write = _FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE
    if abi >= 2:
        write |= _FS_REFER
    if abi >= 3:
        write |= _FS_TRUNCATE
    read = (_FS_READ_FILE | _FS_READ_DIR) if readable is not None else 0
    run = _FS_EXECUTE if readable is not None else 0
    attr = _RulesetAttr(write | read | run, _NET_TCP if abi >= 4 else 0, (_SCOPE_SIGNAL | _SCOPE_ABSTRACT_UNIX) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise SandboxError(f"no Landlock ruleset: {os.strerror(ctypes.get_errno())}")
    file_rights = _FS_WRITE_FILE | _FS_READ_FILE | _FS_EXECUTE | (_FS_TRUNCATE if abi >= 3 else 0)
    try:
        rules = [(path, write | read) for path in (*writable, "/dev/null")]
        rules += [(path, read | run) for path in readable or () if os.path.exists(path)]
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                # A rule on a file may carry only the rights that apply to files.
                rule = _PathBeneath(rights if stat.S_ISDIR(os.fstat(fd).st_mode) else rights & file_rights, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise SandboxError(f"Landlock refused the rule for {path}: {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(_SYS_RESTRICT, ruleset, ctypes.c_uint32(0)) != 0:
            raise SandboxError(f"Landlock could not be put in force: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return f"landlock abi {abi}" + (", reads confined" if readable is not None else "")


# What a confined candidate may read and run besides its own directory and the store (see docs/hacks.md,
# "What a candidate process may not do"). Each entry is a place a library, Python or Triton's JIT reads at run time.
_SYSTEM_PATHS = (
    # shared libraries (also loaded lazily: cuBLAS, cuDNN, the driver's PTX compiler) and the dynamic loader
    "/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib",
    # Triton's JIT on a GPU: the C compiler, assembler and linker of its launchers (and ptxas where Triton
    # ships none), their internals and the C headers; ldconfig, which it runs to find libcuda
    "/bin", "/usr/bin", "/usr/libexec", "/usr/include", "/sbin/ldconfig", "/sbin/ldconfig.real",
    # the kernel's views of processes, devices and CPUs (another process's private entries stay guarded: Landlock
    # refuses a confined process ptrace access to any process outside its domain)
    "/proc", "/sys",
    # character devices any program opens; the GPU's device files come with a backend's writable paths.
    # Not /dev as a whole: its block devices would give uid 0 the raw disks
    "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
    # the loader's index of libraries (dlopen by soname, ldconfig -p); nothing else of /etc
    "/etc/ld.so.cache",
)
_TOP_LEVEL_ALLOWED = frozenset({"/lib", "/lib64", "/bin", "/proc", "/sys"})


def _overlaps(path: str, others: tuple[str, ...]) -> bool:
    return any(path == other or other.startswith(path.rstrip("/") + "/") or path.startswith(other.rstrip("/") + "/")
               for other in others)


def runtime_paths(private: tuple[str, ...] = ()) -> tuple[str, ...]:
    """What a confined candidate reads and runs of the installed runtime, for ``restrict_filesystem(readable=...)``.

    The Python install (its prefixes and every ``sys.path`` entry, kernelgym's package), the system's
    libraries and what Triton's JIT runs (the C compilers on the ``PATH`` with their installations), the
    GPU toolkits (``/usr/local/cuda*``, ``$CUDA_HOME``, ``$CUDA_PATH``, ``$MUSA_HOME``, torch's ``CUDA_HOME``),
    ``$LD_LIBRARY_PATH`` and the directories of the libraries this process has mapped (the GPU driver's,
    wherever the machine keeps it), the kernel's ``/proc`` and ``/sys``, a few devices and ``/etc/ld.so.cache``.

    A path that holds or lies within one of ``private`` (the judge's directories, other candidates'),
    ``/`` or any other top-level directory as a whole (``/etc``, ``/root``, ``/home``, ``/tmp``) is left out.
    """
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path,
                  str(Path(__file__).resolve().parents[1]), *_SYSTEM_PATHS]
    candidates += sorted(str(p) for p in Path("/usr/local").glob("cuda*"))
    candidates += [os.environ.get(name, "") for name in ("CUDA_HOME", "CUDA_PATH", "MUSA_HOME")]
    candidates += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    # The C compilers Triton's JIT may run (``$CC``, else gcc or clang on the PATH; an image may keep them in
    # /opt): where each is found, where it resolves to, and that installation's prefix (its internals, headers).
    for name in (os.environ.get("CC", ""), os.environ.get("CXX", ""), "cc", "gcc", "clang", "c++", "g++", "clang++"):
        found = shutil.which(name) if name else None
        if found:
            real = os.path.realpath(found)
            candidates += [os.path.dirname(found), os.path.dirname(real), os.path.dirname(os.path.dirname(real))]
    extension = sys.modules.get("torch.utils.cpp_extension")
    candidates.append(getattr(extension, "CUDA_HOME", None) or "")
    mapped: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        mapped = {fields[5].strip() for fields in (line.split(None, 5) for line in maps) if len(fields) == 6}
    candidates += [os.path.dirname(path) for path in mapped if ".so" in os.path.basename(path) and os.path.isfile(path)]
    hidden = tuple(os.path.realpath(p) for p in private)
    chosen: dict[str, None] = {}
    for path in candidates:
        if not path or not os.path.isabs(path):
            continue
        real = os.path.realpath(path)
        if (real.count("/") < 2 and real not in _TOP_LEVEL_ALLOWED) or _overlaps(real, hidden) or not os.path.exists(real):
            continue
        chosen[path] = None
    return tuple(chosen)


_PGRP, _SESSION = 2, 3  # fields of /proc/<pid>/stat after the name: state, ppid, pgrp, session


def _members(ident: int, field: int) -> list[int]:
    """Live processes whose session (``field=_SESSION``) or process group (``field=_PGRP``) is ``ident``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[field]) == ident:
            members.append(int(entry))
    return members


def _kill_members(ident: int, field: int, rounds: int) -> None:
    """SIGKILL every member of a session or process group until none is left (bounded)."""
    for round_ in range(rounds):
        members = _members(ident, field)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if round_ + 1 < rounds:
            time.sleep(0.02)


def kill_session(sid: int, rounds: int = 50) -> None:
    """SIGKILL every process in session ``sid`` until none is left (bounded)."""
    _kill_members(sid, _SESSION, rounds)


def kill_group(pgid: int, rounds: int = 50) -> None:
    """SIGKILL every process in process group ``pgid`` until none is left (bounded)."""
    _kill_members(pgid, _PGRP, rounds)


def own_group() -> dict[str, object]:
    """``Popen`` arguments that start a trusted helper in a process group of its own, in the caller's session.

    The helper and what it starts (ninja, the compilers) can be stopped as one group, and they stay in
    the worker's session, so stopping the worker's session (:func:`kill_session`) stops them too: a
    ``kernelgym`` command that is stopped leaves no build running.
    """
    return {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when the thread that started it exits (Linux).

    A worker runs in its own session, so nothing else reaches it when its parent
    is killed outright (a Ray actor killed by ``ray.kill`` or the OOM killer); a
    parent that dies while the worker is idle is also noticed by the closed socket.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _prctl(*args: int) -> tuple[int, int]:
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.prctl(*(ctypes.c_ulong(a) for a in (*args, 0, 0, 0, 0)[:5]))
    return rc, ctypes.get_errno()


# Capabilities: prctl options, securebits and capset's v3 layout (linux/capability.h, linux/securebits.h).
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
# NOROOT, NO_SETUID_FIXUP and KEEP_CAPS_LOCKED, each locked: uid 0 gains nothing from execve or setuid again.
_SECUREBITS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5)
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _status_fields(*names: str) -> dict[str, str]:
    with open("/proc/thread-self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle if ":" in line)
    return {name: fields.get(name, "").strip() for name in names}


def drop_privileges() -> str:
    """Set ``no_new_privs`` and give up every capability of this thread (and of what it starts later).

    The uid stays (a candidate may keep root's uid), but without capabilities it
    bypasses no permission check, and ``no_new_privs`` with locked securebits means
    no ``execve`` of a setuid binary or of a file with capabilities gives any back.
    The bounding set is emptied where the process may (``CAP_SETPCAP``).

    Returns a short description of what holds; raises :class:`SandboxError` when a
    capability is left or ``no_new_privs`` could not be set.
    """
    rc, err = _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if rc != 0:
        raise SandboxError(f"no_new_privs could not be set: {os.strerror(err)}")
    _prctl(_PR_SET_SECUREBITS, _SECUREBITS)  # needs CAP_SETPCAP; without it there is nothing to lock
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        _prctl(_PR_CAPBSET_DROP, cap)  # EPERM without CAP_SETPCAP: no_new_privs still stops any regain
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    header, data = _CapHeader(_CAP_VERSION_3, 0), (_CapData * 2)()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise SandboxError(f"capabilities could not be dropped: {os.strerror(ctypes.get_errno())}")
    status = _status_fields("CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd", "NoNewPrivs")
    left = {k: v for k, v in status.items() if k not in ("CapBnd", "NoNewPrivs") and v and int(v, 16)}
    if left or status["NoNewPrivs"] != "1":
        raise SandboxError(f"privileges left after dropping them: {status}")
    bounding = "empty" if not int(status["CapBnd"] or "0", 16) else "kept (no CAP_SETPCAP)"
    return f"no capabilities, no_new_privs, bounding set {bounding}"


DENIED_SYSCALLS = (
    # another process's memory or namespaces, and the machine's: never a kernel's business
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "setns", "unshare",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",  # its operations would bypass this filter
    "iopl", "ioperm", "reboot", "swapon", "swapoff",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    # scheduling: the judge sets affinity and priority from outside; a candidate keeps what it is given
    "setpriority", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "ioprio_set",
    # its process group: whatever it starts stays in the group the judge kills when the job ends
    "setsid", "setpgid",
)
"""System calls a candidate gets ``EPERM`` for (see ``docs/hacks.md``, "What a candidate process may not do")."""

# Allowed only with this first argument: limits of the process itself (pid 0), the query of the personality, and
# sockets of the UNIX family (AF_UNIX: no network; the judge's channel is a socket pair opened before the filter).
_AF_UNIX = 1
_FIRST_ARGUMENT_ONLY = {"prlimit64": 0, "personality": 0xFFFFFFFF, "socket": _AF_UNIX, "socketpair": _AF_UNIX}

_SYSCALL_NUMBERS = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440, "pidfd_getfd": 438,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "setns": 308, "unshare": 272,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "iopl": 172, "ioperm": 173, "reboot": 169, "swapon": 167, "swapoff": 168,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "setpriority": 141, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142, "sched_setattr": 314,
        "ioprio_set": 251, "setsid": 112, "setpgid": 109, "prlimit64": 302, "personality": 135, "socket": 41, "socketpair": 53,
        "seccomp": 317,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440, "pidfd_getfd": 438,
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "setns": 268, "unshare": 97,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "add_key": 217, "request_key": 218, "keyctl": 219, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "reboot": 142, "swapon": 224, "swapoff": 225,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
        "setpriority": 140, "sched_setaffinity": 122, "sched_setscheduler": 119, "sched_setparam": 118, "sched_setattr": 274,
        "ioprio_set": 30, "setsid": 157, "setpgid": 154, "prlimit64": 261, "personality": 92, "socket": 198, "socketpair": 199,
        "seccomp": 277,
    },
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000

# Classic BPF (linux/filter.h, linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_SECCOMP_SET_MODE_FILTER, _SECCOMP_GET_ACTION_AVAIL, _SECCOMP_FILTER_FLAG_TSYNC = 1, 2, 1
_PR_GET_SECCOMP = 21
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian: the low word of args[0] at 16).
_NR, _ARCH, _ARG0_LOW = 0, 4, 16


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _filter_program(machine: str) -> bytes:
    """The filter: another ABI than the native one (i386 ``int 0x80``, x32), every denied call, and the calls of
    :data:`_FIRST_ARGUMENT_ONLY` with another first argument get EPERM."""
    numbers, deny = _SYSCALL_NUMBERS[machine], _RET_ERRNO | errno.EPERM
    program = [_insn(_LD_W_ABS, _ARCH), _insn(_JEQ_K, _AUDIT_ARCH[machine], 1, 0), _insn(_RET_K, deny), _insn(_LD_W_ABS, _NR)]
    if machine == "x86_64":
        program += [_insn(_JGE_K, _X32_SYSCALL_BIT, 0, 1), _insn(_RET_K, deny)]
    for name in DENIED_SYSCALLS:
        if name in numbers:  # iopl and ioperm exist on x86 only
            program += [_insn(_JEQ_K, numbers[name], 0, 1), _insn(_RET_K, deny)]
    for name, value in _FIRST_ARGUMENT_ONLY.items():
        program += [_insn(_JEQ_K, numbers[name], 0, 4), _insn(_LD_W_ABS, _ARG0_LOW), _insn(_JEQ_K, value, 0, 1),
                    _insn(_RET_K, _RET_ALLOW), _insn(_RET_K, deny)]
    program.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(program)


def seccomp_unavailable() -> str | None:
    """Why this machine cannot take the candidate's seccomp filter (``None``: it can)."""
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        return f"no filter is written for {machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    action = ctypes.c_uint32(_RET_ERRNO)
    available = libc.syscall(_SYSCALL_NUMBERS[machine]["seccomp"], _SECCOMP_GET_ACTION_AVAIL, 0, ctypes.byref(action)) == 0
    return None if _prctl(_PR_GET_SECCOMP)[0] >= 0 and available else "this kernel has no seccomp filters"


def deny_syscalls() -> str:
    """Install the candidate's seccomp filter on every thread of this process (inherited by all it starts).

    Every call in :data:`DENIED_SYSCALLS` fails with ``EPERM``; so do ``prlimit64`` on
    another process, ``personality`` other than its query, ``socket`` and ``socketpair``
    of any family but ``AF_UNIX``, and any call through a foreign ABI. Sets ``no_new_privs`` (a filter requires it without ``CAP_SYS_ADMIN``).

    Returns a short description (``"unavailable: ..."`` where the kernel or the
    architecture has no seccomp filters); raises :class:`SandboxError` where the
    kernel offers them but this filter could not be installed.
    """
    missing = seccomp_unavailable()
    if missing:
        return f"unavailable: {missing}"
    machine = platform.machine()
    libc = ctypes.CDLL(None, use_errno=True)
    nr = _SYSCALL_NUMBERS[machine]["seccomp"]
    rc, err = _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if rc != 0:
        raise SandboxError(f"no_new_privs could not be set: {os.strerror(err)}")
    raw = _filter_program(machine)
    code = ctypes.create_string_buffer(raw, len(raw))
    program = _SockFprog(len(raw) // 8, ctypes.cast(code, ctypes.c_void_p))
    rc = libc.syscall(nr, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(program))
    if rc != 0:
        reason = f"thread {rc} could not take it" if rc > 0 else os.strerror(ctypes.get_errno())
        raise SandboxError(f"the seccomp filter could not be installed: {reason}")
    return f"seccomp filter ({len(DENIED_SYSCALLS)} system calls denied)"
