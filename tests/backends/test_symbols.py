"""The allow-list of native symbols: real shared objects, every route to forbidden code, however spelled.

Small shared objects are compiled here with plain ``c++`` (no torch headers, a
second each): declaring a function is enough to import it, which is exactly
what the linker records. Slow tests build real answers through the ``cpp``
backend's cache: the red-team samples of ``tests/hacks/cpp`` that reach ATen, the dispatcher,
``dlsym``, a thread pool or ``mallopt`` are refused before their extension is
imported.
"""

from __future__ import annotations

import json
import runpy
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgym.backends import native, symbols
from kernelgym.backends.base import KernelTracker
from kernelgym.backends.native import ForbiddenSymbolsError, extension_symbols
from kernelgym.backends.symbols import FORBIDDEN_SYMBOL_RULE, forbidden_symbols, imported_symbols, symbol_entity

ROOT = Path(__file__).resolve().parents[2]
needs_compiler = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("nm") is None, reason="needs c++ and nm")

_DECLARATIONS = r"""
#include <cmath>
#include <cstring>
#include <malloc.h>
#include <new>
#include <pthread.h>
#include <thread>
namespace at { class Tensor; namespace cpu { Tensor _softmax(const Tensor&, long, bool); }
               namespace _ops { struct mm { static Tensor call(const Tensor&, const Tensor&); }; } }
namespace c10 { struct OperatorHandle; struct Dispatcher { static Dispatcher& realSingleton();
                OperatorHandle findSchemaOrThrow(const char*, const char*); };
                struct ThreadPool { void waitWorkComplete(); }; }
extern "C" void* dlsym(void*, const char*);
"""

_ROUTES = {
    # spelled with `using namespace at`: the same symbol as at::cpu::_softmax
    "using": ("using namespace at;\nvoid* volatile p = (void*)&cpu::_softmax;", [], "at::cpu::_softmax"),
    # spelled through a -D flag
    "macro": ("void* volatile p = (void*)&NS::cpu::_softmax;", ["-DNS=at"], "at::cpu::_softmax"),
    "ops": ("void* volatile p = (void*)&at::_ops::mm::call;", [], "at::_ops::mm::call"),
    "dispatcher": ("auto volatile p = &c10::Dispatcher::findSchemaOrThrow;", [], "c10::Dispatcher::findSchemaOrThrow"),
    "dlsym": ("#define PASTE(a, b) a##b\nvoid* volatile p = (void*)&PASTE(dl, sym);", [], "dlsym"),
    "pthread": ("void* volatile p = (void*)&pthread_create;", [], "pthread_create"),
    "pool": ("auto volatile p = &c10::ThreadPool::waitWorkComplete;", [], "c10::ThreadPool::waitWorkComplete"),
    "mallopt": ("static const int tuned = mallopt(M_MMAP_THRESHOLD, 1 << 30);", [], "mallopt"),
    "thread": ("void go() { std::thread([] {}).detach(); }", [], "std::thread::_M_start_thread"),
}


def _shared_object(tmp_path: Path, name: str, body: str, flags: list[str] | None = None) -> Path:
    source = tmp_path / f"{name}.cpp"
    source.write_text(_DECLARATIONS + body + "\n")
    target = tmp_path / f"lib{name}.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-O1", *(flags or []), str(source), "-o", str(target)], check=True)
    return target


@needs_compiler
def test_an_honest_object_imports_only_allowed_symbols(tmp_path: Path) -> None:
    body = (
        "float* scaled(const float* x, int n) { float* y = new float[n]; std::memcpy(y, x, n * sizeof(float));"
        " for (int i = 0; i < n; ++i) y[i] = std::exp(y[i]) + std::tanh(y[i]); return y; }"
    )
    library = _shared_object(tmp_path, "honest", body)
    imported = imported_symbols(library)
    assert any(symbol_entity(s) == "operator new[]" for s in imported)
    assert forbidden_symbols(imported, "cpp") == []


