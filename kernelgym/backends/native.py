"""Content-addressed builds of ``torch.utils.cpp_extension.load_inline`` extensions, made by the trusted side.

Holds:
    BuildError: a native build failed; carries the compiler log.
    BuildTimeout: a native build ran past its budget.
    ForbiddenSymbolsError: a build succeeded but links against symbols its backend does not allow.
    extension_symbols: the imported and exported symbols of a built extension, cached beside it.
    intercept_load_inline: context manager that routes ``load_inline`` calls through
        the trusted build step and counts entry-point calls.
    trim_compiler_log: the first errors of a compiler log, first error line first.

A candidate's process never compiles and never writes the store: its
``load_inline`` sends the request to the trusted worker, which checks the flags
and sources, compiles in a build sandbox (a directory of its own, a subprocess
that never loads the result), checks the symbols the library links against its
backend's allow-list (:mod:`kernelgym.backends.symbols`) and publishes it into
the content-addressed store (:mod:`kernelgym.backends.store`) with its sha256
(:mod:`kernelgym.backends.trusted_build`).
The candidate then imports it from the store, which it can only read. A build
is addressed by the hash of its sources, entry points, flags and toolchain; the
same candidate built twice (in any worker, on any node that shares the cache
directory) compiles once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, NamedTuple

from kernelgym.backends.base import BuildRecord, KernelTracker
from kernelgym.backends.locks import file_lock
from kernelgym.backends.symbols import (
    FORBIDDEN_SYMBOL_RULE,
    ForbiddenSymbol,
    describe_findings,
    exported_symbols,
    imported_symbols,
)

__all__ = [
    "BuildError",
    "BuildTimeout",
    "ForbiddenSymbolsError",
    "ensure_pch",
    "import_extension",
    "beyond_floor",
    "extension_symbols",
    "floor_record",
    "floor_stores",
    "intercept_load_inline",
    "pch_target",
    "prepare_floor",
    "ToolchainFloor",
    "toolchain_floor",
    "toolchain_fingerprint",
    "trim_compiler_log",
]

# Flags every C++ build gets unless the candidate asks for others. Keeping one
# canonical set lets all such builds share one precompiled torch/extension.h.
CANONICAL_CFLAGS = ("-O3", "-fopenmp")
CANONICAL_LDFLAGS = ("-fopenmp",)
_CANONICAL_ACCEPTS = {"-O3", "-O2", "-O1", "-fopenmp", "-std=c++17"}
# The binding translation unit of a CUDA build (main.cpp: the cpp_sources and pybind11 glue; kernels and
# their host launchers live in the .cu file) gets torch's own default flags, so all such builds share one
# precompiled torch/extension.h (its CPU time drops from ~28 s to ~10 s: benchmarks/results/cuda-build-levers.md).
CANONICAL_CUDA_HOST_CFLAGS: tuple[str, ...] = ()
_CANONICAL_CUDA_HOST_ACCEPTS = {"-O3", "-O2", "-O1", "-O0", "-std=c++17"}
_SAFE_FLAG = re.compile(
    r"^(-O[0-3s]|-f[a-z0-9\-]+|-m[a-z0-9\-=]+|-std=c\+\+[0-9a-z]+|-[DU][A-Za-z_][A-Za-z0-9_]*(=[\w.\-]*)?|-W[a-z\-]*|-g"
    r"|-lineinfo|-l(gomp|m)"
    # nvcc: fast math, constexpr/lambda extensions, register caps, ptxas verbosity/optimisation, target architectures
    r"|--?use_fast_math|--expt-relaxed-constexpr|--extended-lambda|--?maxrregcount=\d+|-res-usage"
    r"|-Xptxas=(-v|-O[0-3])|--ptxas-options=(-v|-O[0-3])|-arch=sm_[0-9a-z]+|-gencode=[\w,=]+)$"
)


class BuildError(Exception):
    """A native build failed. ``log`` holds the compiler output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


_DEVICE_SUFFIXES = frozenset({".cu", ".mu"})
"""Source files ``load`` hands to the device compiler (CUDA, MUSA); the rest are the host compiler's."""


class BuildTimeout(BuildError):
    """A native build ran past its budget and was stopped: not a verdict on the sources, so never recorded as a failure."""


