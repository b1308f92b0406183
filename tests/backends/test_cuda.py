"""The ``cuda`` backend and the GPU helpers it shares, on a machine without a GPU.

What needs a GPU (building, checking, timing) is in ``tests/gpu``; here: the
clear refusal without CUDA, the bandwidth table, the L2-flush size, worker
pinning, and the timing loop driven by a small recording timer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from kernelgym import Verifier
from kernelgym.backends import Backend, base, get_backend, register_backend
from kernelgym.backends.cuda import (
    FALLBACK_BANDWIDTH_GBS,
    MIN_FLUSH_BYTES,
    GpuBackend,
    l2_flush_bytes,
    peak_bandwidth_gbs,
    pinned_device,
)
from kernelgym.errors import BackendUnavailableError
from kernelgym.executor import LocalExecutor, PoolSettings

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")


@no_cuda
def test_cuda_backend_refuses_clearly_without_a_gpu() -> None:
    reason = get_backend("cuda").unavailable_reason()
    assert reason is not None and "CUDA" in reason
    with pytest.raises(BackendUnavailableError, match="'cuda' cannot run here.*CUDA"):
        Verifier(backend="cuda")


@no_cuda
def test_the_refusal_and_the_gpu_count_import_no_torch_in_the_caller() -> None:
    """A new ``kernelgym eval`` starts its workers sooner: torch's import took 3-5 s of its first verdict on an H100."""
    import subprocess
    import sys

    code = ("import sys\nfrom kernelgym import Verifier\nfrom kernelgym.errors import BackendUnavailableError\n"
            "try:\n    Verifier(backend='cuda')\nexcept BackendUnavailableError as exc:\n    print(exc)\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.splitlines() == [f"backend 'cuda' cannot run here: {get_backend('cuda').unavailable_reason()}", "no torch"]


def test_the_callers_gpu_count_follows_the_visible_devices_as_torch_counts_them() -> None:
    from kernelgym.backends.probe import visible_count

    assert [visible_count(v, 4) for v in (None, "", "3", "2,3", "1,7,2", "0,0", "1,-1,2", " 1 , 2")] == [4, 0, 1, 2, 1, 0, 1, 2]
    assert visible_count("GPU-5e9c1a", 4) is None  # named by UUID: only the CUDA runtime can count them


def test_the_caller_reads_torchs_build_without_importing_it() -> None:
    from kernelgym.backends.probe import torch_build

    assert torch_build() == (torch.__version__, torch.version.cuda)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", 4800.0),
        ("NVIDIA H100 80GB HBM3", 3350.0),
        ("NVIDIA H100 PCIe", 2000.0),
        ("NVIDIA GH200 480GB", 4900.0),
        ("NVIDIA A100-SXM4-80GB", 2039.0),
        ("An Unknown Accelerator", FALLBACK_BANDWIDTH_GBS),
    ],
)
def test_peak_bandwidth_reads_the_device_name(name: str, expected: float) -> None:
    assert peak_bandwidth_gbs(name) == expected


def test_l2_flush_buffer_is_at_least_twice_the_l2() -> None:
    for l2 in (0, 40 * 1024**2, 50 * 1024**2, 96 * 1024**2, 300 * 1024**2):
        size = l2_flush_bytes(l2)
        assert size >= 2 * l2 and size >= MIN_FLUSH_BYTES


def test_workers_map_round_robin_onto_the_callers_devices() -> None:
    assert [pinned_device(i, None, 2) for i in range(4)] == ["0", "1", "0", "1"]
    assert [pinned_device(i, "3, 5", 2) for i in range(3)] == ["3", "5", "3"]
    assert pinned_device(0, "GPU-7f2c", 1) == "GPU-7f2c"


def test_worker_environment_pins_one_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    backend = get_backend("cuda")
    assert backend.worker_environment(1)["CUDA_VISIBLE_DEVICES"] == "5"
    assert "CUDA_VISIBLE_DEVICES" not in backend.worker_environment(None)


def test_build_workers_see_no_gpu_and_build_for_the_judges_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    env = get_backend("cuda").build_worker_environment()
    assert env == {"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": "9.0"}


def test_build_hooks_are_a_context_manager(tmp_path: Any) -> None:
    from kernelgym.backends.base import KernelTracker

    hooks = get_backend("cuda").build_hooks(tmp_path, KernelTracker(), [])
    assert hasattr(hooks, "__enter__") and hasattr(hooks, "__exit__")


def test_gpu_backends_lift_the_address_space_limit() -> None:
    assert get_backend("cuda").address_space_limit_ok is False
    assert isinstance(get_backend("cuda"), GpuBackend)