@needs_compiler
def test_cpu_counts_clocks_and_locks_are_allowed(tmp_path: Path) -> None:
    """What C++ answers commonly use to size their work and guard a shared sum: reads and locks, no threads."""
    body = (
        "#include <atomic>\n#include <chrono>\n#include <ctime>\n#include <mutex>\n#include <sys/sysinfo.h>\n"
        "#include <unistd.h>\n"
        "static std::mutex lock; static std::atomic<long> calls{0};\n"
        "long work() { std::lock_guard<std::mutex> guard(lock); ++calls;\n"
        "  timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);\n"
        "  auto t0 = std::chrono::steady_clock::now();\n"
        "  long n = std::thread::hardware_concurrency() + sysconf(_SC_NPROCESSORS_ONLN) + sysconf(_SC_NPROCESSORS_CONF)"
        " + get_nprocs();\n"
        "  return n + (std::chrono::steady_clock::now() - t0).count() + ts.tv_nsec + calls.load(); }"
    )
    imported = imported_symbols(_shared_object(tmp_path, "queries", body))
    entities = {symbol_entity(s) for s in imported}
    assert {"std::thread::hardware_concurrency", "sysconf", "get_nprocs"} <= entities, entities
    assert forbidden_symbols(imported, "cpp") == []
    assert forbidden_symbols(imported, "cuda") == []


@needs_compiler
@pytest.mark.parametrize("route", sorted(_ROUTES))
def test_every_route_is_caught_however_it_is_spelled(tmp_path: Path, route: str) -> None:
    body, flags, entity = _ROUTES[route]
    library = _shared_object(tmp_path, route, body, flags)
    findings = forbidden_symbols(imported_symbols(library), "cpp")
    assert entity in {symbol_entity(f.symbol) for f in findings}, findings
    finding = next(f for f in findings if symbol_entity(f.symbol) == entity)
    assert finding.sentence.startswith("`") and finding.sentence.endswith(".")
    assert finding.concern != "not allowed" or route == "pool"


@needs_compiler
def test_a_c_linkage_definition_that_could_interpose_is_caught(tmp_path: Path) -> None:
    body = 'extern "C" int cudaEventElapsedTime(float* ms, void*, void*) { *ms = 0.f; return 0; }'
    library = _shared_object(tmp_path, "event", body)
    exported = symbols.exported_symbols(library)
    assert "cudaEventElapsedTime" in exported
    assert [f.concern for f in forbidden_symbols([], "cpp", exported)] == ["interposition"]


def test_the_cxx_runtime_linked_statically_is_not_interposition() -> None:
    # A toolchain that links libstdc++/libgcc statically (seen with torch 2.11+cu130) defines these in every extension.
    runtime = ["__cxa_allocate_exception", "__cxa_demangle", "__gxx_personality_v0", "__dynamic_cast", "_Unwind_Resume",
               "_ITM_RU1"]
    assert forbidden_symbols([], "cuda", runtime) == []
    assert [f.symbol for f in forbidden_symbols([], "cuda", ["__cxa_begin_catch", "cudaLaunchKernel"])] == [
        "cudaLaunchKernel"]


def test_the_floor_excuses_its_own_imports_and_exports_and_nothing_else(tmp_path: Path, monkeypatch) -> None:
    floor = native.ToolchainFloor(imported=frozenset({"PyObject_GetAttrString", "cudaEventElapsedTime"}),
                                  exported=frozenset({"__udivti3"}))
    monkeypatch.setattr(native, "toolchain_floor", lambda *_: floor)
    found = forbidden_symbols(["PyObject_GetAttrString", "dlsym"], "cuda", ["__udivti3", "cudaEventElapsedTime"])
    kept = native.beyond_floor(found, "cuda", tmp_path)
    # the floor importing cudaEventElapsedTime does not excuse an extension that defines it
    assert sorted(f.symbol for f in kept) == ["cudaEventElapsedTime", "dlsym"]


@pytest.mark.parametrize(
    ("symbol", "backend"),
    [
        ("cudaLaunchKernel", "cuda"),
        ("__cudaRegisterFatBinary", "cuda"),
        ("c10::cuda::getCurrentCUDAStream(signed char)", "cuda"),
        ("c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool)", "cuda"),
        ("musaLaunchKernel", "musa"),
        ("GOMP_parallel", "cpp"),
        ("omp_get_thread_num", "cpp"),
        ("expf", "cpp"),
        ("std::__throw_length_error(char const*)", "cpp"),
        ("std::thread::hardware_concurrency()", "cuda"),
        ("omp_get_max_threads", "cpp"),
        ("clock_gettime", "cuda"),
        ("std::chrono::_V2::steady_clock::now()", "cpp"),
        ("c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)", "cuda"),
    ],
)
def test_runtime_symbols_an_honest_answer_needs_are_allowed(symbol: str, backend: str) -> None:
    assert forbidden_symbols([symbol], backend) == []