class ForbiddenSymbolsError(BuildError):
    """A built extension links against symbols its backend does not allow; the answer is ``illegal``.

    Raised before the extension is imported, so none of its code has run.

    Attributes:
        rule: the rule id, ``"forbidden-native-symbol"``.
        findings: every forbidden symbol, each with a sentence saying why.
        symbols: the forbidden symbols' names, in the order found.
    """

    rule = FORBIDDEN_SYMBOL_RULE

    def __init__(self, findings: Sequence[ForbiddenSymbol]) -> None:
        self.findings = tuple(findings)
        self.symbols = tuple(f.symbol for f in self.findings)
        super().__init__(
            f"Your compiled extension links against functions a native kernel must not use: {describe_findings(self.findings)} "
            "Only allocation, tensor metadata, error helpers, the device runtime's launch and memory calls "
            "and the C/C++ runtime are allowed."
        )


def extension_symbols(library: Path) -> tuple[list[str], list[str]]:
    """The (imported, exported) symbols of a built extension, read once and cached beside it.

    The build directory is content-addressed, so the cached lists stay valid for
    as long as the library does; a warm build costs one small file read.

    Raises:
        BuildError: the symbols cannot be read (no ``nm``, or not a shared object).
    """
    cached = library.with_suffix(".symbols.json")
    if cached.exists():
        data = json.loads(cached.read_text())
        return data["imported"], data["exported"]
    try:
        imported, exported = imported_symbols(library), exported_symbols(library)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"the built extension's symbols could not be read: {exc}") from None
    partial = cached.with_suffix(".partial")
    partial.write_text(json.dumps({"imported": imported, "exported": exported}))
    partial.rename(cached)
    return imported, exported


_DIAGNOSTIC = re.compile(r"(:\d+(:\d+)?: (fatal )?error\b|\(\d+\): error\b|^error:|: error:)", re.IGNORECASE)
_NOISE = ("[", "FAILED:", "ninja:", "c++ ", "g++ ", "gcc ", "nvcc ", "/usr/", "Error building extension")
# load_inline writes its sources as main.cpp / cuda.cu into the build folder; their folder is that build folder.
_BUILD_SOURCE = re.compile(r"(/[^\s:()'\"]*)/(?:main\.cpp|cuda\.cu)\b")


def trim_compiler_log(log: str, max_errors: int = 5, max_chars: int = 3000) -> str:
    """Return the compiler's first error lines, the very first error line first.

    Compiler diagnostics (``file:line:col: error: ...``) are kept with the two
    lines after each (the code and the caret); ninja's command lines and
    torch's wrapper message are dropped; paths inside the build folder are
    made relative to it (``main.cpp:4:27: error: ...``), so the text names no
    cache path. Without any diagnostic, the last lines of the log are returned.

    Example:
        >>> log = "/cache/builds/ab12/main.cpp:4:9: error: 'y' was not declared\\n    4 | int x = y;\\n      |         ^"
        >>> print(trim_compiler_log(log))
        main.cpp:4:9: error: 'y' was not declared
            4 | int x = y;
              |         ^
    """
    text = log.split(": ", 1)[1] if log.startswith("Error building extension") else log
    lines = [ln.rstrip() for ln in text.splitlines()]
    keep: list[str] = []
    errors = 0
    for i, line in enumerate(lines):
        if _DIAGNOSTIC.search(line) and not line.lstrip().startswith(_NOISE):
            errors += 1
            keep.extend(ln for ln in lines[i : i + 3] if ln not in keep and not ln.lstrip().startswith(_NOISE))
            if errors >= max_errors:
                break
    if not keep:
        keep = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith(_NOISE)][-20:]
    trimmed = "\n".join(keep)
    for build_dir in sorted(set(_BUILD_SOURCE.findall(text)), key=len, reverse=True):
        trimmed = trimmed.replace(build_dir + "/", "")
    return trimmed[:max_chars]


