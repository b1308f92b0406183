"""The C++ ATen observer sees operators that the Python dispatch guard cannot (slow: builds one extension)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from kernelgym.backends.aten_observer import AtenObserver, load_observer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None, reason="needs c++ and ninja"),
]


class _PythonGuard(TorchDispatchMode):
    """A stand-in for the judge's Python guard: records what reaches the Python key."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.seen.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def observer(cache_dir: Path) -> AtenObserver:
    build_root = cache_dir / "builds"
    build_root.mkdir(parents=True, exist_ok=True)
    return load_observer(build_root)


def test_only_armed_calls_are_recorded(observer: AtenObserver) -> None:
    x = torch.randn(8)
    torch.relu(x)
    observer.arm()
    torch.sigmoid(x)
    assert "aten::sigmoid" in observer.ops()
    names = observer.disarm()
    torch.tanh(x)
    assert "aten::sigmoid" in names and "aten::relu" not in names and "aten::tanh" not in observer.ops()


def test_ops_under_disabled_python_modes_are_seen(observer: AtenObserver) -> None:
    x = torch.randn(16)
    with _PythonGuard() as guard:
        observer.arm()
        with _disable_current_modes():
            torch.nn.functional.leaky_relu(x)
        names = observer.disarm()
    assert "aten::leaky_relu" in names
    assert not any("leaky_relu" in name for name in guard.seen)


def test_ops_with_the_python_key_excluded_are_seen(observer: AtenObserver) -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with _PythonGuard() as guard:
        observer.arm()
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
            torch.mm(a, b)
        names = observer.disarm()
    assert "aten::mm" in names
    assert "aten.mm" not in guard.seen and "aten::mm" not in guard.seen


def test_the_observer_is_built_once_per_cache(cache_dir: Path, observer: AtenObserver) -> None:
    again = load_observer(cache_dir / "builds")
    again.arm()
    torch.exp(torch.ones(2))
    assert "aten::exp" in again.disarm()


_LOAD_WITHOUT_BUILDING = """
import sys
from pathlib import Path
import torch
from torch.utils import cpp_extension
from kernelgym.backends.aten_observer import load_observer
from kernelgym.backends.native import BuildError

def no_build(*args, **kwargs):
    print("built", flush=True)
    raise RuntimeError("no compiler here")

cpp_extension.load_inline = no_build
try:
    observer = load_observer(Path(sys.argv[1]))
except BuildError:
    sys.exit(0)
observer.arm()
torch.exp(torch.ones(2))
print("sees exp" if "aten::exp" in observer.disarm() else "blind", flush=True)
"""


def _load_in_a_fresh_process(build_root: Path) -> str:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LOAD_WITHOUT_BUILDING, str(build_root)], capture_output=True, text=True,
                          timeout=300, check=True)
    return done.stdout.strip()


def test_a_copied_cache_loads_its_observer_without_building_it_again(cache_dir: Path, observer: AtenObserver,
                                                                     tmp_path: Path) -> None:
    """torch's loader rebuilds an extension whose build directory moved; the observer's key is enough (a fresh
    process, with every build refused: one that were attempted prints ``built``)."""
    moved = tmp_path / "moved" / "builds"
    shutil.copytree(cache_dir / "builds" / "aten_observer", moved / "aten_observer")
    assert _load_in_a_fresh_process(moved) == "sees exp"
    broken = tmp_path / "broken" / "builds"
    for part in ("aten_observer", "pch"):  # the precompiled header as well: a rebuild would make it first
        shutil.copytree(cache_dir / "builds" / part, broken / part)
    for library in (broken / "aten_observer").glob("*/*.so"):
        library.write_bytes(b"not a library")  # as a build killed while linking may leave it
    assert _load_in_a_fresh_process(broken) == "built"


def test_sampled_arming_sees_a_fraction_of_the_operator_calls_and_full_arming_sees_all(observer: AtenObserver) -> None:
    from kernelgym.backends.aten_observer import SAMPLING

    x = torch.randn(4)
    observer.arm(every=False)
    for _ in range(4000):
        torch.neg(x)
    sampled = observer.disarm().count("aten::neg")
    assert 0.5 * SAMPLING * 4000 < sampled < 1.5 * SAMPLING * 4000  # binomial(4000, 0.1): 400 +- 19
    observer.arm(every=True)
    for _ in range(100):
        torch.neg(x)
    assert observer.disarm().count("aten::neg") == 100


def test_each_disarm_writes_its_record_from_cpp_to_the_judges_descriptor(observer: AtenObserver) -> None:
    """The record the judge reads carries the arming's sequence number; a stale, missing or garbled one reads as None."""
    import os

    from kernelgym.backends.aten_observer import RECORD_BYTES, read_record
    from kernelgym.verifier.trial_inputs import sealed_memfd

    fd = sealed_memfd(RECORD_BYTES, "observer-record")  # kept open: the observer writes to it for the rest of this process
    with pytest.raises(OSError):
        os.ftruncate(fd, 0)  # sealed: whoever holds it cannot cut it under the judge
    assert os.fstat(fd).st_size == RECORD_BYTES and read_record(fd, 1) is None  # nothing written yet
    assert observer.record_to(fd) and not observer.record_to(os.dup(fd))  # set once
    observer.arm()
    torch.sigmoid(torch.randn(4))
    names = observer.disarm()
    seq = int(os.pread(fd, 64, 0).split()[1])
    assert "aten::sigmoid" in names and read_record(fd, seq) == names
    assert read_record(fd, seq - 1) is None and read_record(fd, seq + 1) is None  # another arming's record
    observer.arm(every=True)
    torch.tanh(torch.randn(4))
    assert read_record(fd, seq + 1) is None  # armed, not yet disarmed: no record of this arming
    names = observer.disarm()
    assert "aten::tanh" in read_record(fd, seq + 1) and "aten::sigmoid" not in names
    forged = f"kernelgym-observer {seq + 1} 5 16\naten::tanh\nend\n".encode()
    os.pwrite(fd, forged, 0)
    assert read_record(fd, seq + 1) is None  # miscounted


_REUSE = """
import sys
from pathlib import Path
import torch
from kernelgym.backends.aten_observer import load_observer

observer = load_observer(Path(sys.argv[1]))
assert observer.reuse_host_blocks(True)
a, b = torch.empty(65536), torch.empty(65536)
first, second = a.data_ptr(), b.data_ptr()
del a
del b
other_size = torch.empty(1024)  # another size takes neither
again = [torch.empty(65536), torch.empty(65536)]
assert [t.data_ptr() for t in again] == [second, first], "most recently freed first, per size"
x, bias = torch.randn(16, 4096), torch.randn(4096)
outputs = set()
for _ in range(50):
    out = torch.tanh(x * 0.5) + bias  # each call's temporaries and output land in the blocks the last call freed
    outputs.add(out.data_ptr())
assert len(outputs) <= 2, len(outputs)
assert torch.equal(out, torch.tanh(x * 0.5) + bias)
assert observer.reuse_host_blocks(False)  # kept blocks go back to the C allocator; allocations go on
assert torch.zeros(65536).sum().item() == 0.0
print("reused", flush=True)
"""


def test_reusing_host_blocks_hands_out_the_most_recently_freed_block_of_a_size(cache_dir: Path, observer: AtenObserver) -> None:
    """What the timed calls of both host processes run with (``CandidateSide.cmd_reuse``): freed host memory handed
    out again most recently freed first, so a forward's buffers stay in the same few blocks call after call (a fresh
    process: the allocator it installs stays for the process's life)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _REUSE, str(cache_dir / "builds")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "reused", done.stderr[-2000:]