@pytest.mark.parametrize(
    ("symbol", "backend", "concern"),
    [
        ("cudaStreamCreateWithFlags", "cuda", "streams and graphs"),
        ("cudaEventElapsedTime", "cpp", "timers"),
        ("cudaGraphLaunch", "cuda", "streams and graphs"),
        ("cudaLaunchHostFunc", "cuda", "streams and graphs"),
        ("cublasSgemm_v2", "cuda", "vendor library"),
        ("cudaStreamSetAttribute", "cuda", "process settings"),
        ("c10::cuda::getStreamFromPool(bool, signed char)", "cpp", "streams and graphs"),
        ("GOMP_parallel", "cuda", "not allowed"),
        ("omp_set_num_threads", "cpp", "process settings"),
        ("std::thread::detach()", "cpp", "threads"),
        ("std::thread::join()", "cpp", "threads"),
        ("nanosleep", "cpp", "timers"),
        ("PyRun_SimpleString", "cpp", "Python"),
        ("std::filesystem::remove(std::filesystem::__cxx11::path const&)", "cpp", "files"),
    ],
)
def test_carve_outs_and_other_backends_are_refused(symbol: str, backend: str, concern: str) -> None:
    assert [f.concern for f in forbidden_symbols([symbol], backend)] == [concern]


# What g++ records for a host file that constructs c10::cuda::CUDAGuard/OptionalCUDAGuard and reads the
# current stream (torch 2.13 headers): the guard's vtable drags in event and stream-pool functions.
_CUDA_GUARD_IMPORTS = [
    "c10::cuda::CUDACachingAllocator::allocator", "c10::cuda::CUDAStream::query() const",
    "c10::cuda::CUDAStream::stream() const", "c10::cuda::CUDAStream::synchronize() const",
    "c10::cuda::ExchangeDevice(signed char)", "c10::cuda::GetDevice(signed char*)", "c10::cuda::MaybeSetDevice(signed char)",
    "c10::cuda::SetDevice(signed char, bool)",
    "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool)",
    "c10::cuda::device_count()", "c10::cuda::getCurrentCUDAStream(signed char)", "c10::cuda::getDefaultCUDAStream(signed char)",
    "c10::cuda::getStreamFromPool(bool, signed char)", "c10::cuda::getStreamFromPool(int, signed char)",
    "c10::cuda::setCurrentCUDAStream(c10::cuda::CUDAStream)", "c10::impl::GPUTrace::gpuTraceState",
    "c10::impl::GPUTrace::haveState", "cudaDeviceSynchronize", "cudaEventCreateWithFlags", "cudaEventDestroy",
    "cudaEventElapsedTime", "cudaEventQuery", "cudaEventRecord", "cudaEventSynchronize", "cudaGetErrorString",
    "cudaGetLastError", "cudaStreamIsCapturing", "cudaStreamWaitEvent",
]


def test_what_a_cuda_device_guard_drags_in_is_allowed() -> None:
    assert forbidden_symbols(_CUDA_GUARD_IMPORTS, "cuda") == []
    assert forbidden_symbols([s.replace("cuda", "musa").replace("CUDA", "MUSA") for s in _CUDA_GUARD_IMPORTS], "musa") == []


def test_the_error_names_the_rule_and_the_symbols() -> None:
    findings = forbidden_symbols(["at::cpu::_softmax(at::Tensor const&, long, bool)", "dlsym", "expf"], "cpp")
    error = ForbiddenSymbolsError(findings)
    assert error.rule == FORBIDDEN_SYMBOL_RULE == "forbidden-native-symbol"
    assert error.symbols == ("at::cpu::_softmax(at::Tensor const&, long, bool)", "dlsym")
    assert isinstance(error, native.BuildError) and "dlsym" in str(error)


@needs_compiler
def test_symbol_lists_are_cached_with_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = _shared_object(tmp_path, "cached", "int twice(int x) { return 2 * x; }")
    first = extension_symbols(library)
    assert json.loads(library.with_suffix(".symbols.json").read_text())["imported"] == first[0]

    def no_nm(_path: object) -> list[str]:
        raise AssertionError("a warm build must not run nm again")

    monkeypatch.setattr(native, "imported_symbols", no_nm)
    monkeypatch.setattr(native, "exported_symbols", no_nm)
    assert extension_symbols(library) == first


# --- real answers through the cpp backend's build cache (slow: they compile) --------------------------


