"""A runtime guard below Python: every ATen operator the dispatcher runs, recorded from C++.

Holds:
    AtenObserver: arm/disarm/ops over a global ``at::RecordFunction`` callback; ``record_to`` a judge's memfd;
        ``reuse_host_blocks``, the host allocator the timed calls of both host processes run with.
    RECORD_BYTES / read_record: the size of the judge's sealed memfd for that record, and its reading (the names of one arming, or ``None``).
    load_observer: build (once per build cache) and load the observer extension.
    observer_built: whether that build is already done.
    OBSERVER_SOURCE: the C++ source of the extension.

The Python dispatch guard (a ``TorchDispatchMode``) sees only what reaches the
Python dispatch key: an answer that runs an operator inside
``torch.utils._python_dispatch._disable_current_modes()``, or from C++ under an
``ExcludeDispatchKeyGuard`` that removes the Python key, hides from it. A
global ``RecordFunction`` callback is called by the dispatcher itself for
every operator call, whatever keys are excluded and whatever Python modes are
active, so such calls still show up here. (A kernel called without the
dispatcher, ``at::cpu::*`` from C++, never reaches either guard: the linked-
symbol allow-list of :mod:`kernelgym.backends.symbols` refuses those builds.)

This is trusted code: the extension is built from the fixed source below, not
from a candidate, and is not subject to the candidate allow-list.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.backends.locks import file_lock
from kernelgym.backends.native import (
    CANONICAL_CFLAGS,
    CANONICAL_LDFLAGS,
    BuildError,
    ensure_pch,
    import_extension,
    toolchain_fingerprint,
)

__all__ = ["OBSERVER_SOURCE", "SAMPLING", "AtenObserver", "load_observer", "observer_built", "read_record", "RECORD_BYTES"]

SAMPLING = 0.1
"""The probability with which the observer sees each operator call of a credited call (the calls it watches whole see all)."""

OBSERVER_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/record_function.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <unistd.h>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {
std::mutex names_mutex;
std::vector<std::string> names;
std::atomic<bool> armed{false};
int record_fd = -1;      // the judge's memfd: each disarm writes its record there, from here, not from Python
uint64_t record_seq = 0; // how many times the observer was armed
at::CallbackHandle every_call = 0;  // sees every operator call
at::CallbackHandle sampled = 0;     // sees each operator call with a fixed probability: off the fast path only then

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
    if (armed.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> lock(names_mutex);
        names.emplace_back(fn.name());
    }
    return nullptr;
}
}  // namespace

void write_record(const std::vector<std::string>& seen) {
    if (record_fd < 0) return;
    std::string body;
    for (const auto& name : seen) body += name + "\n";
    body += "end\n";
    const std::string head = "kernelgym-observer " + std::to_string(record_seq) + " " + std::to_string(seen.size()) + " " +
                             std::to_string(body.size()) + "\n";
    const std::string record = head + body;  // the memfd is sealed at its size: a record too long is cut, and read as malformed
    size_t done = 0;
    while (done < record.size()) {
        const ssize_t n = pwrite(record_fd, record.data() + done, record.size() - done, (off_t)done);
        if (n <= 0) return;
        done += (size_t)n;
    }
}

bool set_record_fd(int64_t fd) {
    if (record_fd >= 0) return false;  // once, by the trusted side, before any candidate code runs
    record_fd = (int)fd;
    return true;
}

void arm(bool every, double probability) {
    if (every_call == 0) {
        every_call = at::addGlobalCallback(at::RecordFunctionCallback(on_enter).scopes({at::RecordScope::FUNCTION}));
        sampled = at::addGlobalCallback(
            at::RecordFunctionCallback(on_enter).scopes({at::RecordScope::FUNCTION}).samplingProb(probability));
    }
    {
        std::lock_guard<std::mutex> lock(names_mutex);
        names.clear();
    }
    at::disableCallback(every ? sampled : every_call);
    at::reenableCallback(every ? every_call : sampled);
    ++record_seq;
    armed.store(true);
}

std::vector<std::string> disarm() {
    armed.store(false);
    if (every_call != 0) {
        at::disableCallback(every_call);
        at::disableCallback(sampled);
    }
    std::lock_guard<std::mutex> lock(names_mutex);
    write_record(names);
    return names;
}

std::vector<std::string> ops() {
    std::lock_guard<std::mutex> lock(names_mutex);
    return names;
}

// Host memory the timed calls reuse, most recently freed first, per size (see reuse_host_blocks in Python).
namespace {
constexpr size_t kMaxKeptBytes = size_t(4) << 30;  // beyond this much kept, freed blocks go back to the C allocator
std::mutex blocks_mutex;
std::unordered_map<void*, size_t> block_sizes;      // every block this allocator handed out, live or kept
std::unordered_map<size_t, std::vector<void*>> kept_blocks;
size_t kept_bytes = 0;
bool reusing = false;

void release_block(void* data) {
    std::lock_guard<std::mutex> lock(blocks_mutex);
    auto it = block_sizes.find(data);
    if (it == block_sizes.end()) {  // not one of ours: never happens (only blocks from allocate carry this deleter)
        c10::free_cpu(data);
        return;
    }
    const size_t size = it->second;
    if (reusing && kept_bytes + size <= kMaxKeptBytes) {
        kept_blocks[size].push_back(data);
        kept_bytes += size;
        return;
    }
    block_sizes.erase(it);
    c10::free_cpu(data);
}

struct ReusingCPUAllocator final : public c10::Allocator {
    c10::DataPtr allocate(size_t n) override {
        void* data = nullptr;
        if (n != 0) {
            std::lock_guard<std::mutex> lock(blocks_mutex);
            auto kept = kept_blocks.find(n);
            if (kept != kept_blocks.end() && !kept->second.empty()) {
                data = kept->second.back();
                kept->second.pop_back();
                kept_bytes -= n;
            } else {
                data = c10::alloc_cpu(n);
                block_sizes[data] = n;
            }
        }
        return {data, data, &release_block, c10::Device(c10::DeviceType::CPU)};
    }
    c10::DeleterFnPtr raw_deleter() const override {
        return &release_block;
    }
    void copy_data(void* dest, const void* src, std::size_t count) const override {
        default_copy_data(dest, src, count);
    }
};

ReusingCPUAllocator* reusing_allocator = nullptr;  // never deleted: blocks it handed out may be freed until the process ends
}  // namespace

bool reuse_host_blocks(bool on) {
    if (reusing_allocator == nullptr) {
        reusing_allocator = new ReusingCPUAllocator();
        c10::SetCPUAllocator(reusing_allocator, /*priority=*/1);
    }
    std::vector<void*> freed;
    {
        std::lock_guard<std::mutex> lock(blocks_mutex);
        reusing = on;
        if (!on) {
            for (auto& entry : kept_blocks) {
                for (void* data : entry.second) {
                    block_sizes.erase(data);
                    freed.push_back(data);
                }
            }
            kept_blocks.clear();
            kept_bytes = 0;
        }
    }
    for (void* data : freed) c10::free_cpu(data);
    return c10::GetCPUAllocator() == reusing_allocator;
}
"""


