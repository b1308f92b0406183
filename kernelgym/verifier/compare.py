"""Comparing candidate outputs with the reference, on the device (trusted side).

Holds:
    Mismatch: why outputs differ, in a sentence, with error metrics.
    compare_outputs: strict, dtype-aware comparison of (tuples of) tensors, in bounded chunks on the device.
    checksum: a device-side digest of tensor contents (names replayed outputs; no host copy).
    same_bytes: whether two tensors hold the same bytes (input mutation), on the device.
    flatten_outputs: a forward's result as a list of leaves.
    leaf_meta, leaf_mismatch: what an output leaf is, and whether that matches the reference's leaf
        (count, kind, plain tensor, aliasing, shape, dtype, device); the candidate's report and the
        fetched outputs are held to the same check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Mismatch", "Comparison", "compare_outputs", "checksum", "fingerprint", "same_bytes", "flatten_outputs", "leaf_meta", "leaf_mismatch"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
# Elements compared at once: float64 temporaries of one chunk stay in the hundreds of MB.
_CHUNK = 1 << 24


@dataclass(frozen=True)
class Mismatch:
    """Why a candidate output is wrong.

    Attributes:
        rule: runtime rule id (``wrong-output``, ``output-not-plain-tensor``, ``output-aliases-input``).
        message: a sentence with the numbers an LLM needs.
        illegal: the mismatch is a rule violation rather than a wrong answer.
    """

    rule: str
    message: str
    illegal: bool = False


@dataclass(frozen=True)
class Comparison:
    """Outcome of one comparison: the mismatch (if any) and the error metrics."""

    mismatch: Mismatch | None
    max_abs_error: float
    max_rel_error: float


def flatten_outputs(value: Any) -> list[Any]:
    """Leaves of a forward result (tensors, numbers) in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten_outputs(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in flatten_outputs(value[key])]
    return [value]


def _bytes_of(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)