@functools.lru_cache(maxsize=4)
def toolchain_fingerprint(compilers: tuple[str, ...]) -> str:
    """Versions of torch, Python and the given compilers, for build cache keys."""
    import torch

    parts = [torch.__version__, sys.version.split()[0]]
    for compiler in compilers:
        try:
            out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
            lines = out.strip().splitlines()
            # nvcc names itself on the first line and its version on a "release" line.
            parts.append(" ".join([lines[0], *(ln for ln in lines[1:] if "release" in ln)]) if lines else compiler)
        except (OSError, subprocess.SubprocessError):
            parts.append(f"{compiler}:missing")
    return " | ".join(parts)


# A minimal honest extension per allow-list: what it imports, every extension from this toolchain imports.
_FLOOR_CPP = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    #pragma omp parallel for
    for (long i = 0; i < x.numel(); ++i) out[i] = 2.0f * in[i];
    return y;
}
"""
_FLOOR_CUDA = """
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void twice_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous GPU tensor");
    auto y = torch::empty_like(x);
    long n = x.numel();
    twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
    return y;
}
"""


class ToolchainFloor(NamedTuple):
    """What a minimal honest extension imports, and what it defines with C linkage, on one toolchain."""

    imported: frozenset[str] = frozenset()
    exported: frozenset[str] = frozenset()


_FLOORS: dict[str, ToolchainFloor] = {}
"""Floors this process has read, by their record's path (one store's record never answers for another's)."""


def toolchain_floor(allow_list: str, store: Path, load_inline: Callable[..., Any] | None = None) -> ToolchainFloor:
    """The symbols a minimal honest extension imports or defines when this toolchain builds it.

    Whatever the toolchain links into every extension (pybind11's glue as this torch's
    headers instantiate it, the C++ runtime's unwinder, a statically linked C++ or device
    runtime) is not the candidate's choice, so a finding among these symbols is not held
    against it. The floor is built once per toolchain with torch's own ``load_inline``
    and default flags (no precompiled header, which a candidate could have written) into
    ``store``, which must be a directory candidates cannot write when the caller is the
    judge. ``load_inline`` is torch's own (pass it when torch's is intercepted). Only the ``cpp``
    and ``cuda`` allow-lists have a floor; others get an empty one, as does a toolchain that cannot
    build it (not remembered, so a later call tries again).
    """
    record = floor_record(allow_list, store)
    if record is None:
        return ToolchainFloor()
    from torch.utils import cpp_extension

    cuda, digest, key = allow_list == "cuda", record.stem.rsplit("-", 1)[1], str(record)
    if key in _FLOORS:  # by store, not by toolchain alone: each store gets its own record
        return _FLOORS[key]
    with file_lock(store / "floor.lock"):
        if not record.exists():
            build_dir = store / f"floor-{digest}"
            build_dir.mkdir(parents=True, exist_ok=True)
            (build_dir / "lock").unlink(missing_ok=True)
            name = f"kg_floor_{digest}"
            sources = {"cpp_sources": "torch::Tensor twice(torch::Tensor x);", "cuda_sources": _FLOOR_CUDA} if cuda else {
                "cpp_sources": _FLOOR_CPP, "extra_cflags": ["-O3", "-fopenmp"], "extra_ldflags": ["-fopenmp"]}
            # A library that built but cannot load here (no GPU) still has its symbols.
            with contextlib.suppress(RuntimeError, OSError, ImportError):
                (load_inline or cpp_extension.load_inline)(
                    name=name, functions=["twice"], build_directory=str(build_dir), verbose=False, **sources)
            # torch names the library `<name>_v<N>.so` when this process already loaded a `<name>` (the floor of
            # another store): take the newest build.
            built = sorted(build_dir.glob(f"{name}*.so"), key=lambda p: p.stat().st_mtime)
            library = built[-1] if built else build_dir / f"{name}.so"
            try:
                symbols = {"imported": imported_symbols(library), "exported": exported_symbols(library)}
            except (OSError, subprocess.SubprocessError):
                return ToolchainFloor()
            partial = record.with_suffix(".partial")
            partial.write_text(json.dumps(symbols))
            partial.rename(record)
    _FLOORS[key] = ToolchainFloor(**{kind: frozenset(names) for kind, names in json.loads(record.read_text()).items()})
    return _FLOORS[key]


