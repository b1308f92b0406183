"""The judge's store of built extensions (hash-checked records) and the build locks (held by live processes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.backends import locks, native, trusted_build
from kernelgym.backends.locks import file_lock
from kernelgym.backends.native import BuildError, BuildTimeout
from kernelgym.backends.store import ExtensionStore, judge_dir
from kernelgym.backends.trusted_build import BuildPlan, NativeToolchain, StoreBuilder, plan_build


def _published(tmp_path: Path) -> tuple[ExtensionStore, Path]:
    store = ExtensionStore(tmp_path / "cache" / "builds")
    built = tmp_path / "built.so"
    built.write_bytes(b"\x7fELF library bytes")
    record = store.publish("ab" * 32, "kg_abab", built, ["malloc"], ["PyInit_kg_abab"])
    return store, store.library(record.key, record.module)


def test_a_published_entry_is_found_while_its_bytes_hash_to_the_judges_record(tmp_path: Path) -> None:
    store, library = _published(tmp_path)
    assert store.lookup("ab" * 32) is not None and store.verified(library) is not None
    assert store.record_path("ab" * 32).parent == judge_dir(tmp_path / "cache") / "store"  # outside the cache
    os.chmod(library, 0o644)
    library.write_bytes(b"\x7fELF rewritten by someone")
    assert store.lookup("ab" * 32) is None  # rebuilt on the next request
    assert store.verified(library) is None  # and illegal if mapped
    assert store.verified(tmp_path / "built.so") is None  # not a store entry at all


def test_build_requests_are_checked_on_the_trusted_side() -> None:
    toolchain = NativeToolchain(compilers=("c++",), cuda=False)
    plan = plan_build(toolchain, {"cpp_sources": ["int f();"], "functions": ["f"], "extra_cflags": ["-O3"]})
    assert plan.module == f"kg_{plan.key[:20]}" and plan.arguments["extra_cflags"] == list(native.CANONICAL_CFLAGS)
    for bad in ({"cpp_sources": ["x"], "extra_cflags": ["-fplugin=/tmp/p.so"]}, {"cpp_sources": ["x"], "extra_include_paths": ["/"]},
                {"cpp_sources": ["x"], "device_sources": ["__global__ void k() {}"]}, {"cpp_sources": [1]}):
        with pytest.raises(BuildError):
            plan_build(toolchain, bad)


KERNELBENCH_STYLE_CU = """#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {  // what PyTorch's ReLU does, in one kernel
    auto y = torch::empty_like(x);
    relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
# What only torch/types.h declares (torch's factories, unlike ATen's, take requires_grad): slimmed, never light.
GRAD_CU = KERNELBENCH_STYLE_CU.replace("torch::empty_like(x)", "torch::empty_like(x, x.options().requires_grad(false))")
SLIMMED_CU = GRAD_CU.replace("#include <torch/extension.h>", "#include <torch/types.h>")
# A KernelBench-style answer as kernelgym's bundled ones are written: CUDA's and c10's headers only, torch's aliases.
BUNDLED_STYLE_CU = """#include <c10/cuda/CUDAStream.h>

__global__ void scale_kernel(const float* x, float* y, float s, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i];
}

torch::Tensor scale_cuda(torch::Tensor x, double s) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a CUDA float32 tensor");
    auto y = torch::empty({x.size(0), x.size(1)}, x.options().dtype(torch::kFloat32));
    scale_kernel<<<(x.numel() + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(s), x.numel());
    return y;
}
"""
_CUDA = NativeToolchain(compilers=("c++", "nvcc"), cuda=True, key_extra="9.0")
_CUDA_SLIM = NativeToolchain(compilers=("c++", "nvcc"), cuda=True, key_extra="9.0", slim_device_unit=True)


def _cuda_request(cu: str) -> dict:
    return {"cpp_sources": ["torch::Tensor relu_cuda(torch::Tensor x);"], "device_sources": [cu], "functions": ["relu_cuda"]}


@pytest.mark.parametrize("cu", [KERNELBENCH_STYLE_CU, BUNDLED_STYLE_CU])
def test_a_device_unit_that_names_only_tensors_and_factories_is_compiled_with_the_light_prelude_first(cu: str) -> None:
    as_written = plan_build(_CUDA, _cuda_request(cu))
    plan = plan_build(_CUDA_SLIM, _cuda_request(cu))
    # The same request, the same content address: only how it is compiled first differs.
    assert plan.key == as_written.key and plan.module == as_written.module
    assert plan.fallback == as_written.arguments and as_written.fallback is None
    prelude = list(trusted_build.light_device_prelude())
    assert plan.arguments["cuda_sources"] == [*prelude, cu.replace("#include <torch/extension.h>", "// #include <torch/extension.h>")]
    assert "#include <torch/types.h>" not in "\n".join(plan.arguments["cuda_sources"])
    # load_inline adds no header of its own now: the binding unit gets torch/extension.h first, as load_inline puts it.
    assert plan.arguments["no_implicit_headers"] is True
    assert plan.arguments["cpp_sources"] == ["#include <torch/extension.h>", *as_written.arguments["cpp_sources"]]
    assert "constexpr auto kFloat32 = at::kFloat;" in prelude[-1]  # torch's own aliases, read from torch/types.h


