"""Output comparison and device-side checksums (pure functions, no worker)."""

from __future__ import annotations

import subprocess
import sys

import torch

from kernelgym.verifier.compare import checksum as fingerprint
from kernelgym.verifier.compare import compare_outputs


def test_fingerprint_handles_scalars_and_detects_changes() -> None:
    x = torch.tensor(1.5)
    before = fingerprint([x, torch.ones(3, 2), 7])
    assert before == fingerprint([torch.tensor(1.5), torch.ones(3, 2), 7])
    x.add_(1)
    assert before != fingerprint([x, torch.ones(3, 2), 7])


def test_fingerprint_of_a_large_output_sums_its_bytes_in_chunks_without_widening_it_whole() -> None:
    script = """
import resource, torch
from kernelgym.verifier.compare import _CHUNK, checksum
x = torch.full((3 * _CHUNK + 5,), 1.0)  # 200 MB, over 12 chunks of bytes
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
digest = checksum([x])
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
assert digest[2] == 191 * x.numel(), digest  # 1.0f is the bytes 00 00 80 3f
print(grown)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    # widened whole, the 200 MB of bytes would take 1.6 GB of int64; a chunk's 130 MB is all it may take
    assert float(done.stdout) < 400, done.stdout


def test_byte_equality_and_sums_are_exact_across_chunk_boundaries(monkeypatch) -> None:
    """Chunked so that the GPU makes no copy as large as the output (tests/gpu/test_gpu_memory.py measures that)."""
    from kernelgym.verifier import compare

    monkeypatch.setattr(compare, "_CHUNK", 7)
    a = torch.arange(40, dtype=torch.float32)  # 160 bytes: 20 words of 8 bytes, 3 chunks, the last one short
    assert compare.same_bytes(a, a.clone())
    for index in (0, 14, 39):  # first chunk, the first word after a boundary, the short last chunk
        b = a.clone()
        b[index] += 1
        assert not compare.same_bytes(a, b)
    nan = torch.tensor([float("nan"), 1.0])
    assert compare.same_bytes(nan, nan.clone())  # bytes, not values: a NaN equals its copy
    assert compare.same_bytes(torch.empty(0), torch.empty(0)) and not compare.same_bytes(a, a[:9])
    assert fingerprint([a])[3] == 780.0 and fingerprint([a]) != fingerprint([a * 2])
    odd = torch.arange(5, dtype=torch.uint8)  # 5 bytes: compared byte by byte
    assert compare.same_bytes(odd, odd.clone()) and not compare.same_bytes(odd, odd.flip(0))


def test_chunked_comparison_reports_what_one_pass_over_the_whole_output_reports(monkeypatch) -> None:
    """Findings stay on the device until the end of each pass; the first faulty index is found by walking the chunks again."""
    from kernelgym.verifier import compare

    ref = torch.linspace(-3.0, 3.0, 40)
    cases = {"ok": ref + 1e-7, "wrong": ref.clone(), "nan": ref.clone(), "inf": ref.clone()}
    cases["wrong"][[30, 33]] += 0.5
    cases["nan"][20] = float("nan")
    inf_ref = ref.clone()
    inf_ref[25] = float("inf")
    cases["inf"][25] = -float("inf")
    whole = {}
    for name, new in cases.items():
        expected = inf_ref if name == "inf" else ref
        whole[name] = compare_outputs([expected], [new], [], 1e-4, 1e-4, 1e-2)
    monkeypatch.setattr(compare, "_CHUNK", 7)
    for name, new in cases.items():
        expected = inf_ref if name == "inf" else ref
        chunked = compare_outputs([expected], [new], [], 1e-4, 1e-4, 1e-2)
        assert chunked == whole[name], name
    assert whole["ok"].mismatch is None
    assert "in 2 of 40 elements" in whole["wrong"].mismatch.message and "first mismatch at index (30,)" in whole["wrong"].mismatch.message
    assert "first at index (20,)" in whole["nan"].mismatch.message
    assert "wrong NaN/inf at index (25,)" in whole["inf"].mismatch.message


def test_match_within_tolerance() -> None:
    ref = torch.randn(64, 33)
    result = compare_outputs(ref, ref + 1e-6, [], 1e-4, 1e-4, 1e-2)
    assert result.mismatch is None and 0 < result.max_abs_error < 2e-6


def test_mismatch_names_errors_and_first_index() -> None:
    ref = torch.zeros(4, 5)
    new = ref.clone()
    new[2, 3] = 0.5
    result = compare_outputs(ref, new, [], 1e-4, 1e-4, 1e-2)
    assert result.mismatch is not None and result.mismatch.rule == "wrong-output"
    assert "index (2, 3)" in result.mismatch.message and "max abs error 0.5" in result.mismatch.message


def test_tiny_outputs_cannot_hide_in_the_absolute_tolerance() -> None:
    ref = torch.full((100,), 1e-9)
    result = compare_outputs(ref, torch.zeros(100), [], 1e-4, 1e-4, 1e-2)
    assert result.mismatch is not None


def test_large_outputs_give_elements_near_zero_the_rounding_error_of_their_terms() -> None:
    # A Linear of 8192 inputs with weights of the redrawn trial's size (std 0.25): fp32 products summed one k after the
    # other (a tiled kernel's order) differ from the exact sums (float64, rounded to fp32; the same on every CPU) by up
    # to about 5e-4, beyond 1e-4 + 1e-4 * |ref| at a few elements near zero (9 here); the absolute tolerance follows the
    # output's mean magnitude (18 here), not the element's value.
    generator = torch.Generator().manual_seed(2)
    x, w = torch.randn(512, 8192, generator=generator), torch.randn(1024, 8192, generator=generator) * 0.25
    ref = (x.double() @ w.double().T).float()
    in_order = torch.zeros_like(ref)
    for k, row in enumerate(w.T.contiguous()):
        in_order.addcmul_(x[:, k : k + 1], row)
    assert ((ref - in_order).abs() > 1e-4 + 1e-4 * ref.abs()).any()  # what the element-wise budget alone rejects
    assert compare_outputs(ref, in_order, [], 1e-4, 1e-4, 1e-2).mismatch is None
    off = in_order.clone()
    off[3, 5] += 0.01  # beyond the output's scale still: rejected, at that element
    mismatch = compare_outputs(ref, off, [], 1e-4, 1e-4, 1e-2).mismatch
    assert mismatch is not None and "1 of 524288" in mismatch.message and "index (3, 5)" in mismatch.message
    fp16_inputs = x.half().float() @ w.half().float().T  # a precision downgrade stays beyond it
    assert compare_outputs(ref, fp16_inputs, [], 1e-4, 1e-4, 1e-2).mismatch is not None


def test_a_few_huge_elements_do_not_loosen_the_others() -> None:
    ref = torch.ones(100_000)
    ref[:10] = 1e6  # RMS 1e4, mean magnitude about 101
    new = ref.clone()
    new[50] += 0.05  # 5% off at an element of 1: within 1e-4 * RMS, beyond 1e-4 * the mean magnitude
    mismatch = compare_outputs(ref, new, [], 1e-4, 1e-4, 1e-2).mismatch
    assert mismatch is not None and "index (50,)" in mismatch.message


def test_nan_where_reference_is_finite() -> None:
    ref = torch.ones(8)
    new = ref.clone()
    new[5] = float("nan")
    result = compare_outputs(ref, new, [], 1e-4, 1e-4, 1e-2)
    assert result.mismatch is not None and "NaN/inf" in result.mismatch.message


def test_shape_dtype_and_count() -> None:
    ref = torch.ones(4)
    assert "shape" in compare_outputs(ref, torch.ones(5), [], 1e-4, 1e-4, 1e-2).mismatch.message
    assert "dtype" in compare_outputs(ref, torch.ones(4, dtype=torch.float64), [], 1e-4, 1e-4, 1e-2).mismatch.message
    assert "output(s)" in compare_outputs((ref, ref), ref, [], 1e-4, 1e-4, 1e-2).mismatch.message


def test_aliasing_an_input_and_subclasses_are_illegal() -> None:
    x = torch.randn(6)
    aliased = compare_outputs(x.clone(), x, [x], 1e-4, 1e-4, 1e-2).mismatch
    assert aliased is not None and aliased.illegal and aliased.rule == "output-aliases-input"

    class Lazy(torch.Tensor):
        pass

    lazy = compare_outputs(x.clone(), x.clone().as_subclass(Lazy), [], 1e-4, 1e-4, 1e-2).mismatch
    assert lazy is not None and lazy.illegal and lazy.rule == "output-not-plain-tensor"


def test_half_precision_uses_its_own_tolerance() -> None:
    ref = torch.ones(10, dtype=torch.float16)
    assert compare_outputs(ref, ref * 1.004, [], 1e-4, 1e-4, 1e-2).mismatch is None