@dataclass
class AtenObserver:
    """Records the names of ATen operators (``aten::mm``) the dispatcher runs while armed, on any thread.

    Example (needs a C++ compiler; builds once per cache)::

        observer = load_observer(build_root)
        observer.arm()
        model(*inputs)
        names = observer.disarm()   # ["aten::empty_like", "aten::relu", ...]
    """

    module: Any

    def arm(self, every: bool = True) -> None:
        """Start recording, from an empty list (installs the global callbacks on first use).

        ``every``: record every operator call; else each one with probability :data:`SAMPLING` (a call
        not sampled stays on the dispatcher's fast path, so the guard costs the call almost nothing).
        """
        self.module.arm(every, SAMPLING)

    def disarm(self) -> list[str]:
        """Stop recording; return the operator names recorded since :meth:`arm`, in call order."""
        return list(self.module.disarm())

    def ops(self) -> list[str]:
        """The operator names recorded so far (recording continues)."""
        return list(self.module.ops())

    def reuse_host_blocks(self, on: bool = True) -> bool:
        """From now on, host memory torch frees is kept and handed out again, the most recently freed block of the
        same size first (``on=False``: given back to the C allocator). Whether torch allocates through it."""
        return bool(self.module.reuse_host_blocks(on))

    def record_to(self, fd: int) -> bool:
        """From now on, each :meth:`disarm` also writes its record to ``fd`` (a memfd the judge reads), from C++.

        Set once (later calls change nothing and return ``False``), by the trusted side before any
        candidate code runs: what the candidate's Python returns or patches never reaches that record.
        """
        return bool(self.module.set_record_fd(fd))


