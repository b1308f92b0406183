"""Inputs of the trials, drawn on the target device, and the buffers shared with the candidate (trusted side).

Holds:
    draw_inputs: a task's ``get_inputs()`` drawn from a seed directly on the device.
    Refresher: fresh values for every timed call, written in place outside the timed region.
    SharedBuffers: the judge's tensors that the candidate process reads (inputs) and writes (outputs).
"""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.verifier.candidate_side import SharedTensor, map_shared

__all__ = ["draw_inputs", "Refresher", "SharedBuffers", "tensor_bytes"]

# Inputs above this size get fresh values by a random affine map of their first draw instead of a new
# draw per timed call (drawing gigabytes of random numbers per call would dominate the timing stage).
_REDRAW_LIMIT_BYTES = 256 * 1024**2


def tensor_bytes(values: list[Any]) -> int:
    """Bytes held by the tensors among ``values``."""
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def draw_inputs(module: ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``get_inputs()`` from ``seed``, drawn with ``device`` as the default device.

    Tasks that cannot draw there (they name a device themselves, or use a host-only
    operation) are drawn on the CPU and moved.
    """
    torch.manual_seed(seed)
    try:
        with torch.device(device):
            values = list(module.get_inputs())
    except Exception:  # a task that only works on the host
        torch.manual_seed(seed)
        values = list(module.get_inputs())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


class Refresher:
    """Writes fresh input values in place before each timed call, so no two calls see the same inputs.

    Small inputs are redrawn from the task (same distribution); large ones are
    mapped from their first draw by a random sign and scale per call.
    """

    def __init__(self, module: ModuleType, base: list[Any], device: torch.device, rng: random.Random) -> None:
        self.module, self.device, self.rng = module, device, rng
        self.redraw = tensor_bytes(base) <= _REDRAW_LIMIT_BYTES
        self.base = base if self.redraw else [v.clone() if isinstance(v, torch.Tensor) else v for v in base]

    def refresh(self, target: list[Any]) -> None:
        """Overwrite the tensors of ``target`` (shaped like the first draw) with fresh values."""
        if self.redraw:
            fresh = draw_inputs(self.module, self.rng.randrange(2**31), self.device)
            for dst, src in zip(target, fresh, strict=True):
                if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.shape == src.shape:
                    dst.copy_(src)
            return
        for dst, src in zip(target, self.base, strict=True):
            if isinstance(dst, torch.Tensor) and dst.is_floating_point():
                scale = self.rng.choice((-1.0, 1.0)) * self.rng.uniform(0.5, 1.5)
                torch.mul(src, scale, out=dst)


def _overlapping(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether two elements share memory (an expanded tensor): such buffers are made contiguous."""
    reach = 1
    for step, extent in sorted((st, n) for n, st in zip(size, stride, strict=True) if n > 1):
        if step < reach:
            return True
        reach = step * extent
    return False


def _span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(size, stride, strict=True))


class SharedBuffers:
    """Tensors of the judge that the candidate process maps too.

    Host tensors are files in the candidate's directory, mapped by both sides;
    device tensors are sent as CUDA IPC handles (they never leave the device).
    ``local`` are the judge's views; ``remote`` is what a ``bind`` command carries.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.count = 0

    def share(self, like: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """A new shared tensor with ``like``'s shape, strides, dtype and device (uninitialised)."""
        size, stride = tuple(like.shape), tuple(like.stride())
        if _overlapping(size, stride):
            stride = tuple(torch.empty(size, device="meta").stride())
        if like.device.type != "cpu":
            local = torch.empty_strided(size, stride, dtype=like.dtype, device=like.device)
            return local, local
        self.count += 1
        path = self.directory / f"buffer{self.count}.bin"
        span = _span(size, stride)
        with open(path, "wb") as handle:
            handle.truncate(max(span, 1) * like.element_size())
        spec = SharedTensor(str(path), str(like.dtype), size, stride, span)
        return map_shared(spec), spec

    def share_all(self, values: list[Any]) -> tuple[list[Any], list[Any]]:
        """Shared counterparts of the tensors in ``values`` (other values are passed as they are)."""
        local, remote = [], []
        for value in values:
            if isinstance(value, torch.Tensor):
                mine, theirs = self.share(value)
                local.append(mine)
                remote.append(theirs)
            else:
                local.append(value)
                remote.append(value)
        return local, remote
