"""Tests of kernelgym.verifier.trial_inputs and the device-side helpers of compare: inputs, shared buffers, checksums."""

from __future__ import annotations

import fcntl
import os
import random
import types

import pytest
import torch

from kernelgym.verifier.candidate_side import map_descriptor, map_shared
from kernelgym.verifier.compare import checksum, compare_outputs, same_bytes
from kernelgym.verifier.trial_inputs import Refresher, SharedBuffers, draw_inputs


def _task(shape=(4, 5)) -> types.ModuleType:
    module = types.ModuleType("task")
    module.get_inputs = lambda: [torch.randn(*shape), 3]
    return module


def test_inputs_are_drawn_from_the_seed_on_the_device():
    a = draw_inputs(_task(), 7, torch.device("cpu"))
    b = draw_inputs(_task(), 7, torch.device("cpu"))
    assert torch.equal(a[0], b[0]) and a[1] == 3
    assert not torch.equal(a[0], draw_inputs(_task(), 8, torch.device("cpu"))[0])


def test_refresh_never_repeats_values(tmp_path):
    inputs = draw_inputs(_task(), 1, torch.device("cpu"))
    refresher = Refresher(_task(), inputs, torch.device("cpu"), random.Random(0))
    seen = {checksum(inputs)}
    for _ in range(5):
        refresher.refresh(inputs)
        assert checksum(inputs) not in seen
        seen.add(checksum(inputs))


def test_shared_host_buffers_are_the_same_memory_on_both_sides():
    values = [torch.randn(3, 4).t(), 7, torch.arange(5, dtype=torch.int8), torch.randn(2, dtype=torch.float64)]
    shared = SharedBuffers.share(values)
    assert shared.local[1] == shared.remote[1] == 7 and shared.descriptor is not None
    other = map_descriptor(shared.descriptor)  # what the candidate maps from the descriptor it is sent
    os.close(shared.descriptor)
    for index in (0, 2, 3):
        shared.local[index].copy_(values[index])
        theirs = map_shared(shared.remote[index], other)
        assert theirs.stride() == values[index].stride() and torch.equal(theirs, values[index])  # strides kept
        theirs.add_(1)
        assert torch.equal(shared.local[index], values[index] + 1)


def test_expanded_inputs_get_contiguous_buffers():
    like = torch.randn(1, 4).expand(3, 4)
    shared = SharedBuffers.share([like])
    os.close(shared.descriptor)
    shared.local[0].copy_(like)
    assert shared.local[0].is_contiguous() and torch.equal(shared.local[0], like)


def test_the_shared_memfd_cannot_be_resized_or_resealed():
    shared = SharedBuffers.share([torch.zeros(1000)])
    fd = shared.descriptor
    try:
        size = os.fstat(fd).st_size
        for change in (lambda: os.ftruncate(fd, 0), lambda: os.ftruncate(fd, 2 * size),
                       lambda: fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)):
            with pytest.raises(PermissionError):
                change()
        assert os.fstat(fd).st_size == size
        assert float(shared.local[0].sum()) == 0.0  # still mapped, still readable
    finally:
        os.close(fd)


def test_only_host_tensors_need_a_descriptor():
    shared = SharedBuffers.share([3, "x"])
    assert shared.descriptor is None and shared.local == shared.remote == [3, "x"]


def test_a_reference_state_reaches_the_candidate_through_one_memfd_with_every_dtype_and_layout():
    """What ``Harness.shared_state`` sends and ``CandidateSide.cmd_state`` maps: every tensor on the host, whatever its device."""
    from kernelgym.verifier.candidate_side import _mapped_state
    from kernelgym.verifier.placement import transfer_state

    state = {"weight": torch.randn(3, 4).t(), "bias": torch.randn(3).expand(2, 3), "steps": torch.tensor(7),
             "mask": torch.tensor([True, False]), "half": torch.randn(5, dtype=torch.bfloat16), "empty": torch.zeros(0),
             "meta_like": torch.empty(2, 2, device="meta")}
    shared = SharedBuffers.share(list(state.values()), on_host=True)
    assert all(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in shared.local)
    for mine, value in zip(shared.local, state.values(), strict=True):
        if value.device.type != "meta":
            mine.copy_(value)
    sent = dict(zip(state, shared.remote, strict=True))
    received = _mapped_state(sent, [shared.descriptor])  # closes the descriptor, as the candidate does
    with pytest.raises(OSError):
        os.fstat(shared.descriptor)
    for name, value in state.items():
        if value.device.type != "meta":
            assert torch.equal(received[name], value) and received[name].dtype == value.dtype, name
    received["weight"].add_(1)  # the candidate writing its copy does not reach the reference
    assert not torch.equal(received["weight"], state["weight"])

    class Renamed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, 3))
            self.register_buffer("steps", torch.tensor(0))

    model = Renamed()
    unplaced, _ = transfer_state(model, {"weight": received["weight"], "steps": received["steps"]})
    assert unplaced == [] and torch.equal(model.w, state["weight"] + 1) and int(model.steps) == 7
    assert _mapped_state({"plain": torch.ones(2)}, None)["plain"].sum() == 2  # tensors sent by value still work


def test_same_bytes_sees_nan_payload_and_single_bit_changes():
    a = torch.tensor([1.0, float("nan"), 3.0])
    b = a.clone()
    assert same_bytes(a, b)
    b.view(torch.int32)[0] ^= 1
    assert not same_bytes(a, b)


def test_chunked_comparison_reports_the_first_mismatch_index(monkeypatch):
    import kernelgym.verifier.compare as compare

    monkeypatch.setattr(compare, "_CHUNK", 7)
    ref = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    new = ref.clone()
    new[4, 3] += 1.0
    result = compare_outputs(ref, new, [], 1e-4, 1e-4, 1e-2)
    assert result.mismatch is not None and "index (4, 3)" in result.mismatch.message
    assert compare_outputs(ref, ref.clone(), [], 1e-4, 1e-4, 1e-2).mismatch is None