@pytest.mark.parametrize("cu", [
    KERNELBENCH_STYLE_CU.replace("torch::empty_like(x)", "torch::relu(x)"),  # an ATen function beyond the factories
    KERNELBENCH_STYLE_CU.replace("torch::empty_like(x)", "std::get<0>(at::kthvalue(x, 1))"),  # a function, not a kConstant
    "#include <ATen/ATen.h>\n" + KERNELBENCH_STYLE_CU,  # all of ATen, included by the answer itself
    "#include <torch/torch.h>\n" + BUNDLED_STYLE_CU,
])
def test_a_device_unit_that_needs_more_than_the_light_prelude_is_not_compiled_light(cu: str) -> None:
    plan = plan_build(_CUDA_SLIM, _cuda_request(cu))
    assert "#include <ATen/core/Tensor.h>" not in plan.arguments["cuda_sources"] and "no_implicit_headers" not in plan.arguments


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compiles here without a GPU)")
def test_the_light_prelude_compiles_a_kernelbench_style_unit_with_nvcc(tmp_path: Path) -> None:
    from torch.utils.cpp_extension import include_paths

    # Both styles in one unit; c10's CUDA headers need a CUDA build of torch, so the launch takes the default stream.
    bundled = BUNDLED_STYLE_CU.replace("#include <c10/cuda/CUDAStream.h>\n", "").replace("c10::cuda::getCurrentCUDAStream()", "0")
    plan = plan_build(_CUDA_SLIM, _cuda_request(KERNELBENCH_STYLE_CU + bundled))
    unit = tmp_path / "cuda.cu"
    unit.write_text("\n".join(plan.arguments["cuda_sources"]))
    command = ["nvcc", "-c", str(unit), "-o", str(tmp_path / "cuda.o"), "-std=c++17", "--expt-relaxed-constexpr",
               "-gencode=arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC", "-DTORCH_EXTENSION_NAME=m",
               *(arg for p in include_paths() for arg in ("-isystem", p))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_device_unit_including_torch_extension_h_is_compiled_with_torch_types_h_first() -> None:
    as_written = plan_build(_CUDA, _cuda_request(GRAD_CU))
    plan = plan_build(_CUDA_SLIM, _cuda_request(GRAD_CU))
    assert plan.key == as_written.key and plan.module == as_written.module
    assert plan.fallback == as_written.arguments and as_written.fallback is None
    (slim,) = plan.arguments["cuda_sources"]
    assert slim == SLIMMED_CU
    assert slim.count("\n") == GRAD_CU.count("\n")  # compiler messages keep their line numbers
    assert {k: v for k, v in plan.arguments.items() if k != "cuda_sources"} == {
        k: v for k, v in as_written.arguments.items() if k != "cuda_sources"}


@pytest.mark.parametrize("cu", [
    SLIMMED_CU,  # slim already
    GRAD_CU + "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"relu\", &relu_cuda); }\n",
    GRAD_CU + "void f(py::object o) {}\n",
    KERNELBENCH_STYLE_CU + "torch::nn::Linear layer(4, 4);\n",
    KERNELBENCH_STYLE_CU + "static PyObject* g(PyObject* self) { return self; }\n",
])
def test_a_device_unit_that_needs_the_full_header_or_does_not_include_it_is_compiled_as_written(cu: str) -> None:
    plan = plan_build(_CUDA_SLIM, _cuda_request(cu))
    assert plan.fallback is None and plan.arguments["cuda_sources"] == [cu]


def _recording_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiles: dict[str, bool | str]) -> tuple[StoreBuilder, list]:
    """A builder whose compiler succeeds on the sources marked ``True`` in ``compiles`` (``"timeout"``: uses up its
    budget and fails); the calls it got, named by how the unit was compiled (light, slim or as written)."""
    calls: list[tuple[str, Path, list[str]]] = []
    monkeypatch.setattr(trusted_build, "imported_symbols", lambda _p: ["malloc"])
    monkeypatch.setattr(trusted_build, "exported_symbols", lambda _p: ["PyInit_kg"])

    def compile(plan: BuildPlan, directory: Path, timeout: float) -> None:
        source = plan.arguments["cuda_sources"][-1]  # the answer's own unit, after any prelude
        way = "light" if plan.arguments.get("no_implicit_headers") else "slim" if "torch/types.h" in source else "as written"
        calls.append((way, directory, sorted(p.name for p in directory.iterdir())))
        (directory / "build.ninja").write_text("left by this attempt")
        outcome = compiles[way]
        if outcome == "timeout":
            time.sleep(timeout)
            raise BuildTimeout(f"the build took longer than its {timeout:.0f} s budget and was stopped")
        if outcome == "killed":
            raise BuildError("native build failed", log="c++: fatal error: Killed signal terminated program cc1plus")
        if not outcome:
            raise BuildError("native build failed", log=f"error in the {way} unit")
        (directory / f"{plan.module}.so").write_bytes(b"\x7fELF")

    return StoreBuilder(tmp_path / "builds", _CUDA_SLIM, compile), calls