def _build(path: Path, cache_dir: Path) -> None:
    from kernelgym.backends import get_backend

    backend = get_backend("cpp")
    build_root = cache_dir / "builds"
    build_root.mkdir(parents=True, exist_ok=True)
    backend.prepare_worker(build_root)
    with backend.build_hooks(build_root, KernelTracker(), []):
        runpy.run_path(str(path), run_name="candidate")


# The honest answers (the cpu suite's solutions, tests/legit/cpp) pass the same check inside the judge: they are
# judged ok by tests/verifier/test_pipeline.py and tests/hacks/test_corpus.py, built there in parallel.
_CAUGHT = {
    "p01_native_using_namespace_at.py": "ATen compute",
    "p01_native_macro_namespace.py": "ATen compute",
    "p01_native_dispatcher_lookup.py": "dispatcher",
    "p01_native_dlsym_pasted.py": "dynamic loading",
    "p14_native_c10_thread_pool.py": "threads",
    "p23_native_mallopt_at_init.py": "process settings",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", [*sorted(_CAUGHT)[:1], *(pytest.param(n, marks=pytest.mark.extended) for n in sorted(_CAUGHT)[1:])])
def test_red_team_extensions_are_refused_before_import(name: str, cache_dir: Path) -> None:
    with pytest.raises(ForbiddenSymbolsError) as caught:
        _build(ROOT / "tests/hacks/cpp" / name, cache_dir)
    assert _CAUGHT[name] in {f.concern for f in caught.value.findings}, caught.value.findings


@pytest.mark.slow
def test_the_toolchain_floor_is_allowed_here_and_excuses_only_its_own_symbols(cache_dir: Path) -> None:
    """The floor (what a minimal honest extension imports) is on the allow-list with this toolchain; where a
    toolchain adds symbols of its own (a GPU image's unwinder or runtime), those and only those are excused."""
    store = native.floor_stores(cache_dir)[0]  # where the judge keeps its floor: built once per session
    floor = native.toolchain_floor("cpp", store)
    assert "GOMP_parallel" in floor.imported and any(s.startswith("PyInit_") for s in floor.exported)
    # What the floor imports and defines is admitted as such on this toolchain.
    assert forbidden_symbols(floor.imported, "cpp", floor.exported) == []
    assert native.toolchain_floor("cpp", store) is floor  # read once per process
    assert native.toolchain_floor("musa", store) == native.ToolchainFloor()


@pytest.mark.slow
def test_a_workers_floor_copy_for_candidates_is_rewritten_from_the_judges(cache_dir: Path) -> None:
    """Candidates may write the cache, so their copy of the floor is only theirs to trust: each worker start
    rewrites it from the judge's own (which the judge alone reads)."""
    judge_store, candidate_store = native.floor_stores(cache_dir)
    copy = native.floor_record("cpp", candidate_store)
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(json.dumps({"imported": ["dlopen"], "exported": []}))  # as a candidate could have left it
    floor = native.prepare_floor("cpp", cache_dir)
    assert floor == native.toolchain_floor("cpp", judge_store) and "dlopen" not in floor.imported
    assert json.loads(copy.read_text()) == {"imported": sorted(floor.imported), "exported": sorted(floor.exported)}
    assert native.prepare_floor("triton", cache_dir) == native.ToolchainFloor()  # no native build, no floor


@pytest.mark.slow
def test_a_second_cache_gets_its_copy_rewritten_when_this_process_knows_the_floor(cache_dir: Path, tmp_path: Path) -> None:
    """A floor this process already read from one store must not stop another store's copy being rewritten
    (it did when the floors were remembered by toolchain alone: the tampered copy stayed)."""
    native.prepare_floor("cpp", cache_dir)
    other = tmp_path / "cache"
    copy = native.floor_record("cpp", native.floor_stores(other)[1])
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(json.dumps({"imported": ["dlopen"], "exported": []}))
    floor = native.prepare_floor("cpp", other)
    assert "dlopen" not in floor.imported
    assert json.loads(copy.read_text()) == {"imported": sorted(floor.imported), "exported": sorted(floor.exported)}


def test_findings_are_worded_by_concern_and_capped() -> None:
    found = forbidden_symbols(["dlsym", "dlopen", "pthread_create"], "cpp")
    text = symbols.describe_findings(found, limit=2)
    assert "`dlsym`, `dlopen`:" in text and text.endswith("(1 more)")
