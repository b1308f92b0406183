"""Tests of kernelgym.verifier.trial_inputs and the device-side helpers of compare: inputs, shared buffers, checksums."""

from __future__ import annotations

import random
import types

import torch

from kernelgym.verifier.candidate_side import map_shared
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


def test_a_shared_host_buffer_is_the_same_memory_on_both_sides(tmp_path):
    like = torch.randn(3, 4).t()  # strided: the buffer keeps the strides
    local, spec = SharedBuffers(tmp_path).share(like)
    local.copy_(like)
    other = map_shared(spec)
    assert other.stride() == like.stride() and torch.equal(other, like)
    other.add_(1.0)
    assert torch.equal(local, like + 1.0)


def test_expanded_inputs_get_contiguous_buffers(tmp_path):
    like = torch.randn(1, 4).expand(3, 4)
    local, _ = SharedBuffers(tmp_path).share(like)
    local.copy_(like)
    assert local.is_contiguous() and torch.equal(local, like)


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
