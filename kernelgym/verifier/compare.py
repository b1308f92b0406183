"""Comparing candidate outputs with the reference, and fingerprinting inputs (worker side).

Holds:
    Mismatch: why outputs differ, in a sentence, with error metrics.
    compare_outputs: strict, dtype-aware comparison of (tuples of) tensors.
    fingerprint: a hash of tensor contents, to detect input mutation.
    flatten_outputs: a forward's result as a list of leaves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Mismatch", "Comparison", "compare_outputs", "fingerprint", "flatten_outputs"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


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


def fingerprint(values: Any) -> str:
    """SHA-1 over the bytes, shapes and dtypes of every tensor leaf (and reprs of the rest)."""
    digest = hashlib.sha1()
    for leaf in flatten_outputs(values):
        if isinstance(leaf, torch.Tensor):
            data = leaf.detach().to("cpu").contiguous()
            digest.update(f"{tuple(data.shape)}{data.dtype}".encode())
            digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        else:
            digest.update(repr(leaf).encode())
    return digest.hexdigest()


def _storages(values: list[Any]) -> set[int]:
    return {v.untyped_storage().data_ptr() for v in values if isinstance(v, torch.Tensor) and v.numel()}


def compare_outputs(reference: Any, candidate: Any, inputs: list[Any], atol: float, rtol: float, low_precision_tol: float) -> Comparison:
    """Compare candidate outputs with the reference's.

    Tolerance is ``|new - ref| <= atol + rtol * |ref|`` elementwise, computed in
    float64. ``atol`` is scaled down to ``rtol * max|ref|`` when the reference
    output is tiny, so near-constant answers cannot hide inside a loose absolute
    tolerance. Non-finite values must appear exactly where the reference has them.
    """
    refs, news = flatten_outputs(reference), flatten_outputs(candidate)
    if len(refs) != len(news):
        return Comparison(Mismatch("wrong-output", f"expected {len(refs)} output(s), got {len(news)}"), float("inf"), float("inf"))
    input_storages = _storages(inputs)
    worst_abs = worst_rel = 0.0
    for index, (ref, new) in enumerate(zip(refs, news, strict=True)):
        label = f"output {index}" if len(refs) > 1 else "the output"
        if not isinstance(ref, torch.Tensor):
            if new != ref:
                return Comparison(Mismatch("wrong-output", f"{label} should be {ref!r}, got {new!r}"), float("inf"), float("inf"))
            continue
        if type(new) is not torch.Tensor:
            return Comparison(
                Mismatch("output-not-plain-tensor", f"{label} is a {type(new).__name__}, not a plain torch.Tensor", illegal=True),
                float("inf"),
                float("inf"),
            )
        if new.numel() and new.untyped_storage().data_ptr() in input_storages:
            return Comparison(
                Mismatch("output-aliases-input", f"{label} shares memory with an input; return a tensor of your own", illegal=True),
                float("inf"),
                float("inf"),
            )
        if new.shape != ref.shape:
            return Comparison(Mismatch("wrong-output", f"{label} has shape {tuple(new.shape)}, expected {tuple(ref.shape)}"), float("inf"), float("inf"))
        if new.dtype != ref.dtype:
            return Comparison(Mismatch("wrong-output", f"{label} has dtype {new.dtype}, expected {ref.dtype}"), float("inf"), float("inf"))
        if new.device != ref.device:
            return Comparison(Mismatch("wrong-output", f"{label} is on {new.device}, expected {ref.device}"), float("inf"), float("inf"))
        if ref.dtype in _LOW_PRECISION:
            tol_abs = tol_rel = low_precision_tol
        else:
            tol_abs, tol_rel = atol, rtol
        r = ref.detach().to("cpu", torch.float64)
        n = new.detach().to("cpu", torch.float64)
        if not ref.is_floating_point() and not ref.is_complex():
            tol_abs = tol_rel = 0.0
        ref_finite, new_finite = torch.isfinite(r), torch.isfinite(n)
        bad_finite = ref_finite != new_finite
        if bool(bad_finite.any()):
            first = _first_index(bad_finite, ref.shape)
            return Comparison(
                Mismatch("wrong-output", f"{label} has NaN/inf where the reference has finite values (first at index {first})"),
                float("inf"),
                float("inf"),
            )
        finite = ref_finite
        nonfinite_differs = (~finite) & ~((r == n) | (torch.isnan(r) & torch.isnan(n)))
        if bool(nonfinite_differs.any()):
            first = _first_index(nonfinite_differs, ref.shape)
            return Comparison(Mismatch("wrong-output", f"{label} has the wrong NaN/inf at index {first}"), float("inf"), float("inf"))
        if r.numel() == 0:
            continue
        diff = torch.where(finite, (n - r).abs(), torch.zeros_like(r))
        scale = float(torch.where(finite, r.abs(), torch.zeros_like(r)).max())
        if scale > 0.0:
            tol_abs = min(tol_abs, max(tol_rel * scale, 1e-30))
        rel = diff / (r.abs() + tol_abs)
        max_abs = float(diff.max())
        max_rel = float(torch.where(diff > 0, rel, torch.zeros_like(rel)).max())
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        bad = diff > tol_abs + tol_rel * r.abs()
        if bool(bad.any()):
            first = _first_index(bad, ref.shape)
            flat = int(bad.flatten().nonzero()[0])
            got, want = float(n.flatten()[flat]), float(r.flatten()[flat])
            count = int(bad.sum())
            return Comparison(
                Mismatch(
                    "wrong-output",
                    f"{label} differs from the reference in {count} of {r.numel()} elements: "
                    f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (atol {tol_abs:.1e}, rtol {tol_rel:.1e}); "
                    f"first mismatch at index {first}: got {got:.6g}, expected {want:.6g}",
                ),
                max_abs,
                max_rel,
            )
    return Comparison(None, worst_abs, worst_rel)


def _first_index(mask: torch.Tensor, shape: torch.Size) -> tuple[int, ...]:
    flat = int(mask.flatten().nonzero()[0])
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))
