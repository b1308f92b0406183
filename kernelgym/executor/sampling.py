"""Where another process's threads run, sampled from outside it (trusted side only).

Holds:
    ThreadSampler: samples the instruction pointer of every running thread of a process, with ``ptrace``, while a
        window is open, and attributes each to the file mapped there and its nearest function symbol.
    CodeMap: the executable mappings of a process (``/proc/<pid>/maps``): which file, at which offset, an address is.
    SymbolTable: the function symbols of an ELF file (``.symtab``, else ``.dynsym``), to name the one at a file offset.
    SamplingRefused: the process cannot be sampled from here (``ptrace`` refused).
    instruction_pointer: where one thread of another process is running, read in one brief stop.

Nothing here asks the sampled process anything, nor trusts what it can write: each sample is a ``PTRACE_SEIZE``,
``PTRACE_INTERRUPT``, register read and ``PTRACE_DETACH`` of one thread made from this process (a thread is held
stopped for tens of microseconds), the mappings come from ``/proc`` and the symbols from the mapped files, which the
judge verified before (:meth:`~kernelgym.verifier.harness.Harness.check_libraries`). Only threads the kernel shows
running or ready to run are sampled: a thread that sleeps computes nothing, and is left undisturbed.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import functools
import os
import platform
import struct
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from kernelgym.verifier.sampled_compute import UNMAPPED, CodeSample

__all__ = ["CodeMap", "SamplingRefused", "SymbolTable", "ThreadSampler", "instruction_pointer"]

_PTRACE_DETACH, _PTRACE_GETREGSET, _PTRACE_SEIZE, _PTRACE_INTERRUPT = 17, 0x4204, 0x4206, 0x4207
_NT_PRSTATUS = 1
_WALL = 0x40000000
_PC_INDEX = {"x86_64": 16, "aarch64": 32}  # rip in user_regs_struct; pc in user_pt_regs
_REGISTER_WORDS = 64  # more than either layout holds
_ANONYMOUS = "[anonymous]"


class SamplingRefused(OSError):
    """The kernel refused to let this process trace the other one (no permission, or no such process)."""


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


@functools.lru_cache(maxsize=1)
def _ptrace() -> ctypes._CFuncPtr:
    function = ctypes.CDLL(None, use_errno=True).ptrace
    function.restype = ctypes.c_long
    function.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
    return function


def _call(request: int, tid: int, addr: int | None = None, data: int | None = None) -> int:
    """One ``ptrace`` request; the errno of a failure (0 on success)."""
    return 0 if _ptrace()(request, tid, addr, data) >= 0 else ctypes.get_errno()


def instruction_pointer(tid: int) -> int | None:
    """The user instruction pointer of thread ``tid``, read while it is held stopped for that instant.

    ``None`` when the thread ended meanwhile. A signal that arrived while it was held is delivered
    when it is let go.

    Raises:
        SamplingRefused: tracing it is not permitted here.
    """
    failure = _call(_PTRACE_SEIZE, tid, 0, 0)
    if failure in (errno.EPERM, errno.EACCES):
        raise SamplingRefused(failure, f"ptrace of thread {tid} refused: {os.strerror(failure)}")
    if failure:
        return None
    signal = 0
    pointer = None
    try:
        if _call(_PTRACE_INTERRUPT, tid):
            return None
        try:
            _, status = os.waitpid(tid, _WALL)
        except ChildProcessError:
            return None
        if not os.WIFSTOPPED(status):
            return None
        if status >> 16 == 0:  # a signal-delivery stop: the signal goes on to the thread as it is let go
            signal = os.WSTOPSIG(status)
        words = (ctypes.c_ulong * _REGISTER_WORDS)()
        vector = _IoVec(ctypes.cast(words, ctypes.c_void_p), ctypes.sizeof(words))
        if _call(_PTRACE_GETREGSET, tid, _NT_PRSTATUS, ctypes.addressof(vector)) == 0:
            pointer = int(words[_PC_INDEX[platform.machine()]])
    finally:
        _call(_PTRACE_DETACH, tid, 0, signal)
    return pointer


def _running_threads(pid: int) -> list[int]:
    """Threads of ``pid`` the kernel shows running or ready to run (state ``R``)."""
    running = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return running
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"R":
                    running.append(int(tid))
        except (OSError, IndexError, ValueError):
            continue
    return running


@dataclass(frozen=True)
class _Mapping:
    start: int
    end: int
    offset: int
    path: str


class CodeMap:
    """The executable mappings of one process, read once from ``/proc/<pid>/maps`` (code does not move while mapped)."""

    def __init__(self, mappings: list[_Mapping]) -> None:
        self.mappings = sorted(mappings, key=lambda m: m.start)
        self.starts = [m.start for m in self.mappings]

    @classmethod
    def read(cls, pid: int) -> CodeMap:
        """The code mapped in ``pid`` now; memory mapped executable from no file is named ``[anonymous]``."""
        mappings = []
        with open(f"/proc/{pid}/maps") as handle:
            for line in handle:
                fields = line.split(None, 5)
                if len(fields) < 5 or "x" not in fields[1]:
                    continue
                start, end = (int(part, 16) for part in fields[0].split("-"))
                name = fields[5].strip() if len(fields) == 6 else ""
                mappings.append(_Mapping(start, end, int(fields[2], 16), name or _ANONYMOUS))
        return cls(mappings)

    def locate(self, address: int) -> tuple[str, int] | None:
        """The file (or ``[anonymous]``, ``[vdso]``) mapped at ``address`` and the offset in it; ``None``: no code there."""
        index = bisect.bisect_right(self.starts, address) - 1
        if index < 0 or address >= self.mappings[index].end:
            return None
        mapping = self.mappings[index]
        return mapping.path, address - mapping.start + mapping.offset


class SymbolTable:
    """The function symbols of one ELF file, by address, and the loadable segments that place its file offsets.

    Read once per file (a 400 MB ``libtorch_cpu.so`` holds some 300,000 functions: about a second), and only
    for files where samples landed; names are read from the file when first asked for, then remembered.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "rb") as handle:
            header = handle.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only
                raise ValueError(f"{path} is not a 64-bit ELF file")
            phoff, shoff = struct.unpack_from("<QQ", header, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 54)
            handle.seek(phoff)
            programs = [struct.unpack_from("<IIQQQQQQ", handle.read(phentsize)) for _ in range(phnum)]
            self.segments = [(p[2], p[3], p[5]) for p in programs if p[0] == 1]  # PT_LOAD: offset, vaddr, filesz
            handle.seek(shoff)
            sections = [struct.unpack_from("<IIQQQQIIQQ", handle.read(shentsize)) for _ in range(shnum)]
            table = next((s for s in sections if s[1] == 2), None) or next((s for s in sections if s[1] == 11), None)
            functions: list[tuple[int, int, int]] = []
            self.names_at = 0
            if table is not None:
                self.names_at = sections[table[6]][4]
                handle.seek(table[4])
                data = handle.read(table[5])
                for name, info, _, index, value, size in struct.iter_unpack("<IBBHQQ", data):
                    if info & 0xF == 2 and index != 0 and size:  # STT_FUNC, defined here
                        functions.append((value, size, name))
        functions.sort()
        self.starts = array("Q", (f[0] for f in functions))
        self.ends = array("Q", (f[0] + f[1] for f in functions))
        self.names = array("I", (f[2] for f in functions))
        self.named: dict[int, str] = {}

    @classmethod
    def of(cls, path: str) -> SymbolTable:
        """The table of the file at ``path`` now, read once per worker while that file stays the same one
        (same inode, modification time and size: a store entry published again under its path is read again)."""
        status = os.stat(path)
        return _table(path, status.st_ino, status.st_mtime_ns, status.st_size)

    def name_at(self, offset: int) -> str | None:
        """The mangled name of the function whose code is at file ``offset``; ``None`` when no symbol covers it."""
        vaddr = next((offset - start + virtual for start, virtual, size in self.segments if start <= offset < start + size), None)
        if vaddr is None:
            return None
        index = bisect.bisect_right(self.starts, vaddr) - 1
        if index < 0 or vaddr >= self.ends[index]:
            return None
        if index not in self.named:
            with open(self.path, "rb") as handle:
                handle.seek(self.names_at + self.names[index])
                raw = handle.read(4096)
            self.named[index] = raw.split(b"\0", 1)[0].decode(errors="replace")
        return self.named[index]