def _chunked_sum(flat: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The sum of a flat tensor in ``dtype``, chunk by chunk: summing in a wider type casts the whole input first
    on a GPU (int64 of a 6 GB output's bytes is 51 GB, which ran an H100 out of memory; its float64 values 12 GB)."""
    total = torch.zeros((), dtype=dtype, device=flat.device)
    for start in range(0, flat.numel(), _CHUNK):
        total += flat[start : start + _CHUNK].sum(dtype=dtype)
    return total


def checksum(values: Any) -> tuple:
    """A digest of every tensor leaf, computed on its device (shape, dtype, byte sum, float64 value sum).

    Two digests of the same bytes are equal: a value sum that is NaN (an output holding NaN, e.g. memory never
    written) is recorded as the string ``"nan"``, since ``nan != nan`` would read as a change.

    Example:
        >>> t = torch.tensor([1.0, float("nan")])
        >>> checksum([t]) == checksum([t.clone()])
        True
    """
    parts: list[Any] = []
    for leaf in flatten_outputs(values):
        if isinstance(leaf, torch.Tensor):
            parts += [tuple(leaf.shape), str(leaf.dtype), int(_chunked_sum(_bytes_of(leaf), torch.int64))]
            if leaf.is_floating_point() and leaf.numel():
                total = float(_chunked_sum(leaf.detach().reshape(-1), torch.float64))
                parts.append("nan" if math.isnan(total) else total)
        else:
            parts.append(repr(leaf))
    return tuple(parts)


_FINGERPRINT_ELEMENTS = 64


def fingerprint(values: Any) -> tuple:
    """A cheap mark of every leaf, to recognise an output seen before: shape, dtype and the bytes of
    :data:`_FINGERPRINT_ELEMENTS` evenly spaced elements of each tensor (``repr`` of other leaves).

    It names the cause of a mismatch (an output replayed from an earlier call), never decides one: that
    is :func:`compare_outputs`'s, over every element.

    Example:
        >>> a = torch.arange(1000.0)
        >>> fingerprint([a]) == fingerprint([a.clone()]), fingerprint([a]) == fingerprint([a + 1])
        (True, False)
    """
    parts: list[Any] = []
    for leaf in flatten_outputs(values):
        if isinstance(leaf, torch.Tensor):
            flat = leaf.detach().reshape(-1)
            step = max(1, flat.numel() // _FINGERPRINT_ELEMENTS)
            sample = flat[::step][:_FINGERPRINT_ELEMENTS]
            parts += [tuple(leaf.shape), str(leaf.dtype), bytes(_bytes_of(sample).cpu().numpy())]
        else:
            parts.append(repr(leaf))
    return tuple(parts)


def _words(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of ``tensor`` as the widest integers that hold them exactly (fewer elements to compare)."""
    flat = _bytes_of(tensor)
    for dtype, size in ((torch.int64, 8), (torch.int32, 4)):
        if flat.numel() % size == 0 and flat.data_ptr() % size == 0:
            return flat.view(dtype)
    return flat


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` have the same shape and bytes (NaNs included), compared on the device chunk by chunk
    (on a GPU ``torch.equal`` makes a boolean tensor as long as its inputs), with one synchronization in all."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = _words(a), _words(b)
    if x.dtype != y.dtype:
        x, y = _bytes_of(a), _bytes_of(b)
    if x.numel() <= _CHUNK:
        return bool(torch.equal(x, y))
    differs = torch.zeros((), dtype=torch.bool, device=x.device)
    for start in range(0, x.numel(), _CHUNK):
        differs |= torch.ne(x[start : start + _CHUNK], y[start : start + _CHUNK]).any()
    return not bool(differs)


def _storages(values: list[Any]) -> set[int]:
    return {v.untyped_storage().data_ptr() for v in values if isinstance(v, torch.Tensor) and v.numel()}


def leaf_meta(leaf: Any, input_storages: set[int]) -> dict[str, Any]:
    """What one output leaf is (kind, plain tensor or subclass, shape, dtype, device, whether it aliases an input).

    The candidate process describes its outputs with it; :func:`compare_outputs` describes the fetched ones
    the same way, so both are held to the one :func:`leaf_mismatch`.
    """
    if isinstance(leaf, torch.Tensor):
        plain = type(leaf) is torch.Tensor
        return {
            "kind": "tensor",
            "plain": plain,
            "type": type(leaf).__name__,
            "shape": list(leaf.shape),
            "dtype": str(leaf.dtype),
            "device": str(leaf.device),
            "aliases_input": bool(plain and leaf.numel() and leaf.untyped_storage().data_ptr() in input_storages),
        }
    if isinstance(leaf, (bool, int, float, str)) or leaf is None:
        return {"kind": "value", "value": leaf}
    return {"kind": "object", "type": type(leaf).__name__}


def leaf_mismatch(expected: list[Any], leaves: list[Any], aliases_allowed: bool = False) -> Mismatch | None:
    """What the candidate reports about its outputs, against the reference's (count, type, aliasing, shape, dtype, device).

    ``aliases_allowed``: an output may share memory with an input (KernelBench's contract).
    """
    if len(leaves) != len(expected):
        return Mismatch("wrong-output", f"expected {len(expected)} output(s), got {len(leaves)}")
    for index, (ref, meta) in enumerate(zip(expected, leaves, strict=True)):
        label = f"output {index}" if len(expected) > 1 else "the output"
        if not isinstance(meta, dict):
            return Mismatch("wrong-output", f"{label} could not be read")
        if not isinstance(ref, torch.Tensor):
            if meta.get("kind") != "value" or meta.get("value") != ref:
                return Mismatch("wrong-output", f"{label} should be {ref!r}, got {meta.get('value', meta.get('type'))!r}")
            continue
        if meta.get("kind") != "tensor" or not meta.get("plain"):
            return Mismatch("output-not-plain-tensor", f"{label} is a {meta.get('type')}, not a plain torch.Tensor", illegal=True)
        if meta.get("aliases_input") and not aliases_allowed:
            return Mismatch("output-aliases-input", f"{label} shares memory with an input; return a tensor of your own", illegal=True)
        if tuple(meta.get("shape", ())) != tuple(ref.shape):
            return Mismatch("wrong-output", f"{label} has shape {tuple(meta.get('shape', ()))}, expected {tuple(ref.shape)}")
        if meta.get("dtype") != str(ref.dtype):
            return Mismatch("wrong-output", f"{label} has dtype {meta.get('dtype')}, expected {ref.dtype}")
        if str(meta.get("device", "")).split(":")[0] != ref.device.type:
            return Mismatch("wrong-output", f"{label} is on {meta.get('device')}, expected {ref.device}")
    return None


def compare_outputs(reference: Any, candidate: Any, inputs: list[Any], atol: float, rtol: float, low_precision_tol: float) -> Comparison:
    """Compare candidate outputs with the reference's.

    Tolerance is ``|new - ref| <= atol + rtol * |ref|`` elementwise, computed in
    float64. ``atol`` is scaled down to ``rtol * max|ref|`` when the reference
    output is tiny, so near-constant answers cannot hide inside a loose absolute
    tolerance, and up to ``rtol * mean|ref|`` when it is large: an element near zero
    among outputs of magnitude 20 was summed from terms of that magnitude, and
    carries their fp32 rounding error (an honest fp32 GEMM over 8192 terms, its
    weights redrawn, misses ``1e-4 + 1e-4 * |ref|`` there by a few percent). The
    mean, not the RMS or the maximum: a few huge elements do not loosen the rest.
    Non-finite values must appear exactly where the reference has them.
    """
    refs, news = flatten_outputs(reference), flatten_outputs(candidate)
    structure = leaf_mismatch(refs, [leaf_meta(new, _storages(inputs)) for new in news])
    if structure is not None:
        return Comparison(structure, float("inf"), float("inf"))
    worst_abs = worst_rel = 0.0
    for index, (ref, new) in enumerate(zip(refs, news, strict=True)):
        label = f"output {index}" if len(refs) > 1 else "the output"
        if not isinstance(ref, torch.Tensor):
            continue
        if new.device != ref.device:  # the exact device, not only its type (what leaf_mismatch can tell from a report)
            return Comparison(Mismatch("wrong-output", f"{label} is on {new.device}, expected {ref.device}"), float("inf"), float("inf"))
        if ref.dtype in _LOW_PRECISION:
            tol_abs = tol_rel = low_precision_tol
        else:
            tol_abs, tol_rel = atol, rtol
        if not ref.is_floating_point() and not ref.is_complex():
            tol_abs = tol_rel = 0.0
        mismatch, max_abs, max_rel = _compare_tensor(ref, new, label, tol_abs, tol_rel)
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        if mismatch is not None:
            return Comparison(mismatch, max_abs, max_rel)
    return Comparison(None, worst_abs, worst_rel)


def _chunks(ref: torch.Tensor, new: torch.Tensor) -> Any:
    r_all, n_all = ref.detach().reshape(-1), new.detach().to(ref.device).reshape(-1)
    for start in range(0, r_all.numel(), _CHUNK):
        yield start, r_all[start : start + _CHUNK].to(torch.float64), n_all[start : start + _CHUNK].to(torch.float64)


def _compare_tensor(ref: torch.Tensor, new: torch.Tensor, label: str, tol_abs: float, tol_rel: float) -> tuple[Mismatch | None, float, float]:
    """Elementwise check in float64 on the device, chunk by chunk (two passes: finiteness and scale, then errors).

    Each pass keeps its findings on the device and is read once at its end (a read per chunk waited for the
    device hundreds of times on a 6 GB output); where it found a fault, the chunks are walked again for the
    first index. Outputs with the same bytes (:func:`same_bytes`: dtype, shape and every byte, NaNs
    included) pass at once with no error.
    """
    if same_bytes(ref, new):
        return None, 0.0, 0.0
    inf = float("inf")
    device = ref.device
    bad_finite_any = torch.zeros((), dtype=torch.bool, device=device)
    differs_any = torch.zeros((), dtype=torch.bool, device=device)
    scale_max = torch.zeros((), dtype=torch.float64, device=device)
    total = torch.zeros((), dtype=torch.float64, device=device)
    for _, r, n in _chunks(ref, new):
        ref_finite = torch.isfinite(r)  # once per chunk, for all three
        bad_finite_any |= _finiteness_differs(r, n, ref_finite).any()
        differs_any |= _other_non_finite(r, n, ref_finite).any()
        if r.numel():
            finite = torch.where(ref_finite, r.abs(), torch.zeros_like(r))
            scale_max = torch.maximum(scale_max, finite.max())
            total += finite.sum()
    if bool(bad_finite_any):
        first = _unravel(_first_flat(ref, new, _finiteness_differs), ref.shape)
        return Mismatch("wrong-output", f"{label} has NaN/inf where the reference has finite values (first at index {first})"), inf, inf
    if bool(differs_any):
        first = _unravel(_first_flat(ref, new, _other_non_finite), ref.shape)
        return Mismatch("wrong-output", f"{label} has the wrong NaN/inf at index {first}"), inf, inf
    scale = float(scale_max)
    if scale > 0.0:
        tol_abs = min(tol_abs, max(tol_rel * scale, 1e-30))
        tol_abs = max(tol_abs, tol_rel * float(total) / ref.numel())  # the output's mean magnitude: see compare_outputs
    abs_max = torch.zeros((), dtype=torch.float64, device=device)
    rel_max = torch.zeros((), dtype=torch.float64, device=device)
    bad_total = torch.zeros((), dtype=torch.int64, device=device)

    def beyond(diff: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return diff > tol_abs + tol_rel * r.abs()

    for _, r, n in _chunks(ref, new):
        if not r.numel():
            continue
        diff = _finite_error(r, n)
        rel = diff / (r.abs() + tol_abs)
        abs_max = torch.maximum(abs_max, diff.max())
        rel_max = torch.maximum(rel_max, torch.where(diff > 0, rel, torch.zeros_like(rel)).max())
        bad_total += beyond(diff, r).sum()
    max_abs, max_rel, count = float(abs_max), float(rel_max), int(bad_total)
    if not count:
        return None, max_abs, max_rel
    flat = _first_flat(ref, new, lambda r, n: beyond(_finite_error(r, n), r))
    got, want = float(new.detach().reshape(-1)[flat]), float(ref.detach().reshape(-1)[flat])
    return (
        Mismatch(
            "wrong-output",
            f"{label} differs from the reference in {count} of {ref.numel()} elements: "
            f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (atol {tol_abs:.1e}, rtol {tol_rel:.1e}); "
            f"first mismatch at index {_unravel(flat, ref.shape)}: got {got:.6g}, expected {want:.6g}",
        ),
        max_abs,
        max_rel,
    )


def _finiteness_differs(r: torch.Tensor, n: torch.Tensor, ref_finite: torch.Tensor | None = None) -> torch.Tensor:
    """Where one side is finite and the other is not (``ref_finite``: ``isfinite(r)``, if already computed)."""
    return (torch.isfinite(r) if ref_finite is None else ref_finite) != torch.isfinite(n)


def _other_non_finite(r: torch.Tensor, n: torch.Tensor, ref_finite: torch.Tensor | None = None) -> torch.Tensor:
    """Where the reference is NaN/inf and the candidate holds another non-finite value (NaN matches NaN)."""
    return ~(torch.isfinite(r) if ref_finite is None else ref_finite) & ~((r == n) | (torch.isnan(r) & torch.isnan(n)))


def _finite_error(r: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """|n - r| where the reference is finite, 0 elsewhere."""
    return torch.where(torch.isfinite(r), (n - r).abs(), torch.zeros_like(r))


def _first_flat(ref: torch.Tensor, new: torch.Tensor, where: Any) -> int:
    """The first flat index where ``where(ref_chunk, new_chunk)`` holds (the pass found one)."""
    for start, r, n in _chunks(ref, new):
        hits = where(r, n)
        if bool(hits.any()):
            return start + int(hits.nonzero()[0])
    return 0


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))