class RecordingBackend(Backend):
    """A host backend whose poisoning, timer and synchronization note what happens, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.signatures: list[Any] = []

    def poison_memory(self, signature: Any = None, fill: bool = True) -> None:
        self.log.append("poison" if fill else "prepare")
        self.signatures.append(signature)

    def synchronize(self) -> None:
        self.log.append("sync")

    def call_timer(self) -> Any:
        backend = self

        class Timer:
            def flush(self) -> None:
                backend.log.append("flush")

            def start(self) -> None:
                backend.log.append("start")

            def stop(self) -> None:
                backend.log.append("stop")

            def settle(self) -> float:
                backend.log.append("settle")
                return 0.0

            def elapsed_ms(self) -> float:
                return 0.5

        return Timer()


def test_every_call_is_made_the_same_way_with_flush_and_poison_outside_the_timed_region() -> None:
    from kernelgym.backends import KernelTracker
    from kernelgym.verifier.candidate_side import run_call

    backend = RecordingBackend()
    result = torch.full((3,), 3.0)

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            backend.log.append("forward")
            return result  # defined values, made outside the call (uninitialized memory may hold NaN, which equals nothing)

    taken = [torch.full((3,), 7.0)]
    leaves, reply = run_call(Model(), [torch.ones(3)], backend, KernelTracker(), False, False, take=taken)
    # The device settles after the end event, then the outputs are taken at once (and synchronized).
    assert backend.log == ["poison", "flush", "start", "forward", "stop", "settle", "sync"]
    assert reply["ms"] == 0.5 and reply["ops"] == [] and reply["leaves"][0]["shape"] == [3] and reply["pending_ms"] == 0.0
    assert torch.equal(taken[0], torch.full((3,), 3.0)) and torch.equal(taken[0], leaves[0])
    assert len(leaves) == 1
    # Poisoning is keyed by what the call is: the same shapes give the same signature, others or training another.
    run_call(Model(), [torch.ones(3)], backend, KernelTracker(), False, False)
    run_call(Model(), [torch.ones(4)], backend, KernelTracker(), False, False)
    run_call(Model(), [torch.ones(4)], backend, KernelTracker(), True, False)
    first, same, other_shape, training = backend.signatures
    assert first == same
    assert len({first, other_shape, training}) == 3
    # The judge's own reference calls: the allocator prepared for the signature, nothing filled, timed the same way.
    backend.log.clear()
    run_call(Model(), [torch.ones(3)], backend, KernelTracker(), False, False, python_guard=False, poison=False)
    assert backend.log == ["prepare", "flush", "start", "forward", "stop", "settle"]


class FakeAllocatorApi:
    """The parts of ``torch.cuda`` that poisoning uses, over a host buffer standing in for device memory."""

    def __init__(self) -> None:
        self.memory = torch.zeros(4096, dtype=torch.uint8)
        self.emptied = 0
        # One segment of device 0: an allocated block, then a free one; a free block of device 1; an expandable segment.
        self.segments = [
            {"device": 0, "is_expandable": False, "blocks": [
                {"address": 0, "size": 1024, "state": "active_allocated"},
                {"address": 1024, "size": 1024, "state": "inactive"},
                {"address": 2048, "size": 512, "state": "active_pending_free"}]},
            {"device": 1, "is_expandable": False, "blocks": [{"address": 2560, "size": 512, "state": "inactive"}]},
            {"device": 0, "is_expandable": True, "blocks": [{"address": 3072, "size": 1024, "state": "inactive"}]},
        ]

    def empty_cache(self) -> None:
        self.emptied += 1

    def memory_snapshot(self) -> list[dict[str, Any]]:
        return self.segments

    def current_device(self) -> int:
        return 0

    def memory_allocated(self) -> int:
        return 0

    def mem_get_info(self) -> tuple[int, int]:
        return 8192, 8192

    def synchronize(self) -> None:
        pass


def test_gpu_poisoning_fills_every_free_block_in_place_and_empties_the_cache_only_when_the_signature_changes() -> None:
    api = FakeAllocatorApi()

    class FakeGpu(GpuBackend):
        def api(self) -> Any:
            return api

        def device(self) -> torch.device:
            return torch.device("cpu")

        def device_span(self, address: int, size: int) -> torch.Tensor:
            return api.memory[address:address + size]

    backend = FakeGpu()
    backend.poison_memory(("shapes", False, False))
    assert api.emptied == 1
    filled = (api.memory == 0xFF).nonzero().flatten()
    # Only device 0's free block of an ordinary segment: not blocks in use, not another device's, not an expandable segment.
    assert filled.min().item() == 1024 and filled.max().item() == 2047 and len(filled) == 1024
    # 0xFF in every byte is NaN in every floating format.
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        assert api.memory[1024:2048].view(dtype).isnan().all()
    api.memory[1024:2048] = 7  # a stale result left in the free block by the call
    backend.poison_memory(("shapes", False, False))
    assert api.emptied == 1 and (api.memory[1024:2048] == 0xFF).all()
    backend.poison_memory(("other shapes", False, False))
    assert api.emptied == 2
    # The judge's own reference calls: the allocator prepared for a new signature, nothing filled.
    api.memory[1024:2048] = 7
    backend.poison_memory(("other shapes", False, False), fill=False)
    assert api.emptied == 2 and (api.memory[1024:2048] == 7).all()
    backend.poison_memory(("third shapes", False, False), fill=False)
    assert api.emptied == 3 and (api.memory[1024:2048] == 7).all()


class TwoGpuBackend(Backend):
    """A backend that claims two devices, to see how the local executor places workers."""

    def device_count(self) -> int:
        return 2


@pytest.fixture
def two_gpu_backend() -> Iterator[str]:
    register_backend("test-two-gpus")(TwoGpuBackend)
    yield "test-two-gpus"
    base._REGISTRY.remove("test-two-gpus")
    base._INSTANCES.pop("test-two-gpus", None)


@pytest.mark.usefixtures("two_gpu_backend")
def test_local_executor_starts_one_pinned_worker_per_gpu(tmp_path: Any) -> None:
    executor = LocalExecutor(PoolSettings(backend="test-two-gpus", cache_dir=tmp_path))
    try:
        assert executor.num_workers == 2
        assert sorted(w.device_index for w in executor._judges.idle) == [0, 1]
    finally:
        executor.close()
    shared = LocalExecutor(PoolSettings(backend="test-two-gpus", num_workers=3, cache_dir=tmp_path))
    try:
        assert sorted(w.device_index for w in shared._judges.idle) == [0, 0, 1]
    finally:
        shared.close()
    cpu = LocalExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=tmp_path))
    try:
        assert [w.device_index for w in cpu._judges.idle] == [None]
    finally:
        cpu.close()


class _RecordingLoader:
    """Stands in for torch.utils.cpp_extension: records the build it is asked for, builds nothing."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def load_inline(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        raise RuntimeError("not built here")