def floor_record(allow_list: str, store: Path) -> Path | None:
    """Where ``store`` keeps this toolchain's floor for ``allow_list`` (``None``: no floor applies here)."""
    if allow_list not in ("cpp", "cuda"):
        return None
    from torch.utils import cpp_extension

    cuda = allow_list == "cuda"
    if cuda and cpp_extension.CUDA_HOME is None:
        return None
    fingerprint = toolchain_fingerprint(("c++", "nvcc") if cuda else ("c++",))
    digest = hashlib.sha256(json.dumps([3, allow_list, fingerprint, _FLOOR_CUDA if cuda else _FLOOR_CPP]).encode()).hexdigest()[:16]
    return store / f"floor-{allow_list}-{digest}.json"


def floor_stores(cache_dir: Path) -> tuple[Path, Path]:
    """The judge's floor store (beside the cache: candidates cannot write it) and the candidates' copy (in it)."""
    from kernelgym.backends.store import judge_dir

    return judge_dir(cache_dir), cache_dir / "floor"


def prepare_floor(allow_list: str, cache_dir: Path) -> ToolchainFloor:
    """Build the judge's floor for ``allow_list`` once per toolchain, and give candidates a copy.

    A worker calls this at start-up, beside its other one-time builds and before it is pinned to one
    CPU: built lazily, the floor fell to the first candidate and then to the judge, each on one CPU
    (minutes for CUDA). The copy is rewritten from the judge's on every start, so one a candidate
    changed does not last; a candidate's own check reads the copy, and the judge checks again with its own.
    """
    judge_store, candidate_store = floor_stores(cache_dir)
    try:
        floor = toolchain_floor(allow_list, judge_store)
        record = floor_record(allow_list, judge_store)
        if record is not None and record.exists():  # no record: no floor here, or one that could not be built
            with file_lock(candidate_store / "floor.lock"):
                partial = candidate_store / f"{record.stem}.{os.getpid()}.partial"
                partial.write_bytes(record.read_bytes())
                partial.replace(candidate_store / record.name)
    except (OSError, subprocess.SubprocessError):  # unwritable stores: the checks build it when they need it
        return ToolchainFloor()
    return floor


def beyond_floor(findings: list[ForbiddenSymbol], allow_list: str, store: Path,
                 load_inline: Callable[..., Any] | None = None) -> list[ForbiddenSymbol]:
    """``findings`` less those among the toolchain's floor (:func:`toolchain_floor`, built only when there are
    findings): an import the minimal extension also imports, an export it also defines."""
    if not findings:
        return findings
    floor = toolchain_floor(allow_list, store, load_inline)
    return [f for f in findings if f.symbol not in (floor.exported if f.concern == "interposition" else floor.imported)]


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _checked_flags(flags: Sequence[str]) -> list[str]:
    # KernelBench-style answers often pass extra_cflags=[""]: an empty flag means nothing.
    flags = [f for f in flags if f.strip()]
    bad = [f for f in flags if not _SAFE_FLAG.match(f)]
    if bad:
        raise BuildError(f"compiler flags not allowed: {' '.join(bad)} (use optimisation, -f/-m, -D and -std flags only)")
    return list(flags)


def import_extension(name: str, path: Path) -> ModuleType:
    """Import the built extension module ``name`` from ``path`` (once per process)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BuildError(f"built extension {path} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _tracked(module: ModuleType, tracker: KernelTracker) -> SimpleNamespace:
    """A namespace exposing the module's callables, each counting its calls."""

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            tracker.record(name)
            return fn(*args, **kwargs)

        call.__name__ = name
        call.__doc__ = getattr(fn, "__doc__", None)
        return call

    attrs = {}
    for name in dir(module):
        value = getattr(module, name)
        attrs[name] = wrap(name, value) if callable(value) and not name.startswith("__") else value
    return SimpleNamespace(**attrs)


def _torch_cxx_standard() -> str:
    """The ``-std=`` flag torch's extension builds use (read from torch, it changes between releases)."""
    import inspect as pyinspect

    from torch.utils import cpp_extension

    found = re.search(r"-std=c\+\+\d+", pyinspect.getsource(cpp_extension))
    return found.group(0) if found else "-std=c++17"


