"""Inputs of the trials, drawn on the target device, and the buffers shared with the candidate (trusted side).

Holds:
    draw_inputs: a task's ``get_inputs()`` drawn from a seed directly on the device.
    Refresher: fresh values for every timed call, written in place outside the timed region.
    SharedBuffers: the judge's tensors that the candidate process reads (inputs) and writes (outputs).
    send_shared: such buffers made, filled if asked, and their memfd sent to a process for its next command.
    share_buffers: buffers shaped like a call's inputs and outputs, shared with a process for its next ``bind``.
"""

from __future__ import annotations

import fcntl
import os
import random
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import torch

from kernelgym.verifier.candidate_side import SharedTensor, map_descriptor, map_shared

if TYPE_CHECKING:
    from kernelgym.verifier.channel import CandidateChannel

__all__ = ["draw_inputs", "Refresher", "SharedBuffers", "send_shared", "share_buffers", "tensor_bytes"]

# Inputs above this size get fresh values by a random affine map of their first draw instead of a new
# draw per timed call (drawing gigabytes of random numbers per call would dominate the timing stage).
_REDRAW_LIMIT_BYTES = 256 * 1024**2
# Offsets of shared host tensors in their memfd: a multiple of every element size (and of a cache line).
_ALIGN = 64


def tensor_bytes(values: list[Any]) -> int:
    """Bytes held by the tensors among ``values``."""
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def draw_inputs(module: ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``get_inputs()`` from ``seed``, drawn with ``device`` as the default device.

    Tasks that cannot draw there (they name a device themselves, or use a host-only
    operation) are drawn on the CPU and moved.
    """
    _seed(seed, device)
    try:
        with torch.device(device):
            values = list(module.get_inputs())
    except Exception:  # a task that only works on the host
        _seed(seed, device)
        values = list(module.get_inputs())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _seed(seed: int, device: torch.device) -> None:
    """Seed the generators a draw on ``device`` uses: on a host, the CPU's alone.

    ``torch.manual_seed`` also queues the seeding of every device not yet initialised, each with a formatted
    stack of the caller (about 1 ms a draw, paid for every call of the check, time and sampling stages); the
    CPU's generator draws the same values either way.
    """
    if device.type == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


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


@dataclass(frozen=True)
class SharedBuffers:
    """Tensors of the judge that the candidate process maps too (made by :meth:`share`).

    The host tensors of one ``bind`` live in one memfd, sized and then sealed
    against shrinking and growing (and against new seals), so neither process can
    cut it under the other: a read past a truncated end (``SIGBUS``) cannot happen.
    The memfd goes to the candidate by descriptor; no path names it, so nothing the
    candidate plants in its directory is ever opened by the judge. Device tensors
    are sent as CUDA IPC handles (they never leave the device).

    Attributes:
        local: the judge's views, in the order of the values shared (other values as they were).
        remote: what a ``bind`` command carries in their place.
        descriptor: the memfd holding the host tensors (``None``: none), to send with ``bind`` and then close.
    """

    local: list[Any]
    remote: list[Any]
    descriptor: int | None

    @classmethod
    def share(cls, values: list[Any], on_host: bool = False) -> SharedBuffers:
        """Shared counterparts (uninitialised) of the tensors among ``values``, each with its shape, strides, dtype, device.

        ``on_host``: every tensor gets its counterpart in the memfd, on the host, whatever its device.
        """
        offsets: list[int] = []
        total = 0
        for value in values:
            offsets.append(total)
            if isinstance(value, torch.Tensor) and (on_host or value.device.type == "cpu"):
                span = _span(*_buffer_shape(value))
                total += -(-max(span, 1) * value.element_size() // _ALIGN) * _ALIGN
        descriptor = sealed_memfd(total) if total else None
        memory = map_descriptor(descriptor) if descriptor is not None else None
        local, remote = [], []
        for value, offset in zip(values, offsets, strict=True):
            if not isinstance(value, torch.Tensor):
                local.append(value)
                remote.append(value)
            elif memory is not None and (on_host or value.device.type == "cpu"):
                size, stride = _buffer_shape(value)
                spec = SharedTensor(offset, str(value.dtype), size, stride, _span(size, stride))
                local.append(map_shared(spec, memory))
                remote.append(spec)
            else:
                mine = torch.empty_strided(*_buffer_shape(value), dtype=value.dtype, device=value.device)
                local.append(mine)
                remote.append(mine)
        return cls(local, remote, descriptor)


def send_shared(channel: CandidateChannel, values: list[Any], on_host: bool = False, fill: bool = False) -> SharedBuffers:
    """:meth:`SharedBuffers.share` of ``values``, filled with them if ``fill``; the memfd is sent to ``channel``'s process
    now (it arrives with the next command) and only the judge's mapping is kept."""
    shared = SharedBuffers.share(values, on_host=on_host)
    if fill:
        for mine, value in zip(shared.local, values, strict=True):
            mine.copy_(value)
    if shared.descriptor is not None:
        try:
            channel.send_descriptors([shared.descriptor])
        finally:
            os.close(shared.descriptor)
    return shared


def _buffer_shape(like: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides of a buffer for ``like``: its own, made contiguous where elements overlap."""
    size, stride = tuple(like.shape), tuple(like.stride())
    if _overlapping(size, stride):
        stride = tuple(torch.empty(size, device="meta").stride())
    return size, stride


def sealed_memfd(size: int, name: str = "kernelgym-shared") -> int:
    """An anonymous shared file of ``size`` bytes whose size no process can change again (sparse until written)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except OSError:
        os.close(fd)
        raise
    return fd


def share_buffers(channel: CandidateChannel, inputs: list[Any], outputs: list[Any]) -> tuple[list[Any], list[Any], tuple[list[Any], list[Any]]]:
    """Buffers shaped like ``inputs`` and ``outputs``, shared with ``channel``'s process for its next ``bind``.

    The host buffers are one sealed memfd, sent by descriptor now (it arrives with the next command); the
    judge keeps only its mapping. Returns the judge's input and output buffers and what the ``bind``
    command carries (the buffers as the other process maps them: inputs, outputs).
    """
    leaves = [leaf if isinstance(leaf, torch.Tensor) else None for leaf in outputs]
    shared = send_shared(channel, [*inputs, *leaves])
    count = len(inputs)
    return shared.local[:count], shared.local[count:], (shared.remote[:count], shared.remote[count:])
