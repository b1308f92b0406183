"""Sampling where another process's threads run: attribution to the mapped file and the function there."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelgym.executor.sampling import CodeMap, SymbolTable, ThreadSampler
from kernelgym.verifier.sampled_compute import compute_share

SPIN_SOURCE = """void spin_here(volatile long *n) { for (;;) { *n += 1; } }
void spin_for(long steps) { volatile long n = 0; for (long i = 0; i < steps; ++i) { n += i; } }
"""


@pytest.fixture(scope="module")
def spin_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library whose one function, ``spin_here``, never returns."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    folder = tmp_path_factory.mktemp("spin")
    (folder / "spin.c").write_text(SPIN_SOURCE)
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", str(folder / "libspin.so"), str(folder / "spin.c")], check=True)
    return folder / "libspin.so"


def _spinning(code: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"spinning\n"
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def spins_in_library(spin_library: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose main thread spins in ``spin_here`` of :func:`spin_library`, called through ctypes."""
    yield from _spinning(f"""
        import ctypes
        library = ctypes.CDLL({str(spin_library)!r})
        counter = ctypes.c_long(0)
        print("spinning", flush=True)
        library.spin_here(ctypes.byref(counter))
    """)


@pytest.fixture
def spins_in_libc() -> Iterator[subprocess.Popen[bytes]]:
    """A process that spends nearly all its time in libc's ``memset`` (16 MB per Python-level call)."""
    yield from _spinning("""
        import ctypes
        buffer = ctypes.create_string_buffer(1 << 24)
        print("spinning", flush=True)
        while True:
            ctypes.memset(buffer, 1, 1 << 24)
    """)


@pytest.fixture
def alternates_with_torch(spin_library: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process that spins in ``spin_for`` of :func:`spin_library` and multiplies matrices with torch (MKL), in turn."""
    yield from _spinning(f"""
        import ctypes, torch
        torch.set_num_threads(1)
        library = ctypes.CDLL({str(spin_library)!r})
        a = torch.randn(256, 256)
        print("spinning", flush=True)
        while True:
            library.spin_for(300_000)
            torch.mm(a, a)
    """)


def _sampled(pid: int, label: str = "spin", seconds: float = 0.5) -> ThreadSampler:
    with ThreadSampler(pid) as sampler, sampler.window(label):
        time.sleep(seconds)
    return sampler


def test_a_spinning_function_is_named_with_its_library(spin_library: Path, spins_in_library: subprocess.Popen[bytes]) -> None:
    sampler = _sampled(spins_in_library.pid)
    assert sampler.refused is None
    places = Counter((Path(s.path).name, s.symbol) for s in sampler.samples("spin"))
    assert sum(places.values()) >= 20
    (where, count), = places.most_common(1)
    assert where == ("libspin.so", "spin_here") and count >= 0.9 * sum(places.values()), places


def test_time_in_libc_is_attributed_to_libc(spins_in_libc: subprocess.Popen[bytes]) -> None:
    files = Counter(Path(s.path).name for s in _sampled(spins_in_libc.pid).samples("spin"))
    assert sum(files.values()) >= 20
    assert files.most_common(1)[0][0].startswith("libc.so"), files


def test_samples_are_taken_only_inside_a_window_and_kept_by_label(spins_in_library: subprocess.Popen[bytes]) -> None:
    with ThreadSampler(spins_in_library.pid) as sampler:
        time.sleep(0.2)  # no window open: nothing sampled
        with sampler.window("first"):
            time.sleep(0.3)
        time.sleep(0.2)
    assert set(sampler.pointers) == {"first"} and len(sampler.samples("first")) >= 10
    assert sampler.samples("second") == []


def test_a_sampled_process_runs_on_as_before(spins_in_library: subprocess.Popen[bytes]) -> None:
    _sampled(spins_in_library.pid, seconds=0.3)
    time.sleep(0.1)
    assert spins_in_library.poll() is None  # not stopped, not killed: each thread is let go after each sample
    state = Path(f"/proc/{spins_in_library.pid}/status").read_text()
    assert "TracerPid:\t0" in state


def test_a_sleeping_process_is_not_sampled() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        assert _sampled(process.pid, seconds=0.3).samples("spin") == []
    finally:
        process.kill()
        process.wait()


def test_the_code_map_places_an_address_in_its_file_and_the_symbol_table_names_it(spin_library: Path) -> None:
    library = ctypes.CDLL(str(spin_library))
    address = ctypes.cast(library.spin_here, ctypes.c_void_p).value
    assert address is not None
    place = CodeMap.read(os.getpid()).locate(address)
    assert place is not None and Path(place[0]).name == "libspin.so"
    assert SymbolTable(place[0]).name_at(place[1]) == "spin_here"
    assert CodeMap.read(os.getpid()).locate(0) is None



def test_the_own_share_weighs_the_time_in_the_answers_build_against_atens(spin_library: Path,
                                                                          alternates_with_torch: subprocess.Popen[bytes]) -> None:
    samples = _sampled(alternates_with_torch.pid, seconds=1.0).samples("spin")
    share = compute_share(samples, [], 1, 1, frozenset({str(spin_library)}))
    in_library = sum(s.path == str(spin_library) for s in samples)
    assert share.own_samples == in_library and share.torch_samples >= 10, Counter(Path(s.path).name for s in samples)
    assert share.own is not None and 0.1 < share.own < 0.9, (share, Counter((Path(s.path).name, s.symbol) for s in samples))
