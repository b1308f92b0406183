"""Builds of the reference kept for reuse within one job (trusted side).

Holds:
    ReferenceBuilds: untouched builds of the reference, copied for a later request of the same
        seed, init inputs and module constants.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch

from kernelgym.verifier.trial_inputs import tensor_bytes

__all__ = ["ReferenceBuilds", "build_key"]

KEPT_BYTES = 2 * 1024**3
"""Device memory one job may keep in untouched builds of the reference."""

_CONSTANT_TYPES = (bool, int, float, str, type(None))


def build_key(seed: int, init_inputs: list[Any], program: Any) -> tuple | None:
    """What a build of the reference depends on: the seed, the init inputs and the program's module constants.

    ``None`` (never kept) when an init input is not a plain value (a tensor, an object).

    Example:
        >>> import types
        >>> program = types.SimpleNamespace(batch_size=16, Model=object)
        >>> build_key(0, [4, 2.0], program)
        (0, '[4, 2.0]', (('batch_size', '16'),))
        >>> build_key(0, [torch.zeros(1)], program) is None
        True
    """
    if not all(_plain(value) for value in init_inputs):
        return None
    constants = tuple(sorted((name, repr(value)) for name, value in vars(program).items()
                             if not name.startswith("__") and _plain(value)))
    return seed, repr(init_inputs), constants


def _plain(value: Any) -> bool:
    """A value whose ``repr`` says all of it (numbers, strings, and tuples of them)."""
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return isinstance(value, _CONSTANT_TYPES)


class ReferenceBuilds:
    """The judge builds the reference several times a job (each shape, the timing stage, the weights checks).

    Its weights are drawn on the host, as KernelBench draws them (an 8192 x 8192 linear layer: about
    0.3 s a build; 1.3 s of a level-2 GEMM task's 6 s job on an H100). The first build of each key
    (:func:`build_key`) is copied and kept, untouched, on the device, up to :data:`KEPT_BYTES`; later
    requests get a copy of it. The global seed is set either way, as a build sets it.
    """

    def __init__(self, limit_bytes: int = KEPT_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.kept: dict[tuple, torch.nn.Module] = {}
        self.kept_bytes = 0

    def get(self, seed: int, init_inputs: list[Any], program: Any, build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
        """A build for ``seed`` (``build()`` after seeding, or a copy of the build kept for the same key)."""
        key = build_key(seed, init_inputs, program)
        torch.manual_seed(seed)
        kept = self.kept.get(key) if key is not None else None
        if kept is not None:
            return copy.deepcopy(kept)
        model = build()
        size = tensor_bytes(list(model.state_dict().values()))
        if key is not None and self.kept_bytes + size <= self.limit_bytes:
            with contextlib.suppress(Exception):  # a module that cannot be copied is built every time
                self.kept[key] = copy.deepcopy(model)
                self.kept_bytes += size
        return model