def _pch_command(cuda: bool) -> list[str] | None:
    """The compiler command that precompiles ``torch/extension.h`` (``None``: no CUDA toolkit for ``cuda``)."""
    import sysconfig

    from torch.utils import cpp_extension

    include = Path(cpp_extension.include_paths()[0])
    if cuda and cpp_extension.CUDA_HOME is None:
        return None
    device = ["-isystem", str(Path(cpp_extension.CUDA_HOME) / "include")] if cuda else []
    return [
        "c++", "-x", "c++-header", str(include / "torch" / "extension.h"),
        "-isystem", str(include), "-isystem", str(include / "torch" / "csrc" / "api" / "include"), *device,
        "-isystem", sysconfig.get_path("include"),
        "-DTORCH_API_INCLUDE_EXTENSION_H", "-fPIC", _torch_cxx_standard(),
        *(CANONICAL_CUDA_HOST_CFLAGS if cuda else CANONICAL_CFLAGS),
    ]


def pch_target(build_root: Path, cuda: bool = False) -> Path | None:
    """Where :func:`ensure_pch` keeps the precompiled header for this toolchain (``None``: none can be made)."""
    command = _pch_command(cuda)
    if command is None:
        return None
    digest = hashlib.sha256(json.dumps([command, toolchain_fingerprint(("c++",))]).encode()).hexdigest()[:16]
    return build_root / "pch" / digest / "torch" / "extension.h.gch"


def ensure_pch(build_root: Path, cuda: bool = False) -> Path | None:
    """Precompile ``torch/extension.h`` for the canonical flags into the cache; return its include dir.

    With ``cuda=True`` the header is made for the binding translation unit of a
    CUDA build (CUDA's include directory on the path, :data:`CANONICAL_CUDA_HOST_CFLAGS`).

    GCC looks for ``torch/extension.h.gch`` in each include directory before the
    header itself, so putting the returned directory first on the include path
    makes every canonical build reuse it (a build drops from ~25 s to ~10 s on
    2 cores). An unusable header only costs speed: GCC then reads the real one.
    The header lives in our cache, not in torch's install (torch's own
    ``use_pch`` writes there, and deletes it whenever a build does not use it).
    Returns ``None`` when it cannot be built.
    """
    command, target = _pch_command(cuda), pch_target(build_root, cuda)
    if command is None or target is None:
        return None
    pch_dir = target.parent.parent
    with file_lock(build_root / "pch.lock"):
        if target.exists():
            _write_forwarder(pch_dir)
            return pch_dir
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        try:
            subprocess.run([*command, "-o", str(partial)], check=True, capture_output=True, timeout=900)
        except (OSError, subprocess.SubprocessError):
            partial.unlink(missing_ok=True)
            return None
        partial.rename(target)
        _write_forwarder(pch_dir)
    return pch_dir


def _write_forwarder(pch_dir: Path) -> None:
    # GCC opens the header beside a .gch it uses; this one forwards to torch's real header.
    forwarder = pch_dir / "torch" / "extension.h"
    if not forwarder.exists():
        forwarder.write_text("#pragma once\n#include_next <torch/extension.h>\n")