@pytest.mark.parametrize(("cu", "first"), [(GRAD_CU, "slim"), (KERNELBENCH_STYLE_CU, "light")])
def test_a_lighter_device_unit_that_fails_is_compiled_as_written_afresh(cu: str, first: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {first: False, "as written": True})
    built = builder.build(_cuda_request(cu))
    assert [c[0] for c in calls] == [first, "as written"] and not built.cache_hit
    assert calls[1][1] == calls[0][1] and calls[1][2] == []  # the same directory, emptied of the first attempt
    assert builder.build(_cuda_request(cu)).cache_hit and len(calls) == 2


@pytest.mark.parametrize(("cu", "first"), [(GRAD_CU, "slim"), (KERNELBENCH_STYLE_CU, "light"), (BUNDLED_STYLE_CU, "light")])
def test_a_lighter_device_unit_that_compiles_is_compiled_once(cu: str, first: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {first: True, "as written": True})
    builder.build(_cuda_request(cu))
    assert [c[0] for c in calls] == [first]


@pytest.mark.parametrize(("cu", "first"), [(GRAD_CU, "slim"), (KERNELBENCH_STYLE_CU, "light")])
def test_an_answer_that_compiles_in_neither_way_gets_the_log_of_its_source_as_written(cu: str, first: str, tmp_path: Path,
                                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {first: False, "as written": False})
    reply = builder.serve(_cuda_request(cu.replace("return y;", "return undefined_name;")))
    assert reply == {"ok": False, "error": "build", "message": "native build failed", "log": "error in the as written unit"}
    assert [c[0] for c in calls] == [first, "as written"]


def test_a_slim_device_unit_that_runs_out_of_time_is_not_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {"slim": "timeout", "as written": True})
    with pytest.raises(BuildError, match="longer than its 2 s budget"):
        builder.build(_cuda_request(GRAD_CU), timeout=2.0)
    assert [c[0] for c in calls] == ["slim"]


def test_a_request_that_did_not_compile_is_answered_again_with_its_log_without_compiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {"light": False, "as written": False})
    request = _cuda_request(KERNELBENCH_STYLE_CU.replace("return y;", "return undefined_name;"))
    first = builder.serve(request)
    assert len(calls) == 2 and first["error"] == "build"
    # Another builder over the same store (another worker, a later run) answers it from the judge's record.
    other, other_calls = _recording_builder(tmp_path, monkeypatch, {"light": True, "as written": True})
    assert other.serve(request) == first and other_calls == []
    assert builder.serve(request) == first and len(calls) == 2


@pytest.mark.parametrize("outcome", ["timeout", "killed"])
def test_a_build_stopped_for_time_or_killed_is_tried_again(outcome: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builder, calls = _recording_builder(tmp_path, monkeypatch, {"light": outcome, "as written": outcome})
    with pytest.raises(BuildError):
        builder.build(_cuda_request(KERNELBENCH_STYLE_CU), timeout=1.0)
    tried = len(calls)
    with pytest.raises(BuildError):
        builder.build(_cuda_request(KERNELBENCH_STYLE_CU), timeout=1.0)
    assert len(calls) == 2 * tried and not list(builder.store.records.glob("*.failed.json"))


_HOLD = "import fcntl, sys, time\nh = open(sys.argv[1], 'a')\nfcntl.flock(h, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"


def test_a_killed_holder_releases_its_build_lock_at_once(tmp_path: Path) -> None:
    lock = tmp_path / "locks" / "key.lock"
    lock.parent.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        start = time.monotonic()
        with file_lock(lock):
            assert time.monotonic() - start < 2.0
    finally:
        holder.kill()
        holder.wait()


def test_a_long_wait_names_the_process_holding_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(locks, "_LOCK_PATIENCE_SECONDS", 0.3)
    lock = tmp_path / "key.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD.replace("time.sleep(600)", "time.sleep(1.5)"), str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with file_lock(lock):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert f"held by PID {holder.pid}" in capsys.readouterr().err


def test_lock_files_are_write_only_for_their_owner_even_those_made_before(tmp_path: Path) -> None:
    """A candidate may read the cache; a lock it could open (any mode) it could hold. Old readable locks are fixed on use."""
    fresh, old = tmp_path / "locks" / "fresh.lock", tmp_path / "old.lock"
    old.write_text("")
    old.chmod(0o644)
    for lock in (fresh, old):
        with file_lock(lock):
            pass
        assert lock.stat().st_mode & 0o777 == locks.LOCK_MODE == 0o200
    link = tmp_path / "link.lock"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError), file_lock(link):  # no link followed
        pass
    assert not (tmp_path / "elsewhere").exists()
