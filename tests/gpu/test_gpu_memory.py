"""The judge's device-side digests and comparisons make no copy as large as what they read (on a real GPU).

On an H100, KernelBench's 6 GB level-1 outputs made the judge hold 55 GB: ``sum(dtype=float64)`` copied an output
to float64 (12 GB) and ``torch.equal`` made a boolean tensor one byte per byte compared (6 GB). Chunked, each
takes a few chunks' worth of memory however large the output.
"""

from __future__ import annotations

import pytest
import torch

from kernelgym.verifier.compare import _CHUNK, checksum, compare_outputs, same_bytes

pytestmark = pytest.mark.gpu

FLOAT64_CHUNK = 8 * _CHUNK  # bytes of one chunk widened to float64 (128 MiB)


def _peak(work) -> int:
    """Bytes ``work()`` allocated at its peak beyond what was allocated before it."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    work()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_digest_equality_and_comparison_stay_within_chunks() -> None:
    x = torch.rand(64 * _CHUNK, device="cuda")  # 4 GiB of float32: 64 chunks of elements
    y = x.clone()
    digests = _peak(lambda: checksum([x]) == checksum([y]) and same_bytes(x, y))
    assert digests <= 2 * FLOAT64_CHUNK, digests  # whole: 8 GiB of float64, or 4 GiB of booleans
    comparison = _peak(lambda: compare_outputs(x, y, [], 1e-5, 1e-5, 1e-2))
    assert comparison <= 12 * FLOAT64_CHUNK, comparison  # a chunk's float64 values, errors and masks
    assert checksum([x]) == checksum([y]) and same_bytes(x, y)
    assert compare_outputs(x, y, [], 1e-5, 1e-5, 1e-2).mismatch is None