@functools.lru_cache(maxsize=32)
def _table(path: str, _inode: int, _modified_ns: int, _size: int) -> SymbolTable:
    """:meth:`SymbolTable.of`'s tables, by the identity of the file read (the arguments after ``path`` key the cache)."""
    return SymbolTable(path)


class ThreadSampler:
    """Samples where the threads of process ``pid`` run, from a thread of this process, while a window is open.

    Args:
        pid: the process (its threads are sampled as the kernel lists them, new ones included).
        interval: seconds between two rounds of samples (each round samples every running thread once, in
            about 0.05 ms a thread); the sampling thread sleeps while no window is open.

    Example:
        >>> import subprocess, sys
        >>> spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        >>> with ThreadSampler(spin.pid) as sampler, sampler.window("spin"):
        ...     time.sleep(0.2)
        >>> spin.kill(); _ = spin.wait()
        >>> any("python" in sample.path for sample in sampler.samples("spin"))
        True
    """

    def __init__(self, pid: int, interval: float = 1e-5) -> None:
        self.pid = pid
        self.interval = interval
        self.refused: str | None = None  # why the kernel refused to let this process trace it, if it did
        self.label: str | None = None
        self.maps: list[CodeMap] = []  # the process's code as sampling began and as it ended
        self.pointers: dict[str, list[int]] = {}
        self.placed: dict[int, CodeSample] = {}  # instruction pointers placed in a mapping so far
        self.tallies: dict[str, Counter[CodeSample]] = {}  # of each label, the pointers placed so far...
        self.unplaced: dict[str, list[int]] = {}  # ...and those placed in no mapping yet
        self.tallied: dict[str, int] = {}  # how many of the label's pointers these two hold
        self.stopped = threading.Event()
        self.opened = threading.Event()  # set while a window is open (or sampling ends)
        self.thread = threading.Thread(target=self._run, name=f"sampler-{pid}", daemon=True)

    def __enter__(self) -> ThreadSampler:
        self.maps = [_code_map(self.pid)]
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopped.set()
        self.opened.set()
        self.thread.join()
        # Read again as sampling ends: code mapped meanwhile is placed too (code unmapped meanwhile, by the first).
        self.maps.append(_code_map(self.pid))

    @contextlib.contextmanager
    def window(self, label: str) -> Iterator[None]:
        """Sample while the block runs; its samples are kept under ``label`` (a window of that label again adds to them)."""
        self.pointers.setdefault(label, [])
        self.label = label
        self.opened.set()
        try:
            yield
        finally:
            self.opened.clear()
            self.label = None

    def _run(self) -> None:
        # ptrace binds a tracee to the thread that attached it: every request is made from this one thread.
        while self.opened.wait() and not self.stopped.is_set():
            label = self.label
            if label is None:
                continue
            try:
                pointers = [instruction_pointer(tid) for tid in _running_threads(self.pid)]
            except SamplingRefused as exc:
                self.refused = str(exc)
                return
            self.pointers[label].extend(p for p in pointers if p is not None)
            time.sleep(self.interval)

    def count(self, label: str) -> int:
        """How many samples were taken under ``label`` so far."""
        return len(self.pointers.get(label, []))

    def samples(self, label: str) -> list[CodeSample]:
        """The samples taken under ``label`` so far, one per sample (see :meth:`tally`)."""
        return list(self.tally(label).elements())

    def tally(self, label: str) -> Counter[CodeSample]:
        """The places sampled under ``label`` so far, and how often: the file mapped at each (``[anonymous]`` for memory
        mapped from none) and the function there, if its file names one.

        Code mapped after sampling began is placed once sampling is over (``[unmapped]`` until then); a pointer
        is placed and named once, however often it was sampled and asked for.
        """
        pointers = self.pointers.get(label, [])
        end = len(pointers)
        tally = self.tallies.setdefault(label, Counter())
        unplaced, self.unplaced[label] = self.unplaced.get(label, []), []
        for pointer in unplaced + pointers[self.tallied.get(label, 0):end]:
            sample = self._place(pointer)
            if sample is None:
                self.unplaced[label].append(pointer)
            else:
                tally[sample] += 1
        self.tallied[label] = end
        tallied = Counter(tally)
        if self.unplaced[label]:
            tallied[CodeSample(UNMAPPED)] = len(self.unplaced[label])
        return tallied

    def _place(self, pointer: int) -> CodeSample | None:
        sample = self.placed.get(pointer)
        if sample is None:
            place = next((place for code in self.maps if (place := code.locate(pointer))), None)
            if place is None:
                return None
            sample = self.placed[pointer] = CodeSample(place[0], _symbol(*place))
        return sample


def _code_map(pid: int) -> CodeMap:
    """The code mapped in ``pid`` now (none, if it has ended)."""
    try:
        return CodeMap.read(pid)
    except OSError:
        return CodeMap([])


def _symbol(path: str, offset: int) -> str | None:
    """The function at ``offset`` in the file at ``path``, if it is an ELF file that names one."""
    if not path.startswith("/"):
        return None
    try:
        return SymbolTable.of(path).name_at(offset)
    except (OSError, ValueError, struct.error):
        return None