RECORD_BYTES = 256 * 1024**2
"""The size of the memfd a record is written to: sealed at this size (the candidate's process holds it writable,
so it could otherwise cut it under the judge), sparse (only what is written takes memory)."""


def read_record(fd: int, expected_seq: int) -> list[str] | None:
    """The record the observer wrote to ``fd``: the operator names of its ``expected_seq``-th arming, or ``None``.

    ``None`` when there is no record, it is malformed or cut short, or it is not that arming's
    (an observer armed fewer or more times than the judge asked for).
    """
    import os

    try:
        line = os.pread(fd, 128, 0).split(b"\n", 1)[0]
        head = line.decode("ascii").split(" ")
        if len(head) != 4 or head[0] != "kernelgym-observer" or not all(f.isdigit() for f in head[1:]):
            return None
        seq, count, size = (int(f) for f in head[1:])
        if seq != expected_seq or size > RECORD_BYTES:
            return None
        body = os.pread(fd, size, len(line) + 1)
    except (OSError, UnicodeDecodeError):
        return None
    lines = body.decode("utf-8", "replace").split("\n")
    if len(body) != size or len(lines) != count + 2 or lines[count] != "end" or lines[count + 1] != "":
        return None
    return lines[:count]


def _build_dir(build_root: Path) -> Path:
    key = hashlib.sha256((OBSERVER_SOURCE + toolchain_fingerprint(("c++",))).encode()).hexdigest()[:16]
    return build_root / "aten_observer" / key


def observer_built(build_root: Path) -> bool:
    """Whether the observer extension of this toolchain is already built in ``build_root``."""
    build_dir = _build_dir(build_root)
    return any(build_dir.glob(f"kg_aten_observer_{build_dir.name}*.so"))


def load_observer(build_root: Path) -> AtenObserver:
    """Build the observer extension into ``build_root`` (once per source and toolchain) and load it.

    Raises:
        BuildError: the extension does not compile.
    """
    from torch.utils import cpp_extension

    build_dir = _build_dir(build_root)
    key = build_dir.name
    built = build_dir / f"kg_aten_observer_{key}.so"
    with file_lock(build_root / "locks" / f"aten_observer_{key}.lock"):
        if built.exists():
            # Source and toolchain are in the key. torch's loader would build it again in a cache that was copied
            # or moved (its build commands name the directory: 27 s on 2 cores); one that does not load is rebuilt.
            with contextlib.suppress(ImportError, OSError):
                return AtenObserver(import_extension(f"kg_aten_observer_{key}", built))
        pch_dir = ensure_pch(build_root)  # its own lock, never held by one who waits for this one
        build_dir.mkdir(parents=True, exist_ok=True)
        # torch's own build baton, left behind by a killed build, would make it wait forever; the lock above keeps others out.
        (build_dir / "lock").unlink(missing_ok=True)
        try:
            module = cpp_extension.load_inline(
                name=f"kg_aten_observer_{key}",
                cpp_sources=[OBSERVER_SOURCE],
                functions=["arm", "disarm", "ops", "set_record_fd", "reuse_host_blocks"],
                extra_cflags=list(CANONICAL_CFLAGS),
                extra_ldflags=list(CANONICAL_LDFLAGS),
                extra_include_paths=[str(pch_dir)] if pch_dir else None,
                build_directory=str(build_dir),
                verbose=False,
            )
        except RuntimeError as exc:
            raise BuildError("the ATen observer extension failed to build", log=str(exc)) from None
    return AtenObserver(module)