@contextlib.contextmanager
def intercept_load_inline(
    build_root: Path,
    tracker: KernelTracker,
    log: list[BuildRecord],
    *,
    compilers: tuple[str, ...],
    cuda: bool,
    pch_dir: Path | None = None,
    extension_module: Any = None,
    device_kwargs: tuple[str, str] = ("cuda_sources", "extra_cuda_cflags"),
    key_extra: str = "",
    symbol_backend: str | None = None,
    request_build: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Iterator[None]:
    """Route ``load_inline`` through the trusted build step and the store while the block runs.

    In a candidate's process ``request_build`` sends each request to the trusted side, which
    checks, compiles and publishes it (:class:`~kernelgym.backends.trusted_build.StoreBuilder`); its answer names the store entry,
    imported here from where it lies. Without ``request_build`` (trusted local use) the same
    step runs in this process, with the intercepted loader compiling.

    Args:
        build_root: the store (``<cache>/builds``).
        tracker: counts calls of the built entry points.
        log: receives one :class:`BuildRecord` per build request.
        compilers, cuda, pch_dir, device_kwargs, key_extra, symbol_backend: the
            :class:`~kernelgym.backends.trusted_build.NativeToolchain`.
        extension_module: the module whose ``load_inline`` is intercepted
            (default ``torch.utils.cpp_extension``; MUSA passes its own loader).
        request_build: sends a request (:func:`~kernelgym.backends.trusted_build.plan_build`'s fields) to the
            trusted side, returns its reply.

    Raises (from the intercepted call):
        BuildError: the flags are not allowed or the build failed.
        ForbiddenSymbolsError: the extension links against symbols outside the allow-list.
    """
    from torch.utils import cpp_extension

    from kernelgym.backends.trusted_build import NativeToolchain, StoreBuilder, built_extension, compile_in_process

    target = extension_module if extension_module is not None else cpp_extension
    real_load_inline = target.load_inline
    real_load = getattr(target, "load", None)
    sources_kw, flags_kw = device_kwargs
    local = None
    if request_build is None:
        toolchain = NativeToolchain(compilers, cuda, pch_dir, device_kwargs, key_extra, symbol_backend)
        local = StoreBuilder(build_root, toolchain, compile_in_process(real_load_inline), floor_loader=real_load_inline)

    def stored_load_inline(
        name: str,
        cpp_sources: str | Sequence[str],
        cuda_sources: str | Sequence[str] | None = None,
        functions: str | Sequence[str] | dict[str, str] | None = None,
        extra_cflags: Sequence[str] | None = None,
        extra_cuda_cflags: Sequence[str] | None = None,
        extra_ldflags: Sequence[str] | None = None,
        extra_include_paths: Sequence[str] | None = None,
        **options: Any,
    ) -> SimpleNamespace:
        request = {
            "cpp_sources": _as_list(cpp_sources),
            "device_sources": _as_list(cuda_sources if cuda_sources is not None else options.get(sources_kw)),
            "functions": functions if isinstance(functions, dict) else _as_list(functions),
            "extra_cflags": _as_list(extra_cflags),
            "device_cflags": _as_list(extra_cuda_cflags if extra_cuda_cflags is not None else options.get(flags_kw)),
            "extra_ldflags": _as_list(extra_ldflags),
            "extra_include_paths": _as_list(extra_include_paths),
        }
        start = time.perf_counter()
        built = local.build(request) if local is not None else built_extension(request_build(request))
        module = import_extension(built.module, built.path)
        log.append(BuildRecord(key=built.key, seconds=time.perf_counter() - start, cache_hit=built.cache_hit))
        return _tracked(module, tracker)

    def stored_load(name: str, sources: str | Sequence[str], extra_cflags: Sequence[str] | None = None,
                    extra_cuda_cflags: Sequence[str] | None = None, extra_ldflags: Sequence[str] | None = None,
                    extra_include_paths: Sequence[str] | None = None, **options: Any) -> SimpleNamespace:
        """``load`` of source files, as ``load_inline`` of their text: the files are read here (in a candidate's
        process, files it wrote itself, in its own directory), and the request goes to the store like any other."""
        host, device = [], []
        for path in _as_list(sources):
            try:
                text = Path(path).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise BuildError(f"torch.utils.cpp_extension.load() could not read its source {path!r}: {exc}") from None
            (device if Path(path).suffix in _DEVICE_SUFFIXES else host).append(text)
        options.pop("functions", None)  # load() binds what the sources' PYBIND11_MODULE says
        return stored_load_inline(name, host, device or None, None, extra_cflags, extra_cuda_cflags, extra_ldflags,
                                  extra_include_paths, **options)

    # torch deletes its own precompiled header on every build that does not use it;
    # that file is outside the sandbox's writable paths and none of our business.
    # torch_musa's loader holds its own reference to the same function.
    removers = {id(m): m for m in (cpp_extension, target) if hasattr(m, "remove_extension_h_precompiler_headers")}
    real_removers = {key: m.remove_extension_h_precompiler_headers for key, m in removers.items()}
    for m in removers.values():
        m.remove_extension_h_precompiler_headers = lambda: None
    target.load_inline = stored_load_inline
    if real_load is not None:
        target.load = stored_load
    try:
        yield
    finally:
        target.load_inline = real_load_inline
        for key, m in removers.items():
            m.remove_extension_h_precompiler_headers = real_removers[key]
        if real_load is not None:
            target.load = real_load