@pytest.mark.parametrize(("pch", "expected_cflags"), [(True, []), (False, ["-O3"])])
def test_cuda_binding_unit_shares_the_precompiled_header(tmp_path: Any, pch: bool, expected_cflags: list[str]) -> None:
    from kernelgym.backends.native import BuildError, intercept_load_inline

    loader = _RecordingLoader()
    pch_dir = tmp_path / "pch" if pch else None
    with intercept_load_inline(
        tmp_path, base.KernelTracker(), [], compilers=("c++",), cuda=True, pch_dir=pch_dir, extension_module=loader
    ), pytest.raises(BuildError):
        loader.load_inline(name="x", cpp_sources="int f();", cuda_sources="__global__ void k() {}",
                           functions=["f"], extra_cflags=["-O3"])
    (call,) = loader.calls
    assert call["extra_cflags"] == expected_cflags
    assert call["extra_include_paths"] == ([str(pch_dir)] if pch else None)


class _RecordingDeviceModule:
    """A stand-in for ``torch.cuda``: events and the spin kernel write to one log."""

    def __init__(self, log: list[str], with_sleep: bool = True) -> None:
        self.log = log
        if with_sleep:
            self._sleep = lambda cycles: log.append(f"sleep {cycles}")

    def Event(self, enable_timing: bool = False) -> Any:  # noqa: N802 (the device module's own name)
        log = self.log

        class Event:
            def record(self, stream: Any = None) -> None:
                log.append("record")

        return Event()

    def current_stream(self) -> None:
        return None


class _RecordingBuffer:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def zero_(self) -> None:
        self.log.append("zero")


@pytest.mark.parametrize("with_sleep", [True, False])
def test_the_lead_in_is_queued_before_the_flush_and_the_start_event(with_sleep: bool) -> None:
    from kernelgym.backends.cuda import EventTimer

    log: list[str] = []
    timer = EventTimer(_RecordingDeviceModule(log, with_sleep), _RecordingBuffer(log), lead_in_cycles=1_980_000)
    timer.flush()
    timer.start()
    assert log == (["sleep 1980000"] if with_sleep else []) + ["zero", "record"]
