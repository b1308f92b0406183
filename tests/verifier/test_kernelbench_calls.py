"""KernelBench's timing loop as the candidate's process runs it (kernelgym.verifier.kernelbench_calls), on the host,
and with a stand-in device module: its counts, the call whose output is kept, what each counted call reports."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernelgym.backends import get_backend
from kernelgym.verifier import kernelbench_calls as kc


class _Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.grad_enabled: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.grad_enabled.append(torch.is_grad_enabled())
        return x + self.calls


def test_on_a_host_the_loop_counts_kernelbench_s_calls_and_keeps_the_call_asked_for() -> None:
    model, kept = _Counting(), []
    with torch.no_grad():  # the loop turns autograd on itself, as KernelBench's timing runs outside its no_grad
        times, pending = kc.kernelbench_calls(model, [torch.zeros(4)], get_backend("cpp"), 5, 2, kept.append)
    assert model.calls == kc.KERNELBENCH_WARMUP + kc.KERNELBENCH_DISCARDED + 5 and all(model.grad_enabled)
    assert len(times) == len(pending) == 5 and all(t > 0 for t in times) and pending == [0.0] * 5
    # call 2 counted from 0 with the discarded one: the warm-up's 3 calls, then calls 0, 1, 2
    assert len(kept) == 1 and torch.equal(kept[0], torch.full((4,), float(kc.KERNELBENCH_WARMUP + 3)))


class _Event:
    """A stand-in device event: its time is the host clock's when recorded."""

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.at = 0.0

    def record(self) -> None:
        self.at = kc._perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        return (end.at - self.at) * 1e3


def test_on_a_device_each_call_is_timed_between_events_after_the_l2_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    emptied = []
    api = SimpleNamespace(Event=_Event, empty_cache=lambda: emptied.append(True))
    backend = SimpleNamespace(device_type="cuda", device=lambda: torch.device("cpu"), api=lambda: api,
                              synchronize=lambda: None)
    flushes = []
    real_empty = torch.empty
    monkeypatch.setattr(kc, "_FLUSH_SHAPE", (2, 3))
    monkeypatch.setattr(kc.torch, "empty", lambda *a, **k: (flushes.append(a[0]), real_empty(*a, **k))[1])
    model, kept = _Counting(), []
    times, pending = kc.kernelbench_calls(model, [torch.zeros(2)], backend, 3, 3, kept.append)
    assert emptied == [True] and len(flushes) == kc.KERNELBENCH_DISCARDED + 3 and flushes[0] == (2, 3)
    assert len(times) == len(pending) == 3 and all(t >= 0 for t in times) and all(p >= 0 for p in pending)
    assert torch.equal(kept[0], torch.full((2,), float(model.calls)))  # the last call's output
