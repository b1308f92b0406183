"""The trusted build step: check a candidate's build request, compile it apart, check what it links, publish it.

Holds:
    NativeToolchain: how one backend builds (compilers, device sources, precompiled header, allow-list).
    BuildPlan / plan_build: a checked build request and its content address.
    Compile / compile_in_process: how a plan is compiled (here, for trusted local use; the worker
        compiles in a build sandbox, :mod:`kernelgym.executor.builder`).
    StoreBuilder: the step itself, publishing into the store (:mod:`kernelgym.backends.store`).
    BuiltExtension / built_extension: a build request's answer, and reading it from a reply.

The candidate's ``load_inline`` (:func:`kernelgym.backends.native.intercept_load_inline`)
sends the request; everything here runs on the trusted side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.backends.locks import file_lock
from kernelgym.backends.native import (
    _CANONICAL_ACCEPTS,
    _CANONICAL_CUDA_HOST_ACCEPTS,
    CANONICAL_CFLAGS,
    CANONICAL_CUDA_HOST_CFLAGS,
    CANONICAL_LDFLAGS,
    BuildError,
    BuildTimeout,
    ForbiddenSymbolsError,
    _checked_flags,
    beyond_floor,
    floor_stores,
    toolchain_fingerprint,
)
from kernelgym.backends.store import ExtensionStore, StoreRecord, judge_dir
from kernelgym.backends.symbols import ForbiddenSymbol, exported_symbols, forbidden_symbols, imported_symbols

__all__ = ["BuildPlan", "BuiltExtension", "Compile", "NativeToolchain", "StoreBuilder", "built_extension", "compile_in_process",
           "light_device_prelude", "light_device_sources", "plan_build", "slim_device_sources"]

# torch/extension.h in a CUDA unit puts pybind11, Python.h and torch's C++ front end through both of nvcc's front ends;
# kernels and their launchers need what torch/types.h declares (tensors, ATen, factories, dispatch macros), which
# load_inline puts at the top of that unit anyway (cuda.o: 139 -> 52 CPU s, benchmarks/results/cuda-build-levers.md).
_EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"]', re.MULTILINE)
# Names only the full header declares: a source that uses them is compiled as written at once.
_FULL_HEADER_NAMES = re.compile(
    r"\bpy::|pybind11|PYBIND11_|\bPy(?!Torch)[A-Z_][A-Za-z_]|"
    r"\btorch::(nn|jit|optim|data|serialize|python|autograd|cuda|fft|special|nested|sparse|linalg|xpu|mps|enumtype)\b"
)

# A launcher needs less still: tensors and their methods (ATen/core/Tensor.h), the dispatch macros and the
# allocating factories, not ATen's ~2,000 free functions that torch/types.h declares through ATen/ATen.h (a
# level-2 KernelBench answer's unit: 45 -> 23 CPU s, benchmarks/results/cuda-build-levers.md). A unit is
# compiled with this light prelude first when every torch::/at:: name it spells is one the prelude declares.
_LIGHT_FACTORIES = ("empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like")
_LIGHT_NAMES = frozenset({
    *_LIGHT_FACTORIES, "Tensor", "TensorOptions", "ScalarType", "Dtype", "Scalar", "Half", "BFloat16", "IntArrayRef",
    "Device", "DeviceType", "MemoryFormat", "Layout", "optional", "nullopt", "cuda",
})
_QUALIFIED_NAME = re.compile(r"\b(?:torch|at)\s*::\s*(\w+)")
_CONSTANT = re.compile(r"k[A-Z0-9]\w*")  # kFloat32, kCUDA, kContiguousFormat: dtype, device and layout constants
# torch/types.h's own aliases (torch::kFloat32 ...), read from the installed header: the light prelude repeats them.
_TORCH_ALIAS = re.compile(r"^\s*(using Dtype = [\w:]+;|constexpr auto k\w+ = [\w:]+;)\s*$", re.MULTILINE)
# What the full prelude would add that a light unit must not depend on: other torch headers, gradients.
_HEAVY_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](?:torch/(?!extension\.h)|ATen/(?:ATen|Functions)\.h)', re.MULTILINE)

# A compiler killed (out of memory) or a full disk says nothing about the sources: such a failure is not remembered.
_TRANSIENT_FAILURE = re.compile(r"Killed signal terminated|No space left on device|internal compiler error: Killed|Cannot allocate memory")


@dataclass(frozen=True)
class NativeToolchain:
    """How one backend builds ``load_inline`` extensions: what the trusted side needs to check, key and compile them.

    Attributes:
        compilers: compiler executables whose versions enter the build key.
        cuda: whether device sources are allowed (the ``cuda``/``musa`` backends).
        pch_dir: include directory holding the precompiled ``torch/extension.h`` made by
            :func:`ensure_pch` (with ``cuda`` matching this backend), used by canonical-flag builds.
        device_kwargs: the loader's names for device sources and their flags
            (``musa_sources``/``extra_musa_cflags`` for torch_musa).
        key_extra: more key material (the target GPU architectures).
        symbol_backend: whose allow-list of linked symbols applies (default: ``cpp`` without
            device sources, else the device-sources keyword's prefix, ``cuda`` or ``musa``).
        loader: the module whose ``load_inline`` builds (torch's, or torch_musa's).
        slim_device_unit: compile device sources with a lighter prelude first, as written if that fails
            (torch's CUDA headers): the light prelude where it declares every name they use
            (:func:`light_device_sources`), else ``torch/types.h`` in place of ``torch/extension.h``
            (:func:`slim_device_sources`).
    """

    compilers: tuple[str, ...]
    cuda: bool
    pch_dir: Path | None = None
    device_kwargs: tuple[str, str] = ("cuda_sources", "extra_cuda_cflags")
    key_extra: str = ""
    symbol_backend: str | None = None
    loader: str = "torch.utils.cpp_extension"
    slim_device_unit: bool = False

    @property
    def allow_list(self) -> str:
        """The allow-list of linked symbols its extensions are checked against."""
        return self.symbol_backend or (self.device_kwargs[0].split("_")[0] if self.cuda else "cpp")


@dataclass(frozen=True)
class BuildPlan:
    """One checked build request: its content address and the arguments the loader is called with.

    Attributes:
        key: sha256 of the sources, entry points, flags and toolchain (the request as written).
        module: the extension's module name (from the key, never the candidate's).
        arguments: the loader's keyword arguments but ``name`` and ``build_directory`` (JSON values).
        fallback: the arguments of the request as written, compiled when ``arguments`` (its device
            sources with a lighter prelude) do not compile; ``None``: ``arguments`` are the request as written.
    """

    key: str
    module: str
    arguments: dict[str, Any]
    fallback: dict[str, Any] | None = None


@dataclass(frozen=True)
class BuiltExtension:
    """A checked extension in the store, as a build request's answer.

    Attributes:
        key: its content address.
        module: its module name.
        path: the published library (read-only to candidates).
        seconds: wall time of the build or the cache lookup.
        cache_hit: served from the store without compiling.
    """

    key: str
    module: str
    path: Path
    seconds: float
    cache_hit: bool


def _strings(value: Any, what: str) -> list[str]:
    # Requests come from the candidate's process: every field is checked for its type here.
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) for item in items):
        raise BuildError(f"load_inline's {what} must be a string or a list of strings")
    return list(items)


def slim_device_sources(sources: list[str]) -> list[str] | None:
    r"""Device sources with ``#include <torch/extension.h>`` read as ``#include <torch/types.h>``.

    ``None`` when none includes it, or when one names what only the full header declares
    (pybind11, Python's C API, torch's C++ front end): those are compiled as written.
    Lines keep their numbers, so a compiler's messages point where they did.

    Example:
        >>> slim_device_sources(["#include <torch/extension.h>\n__global__ void k() {}"])
        ['#include <torch/types.h>\n__global__ void k() {}']
        >>> slim_device_sources(["#include <torch/extension.h>\nPYBIND11_MODULE(m, m) {}"]) is None
        True
    """
    if not any(_EXTENSION_INCLUDE.search(s) for s in sources) or any(_FULL_HEADER_NAMES.search(s) for s in sources):
        return None
    return [_EXTENSION_INCLUDE.sub("#include <torch/types.h>", s) for s in sources]


@functools.cache
def light_device_prelude() -> tuple[str, ...]:
    """The lines a light device unit starts with (in place of load_inline's ``torch/types.h``, ``cuda.h``,
    ``cuda_runtime.h``): ATen's tensor, dispatch macros, the allocating factories, CUDA's headers,
    and ``namespace torch`` as torch/types.h opens it (``using namespace at`` and its dtype aliases)."""
    from torch.utils.cpp_extension import include_paths

    aliases: list[str] = []
    for root in include_paths():
        header = Path(root) / "torch" / "types.h"
        if header.is_file():
            aliases = _TORCH_ALIAS.findall(header.read_text())
            break
    return ("#include <ATen/core/Tensor.h>", "#include <ATen/Dispatch.h>",
            *(f"#include <ATen/ops/{op}.h>" for op in _LIGHT_FACTORIES),
            "#include <cuda.h>", "#include <cuda_runtime.h>",
            "namespace torch { using namespace at; " + " ".join(aliases) + " }")


def light_device_sources(sources: list[str]) -> list[str] | None:
    r"""Device sources for :func:`light_device_prelude` (``torch/extension.h`` commented out), or ``None``.

    ``None`` when a source names a ``torch::``/``at::`` name the light prelude does not declare, includes another
    torch header (or ATen/ATen.h) itself, or asks for gradients (``requires_grad``: torch's factories and ATen's
    differ there); such sources are compiled as they would be without it. The request's own line numbers are
    not kept: a unit that does not compile light is compiled again as written, and that log is the one reported.

    Example:
        >>> light_device_sources(["#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }"])
        ['// #include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }']
        >>> light_device_sources(["torch::Tensor f(torch::Tensor x) { return torch::relu(x); }"]) is None
        True
    """
    if any(_HEAVY_INCLUDE.search(s) or _FULL_HEADER_NAMES.search(s) or "requires_grad" in s for s in sources):
        return None
    if any(name not in _LIGHT_NAMES and not _CONSTANT.fullmatch(name) for s in sources for name in _QUALIFIED_NAME.findall(s)):
        return None
    return [_EXTENSION_INCLUDE.sub(lambda m: "// " + m.group(0).lstrip(), s) for s in sources]


def plan_build(toolchain: NativeToolchain, request: dict[str, Any]) -> BuildPlan:
    """Check a build request (flags, include paths, device sources) and compute its content address.

    ``request`` holds ``load_inline``'s arguments by the names ``cpp_sources``, ``device_sources``,
    ``functions``, ``extra_cflags``, ``device_cflags``, ``extra_ldflags`` and ``extra_include_paths``.

    Raises:
        BuildError: a flag or argument is not allowed.
    """
    sources_kw, flags_kw = toolchain.device_kwargs
    cpp = _strings(request.get("cpp_sources"), "cpp_sources")
    cu = _strings(request.get("device_sources"), sources_kw)
    if cu and not toolchain.cuda:
        raise BuildError(f"{sources_kw} given, but this backend compiles C++ for the CPU only")
    cflags = _checked_flags(_strings(request.get("extra_cflags"), "extra_cflags"))
    cuda_flags = _checked_flags(_strings(request.get("device_cflags"), flags_kw))
    ldflags = _checked_flags(_strings(request.get("extra_ldflags"), "extra_ldflags"))
    if _strings(request.get("extra_include_paths"), "extra_include_paths"):
        raise BuildError("extra_include_paths are not allowed; write the code inline")
    functions = request.get("functions")
    if isinstance(functions, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items()):
            raise BuildError("load_inline's functions must name strings")
        funcs: list[str] | dict[str, str] = dict(functions)
    else:
        funcs = _strings(functions, "functions")
    pch_dir = toolchain.pch_dir
    # A device build's host flags are only rewritten when a precompiled header pays for it.
    canonical = (set(cflags) <= _CANONICAL_CUDA_HOST_ACCEPTS and pch_dir is not None) if cu else set(cflags) <= _CANONICAL_ACCEPTS
    if canonical and cu:
        cflags = list(CANONICAL_CUDA_HOST_CFLAGS)
    elif canonical:
        cflags = list(CANONICAL_CFLAGS)
        ldflags = sorted(set(ldflags) | set(CANONICAL_LDFLAGS))
    material = [cpp, cu, funcs, cflags, cuda_flags, ldflags, toolchain_fingerprint(toolchain.compilers)]
    key = hashlib.sha256(json.dumps(material + ([toolchain.key_extra] if toolchain.key_extra else []), sort_keys=True).encode()).hexdigest()
    arguments: dict[str, Any] = {
        "cpp_sources": cpp, "functions": funcs or None, "extra_cflags": cflags, "extra_ldflags": ldflags,
        "extra_include_paths": [str(pch_dir)] if canonical and pch_dir else None,
        **({sources_kw: cu, flags_kw: cuda_flags} if cu else {}),
    }
    light = light_device_sources(cu) if cu and toolchain.slim_device_unit and sources_kw == "cuda_sources" else None
    if light is not None:
        # load_inline's implicit headers are off: the binding unit gets its torch/extension.h back, first as before.
        return BuildPlan(key, f"kg_{key[:20]}", {**arguments, "no_implicit_headers": True,
                                                 "cpp_sources": ["#include <torch/extension.h>", *cpp],
                                                 sources_kw: [*light_device_prelude(), *light]}, fallback=arguments)
    slim = slim_device_sources(cu) if cu and toolchain.slim_device_unit else None
    if slim is not None:
        return BuildPlan(key, f"kg_{key[:20]}", {**arguments, sources_kw: slim}, fallback=arguments)
    return BuildPlan(key, f"kg_{key[:20]}", arguments)


Compile = Callable[[BuildPlan, Path, float], None]
"""Compiles a plan into a fresh directory within a number of seconds (raises :class:`BuildError`)."""


def compile_in_process(load_inline: Callable[..., Any]) -> Compile:
    """A :data:`Compile` that calls ``load_inline`` here (which also imports the result here): for trusted local use."""

    def compile_here(plan: BuildPlan, directory: Path, timeout: float) -> None:
        try:
            load_inline(name=plan.module, build_directory=str(directory), verbose=False, **plan.arguments)
        except RuntimeError as exc:
            raise BuildError("native build failed", log=str(exc)) from None

    return compile_here


class StoreBuilder:
    """The trusted build step: check a request, compile it in a directory of its own, check what it links, publish it.

    Args:
        build_root: the store's build root (``<cache>/builds``).
        toolchain: how this backend builds.
        compile: how a plan is compiled (the worker passes a sandboxed subprocess;
            :func:`compile_in_process` with the toolchain's loader when none is given).
        floor_loader: the ``load_inline`` that builds the toolchain floor (default torch's own).

    A request whose extension is in the store already (its bytes still hashing to the judge's
    record) compiles nothing; nor does one that did not compile before: its failure is recorded
    (:meth:`~kernelgym.backends.store.ExtensionStore.record_failure`) and answered again with the
    same compiler log. A build stopped for time is not recorded (the next request tries again). The symbol allow-list is applied on every request, with the
    concerns the request's rule preset admits, from the symbols recorded at publication.
    """

    def __init__(self, build_root: Path, toolchain: NativeToolchain, compile: Compile | None = None,
                 floor_loader: Callable[..., Any] | None = None) -> None:
        self.build_root = build_root
        self.toolchain = toolchain
        self.store = ExtensionStore(build_root)
        self.compile = compile if compile is not None else compile_in_process(importlib.import_module(toolchain.loader).load_inline)
        self._floor_loader = floor_loader

    def build(self, request: dict[str, Any], admitted: Collection[str] = (), timeout: float = 900.0) -> BuiltExtension:
        """Serve one build request (see :func:`plan_build` for its fields).

        Raises:
            BuildError: the request is not allowed or does not compile.
            ForbiddenSymbolsError: the extension links against symbols off the allow-list.
        """
        plan = plan_build(self.toolchain, request)
        start = time.perf_counter()
        with file_lock(self.build_root / "locks" / f"{plan.key[:32]}.lock"):
            record = self.store.lookup(plan.key)
            hit = record is not None
            failure = self.store.failure(plan.key) if record is None else None
            if failure is not None:
                raise BuildError(failure.message, log=failure.log)
            if record is None:
                record = self._compile_and_publish(plan, max(timeout - (time.perf_counter() - start), 1.0))
            else:  # a use, for the cache's least-recently-used eviction
                with contextlib.suppress(OSError):
                    os.utime(self.store.library(plan.key, plan.module))
        allow_list = self.toolchain.allow_list
        findings = [f for f in forbidden_symbols(list(record.imported), allow_list, list(record.exported)) if f.concern not in admitted]
        findings = beyond_floor(findings, allow_list, floor_stores(self.build_root.parent)[0], self._floor_loader)
        if findings:
            raise ForbiddenSymbolsError(findings)
        return BuiltExtension(plan.key, plan.module, self.store.library(plan.key, plan.module), time.perf_counter() - start, hit)

    def settled(self, request: dict[str, Any]) -> bool:
        """Whether the store answers ``request`` without compiling (built, remembered as failed, or refused at once)."""
        try:
            plan = plan_build(self.toolchain, request)
        except BuildError:
            return True
        return self.store.lookup(plan.key) is not None or self.store.failure(plan.key) is not None

    def serve(self, request: dict[str, Any], timeout: float = 900.0, admitted: Collection[str] = ()) -> dict[str, Any]:
        """:meth:`build` with its answer (or failure) as a JSON reply for the candidate's process
        (a :data:`~kernelgym.verifier.channel.BuildService` once ``admitted`` is bound)."""
        try:
            built = self.build(request, admitted, timeout)
        except ForbiddenSymbolsError as exc:
            return {"ok": False, "error": "illegal", "findings": [dataclasses.asdict(f) for f in exc.findings]}
        except BuildError as exc:
            return {"ok": False, "error": "build", "message": str(exc), "log": exc.log}
        return {"ok": True, "key": built.key, "module": built.module, "path": str(built.path),
                "seconds": built.seconds, "cache_hit": built.cache_hit}

    def _compile_and_publish(self, plan: BuildPlan, timeout: float) -> StoreRecord:
        scratch = judge_dir(self.build_root.parent) / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{plan.key[:12]}-", dir=scratch) as directory:
            try:
                library = self._compile(plan, Path(directory), timeout)
            except BuildTimeout:
                raise
            except BuildError as exc:  # the sources do not compile: the same request gets the same log from now on
                if not _TRANSIENT_FAILURE.search(exc.log):
                    self.store.record_failure(plan.key, str(exc), exc.log)
                raise
            try:
                imported, exported = imported_symbols(library), exported_symbols(library)
            except (OSError, subprocess.SubprocessError) as exc:
                raise BuildError(f"the built extension's symbols could not be read: {exc}") from None
            return self.store.publish(plan.key, plan.module, library, imported, exported)

    def _compile(self, plan: BuildPlan, directory: Path, timeout: float) -> Path:
        deadline = time.perf_counter() + timeout
        try:
            self.compile(plan, directory, timeout)
        except BuildError:
            left = deadline - time.perf_counter()
            if plan.fallback is None or left < 1.0:  # a lighter build that ran out of time says so
                raise
            # Lighter, it did not compile: the request as written, whose log is the one reported.
            shutil.rmtree(directory)
            os.mkdir(directory)
            self.compile(dataclasses.replace(plan, arguments=plan.fallback, fallback=None), directory, left)
        # torch names the library `<name>_v<N>.so` when this process loaded a `<name>` before: take the newest.
        built = sorted(directory.glob(f"{plan.module}*.so"), key=lambda p: p.stat().st_mtime)
        if not built:
            raise BuildError("the build produced no library")
        return built[-1]


def built_extension(reply: dict[str, Any]) -> BuiltExtension:
    """The answer to a build request, from the trusted side's reply (:meth:`StoreBuilder.serve`).

    Raises:
        BuildError: the build failed or was refused, or the reply is malformed.
        ForbiddenSymbolsError: the extension links against symbols off the allow-list.
    """
    if not isinstance(reply, dict):
        raise BuildError("the judge's build service sent no answer")
    if reply.get("ok"):
        return BuiltExtension(str(reply["key"]), str(reply["module"]), Path(reply["path"]), float(reply["seconds"]),
                              bool(reply["cache_hit"]))
    if reply.get("error") == "illegal":
        raise ForbiddenSymbolsError([ForbiddenSymbol(**f) for f in reply.get("findings", [])])
    raise BuildError(str(reply.get("message", "native build failed")), log=str(reply.get("log", "")))
