"""Runtime defenses that watch the candidate while it runs (worker side).

Holds:
    compute_ops: which ATen operator names are compute (not allocation, view or copy).
    AtenGuard: a ``TorchDispatchMode`` recording every ATen compute op dispatched
        during ``ModelNew.forward``, C++ extension callers included.
    GlobalState: a snapshot of process state a candidate could tamper with
        (thread count, timers, comparison functions, backend precision flags).
    settings_as: this process with the backend settings a candidate set in its own, for a block.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["AtenGuard", "GlobalState", "ALLOWED_ATEN_OPS", "compute_ops", "settings_as"]

# Ops that allocate, fill, copy or re-view memory; everything else is compute.
ALLOWED_ATEN_OPS = frozenset(
    {
        "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
        "fill_", "zero_", "resize_", "scalar_tensor",
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "permute",
        "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "narrow", "slice", "select",
        "view_as", "alias", "detach", "lift_fresh", "lift_fresh_copy", "unbind", "split", "chunk",
        "contiguous", "clone", "copy_", "_to_copy", "to", "_local_scalar_dense", "item",
        "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
        "record_stream", "_has_compatible_shallow_copy_type", "set_",
    }
)


def compute_ops(names: list[str]) -> list[str]:
    """The compute operators among ATen operator names (``aten::mm`` or ``mm``), sorted, without repeats."""
    short = {name.split("::", 1)[-1].split(".", 1)[0] for name in names if name.startswith("aten::") or "::" not in name}
    return sorted(op for op in short if op and op not in ALLOWED_ATEN_OPS)


class AtenGuard(TorchDispatchMode):
    """Record the ATen ops dispatched while active; ``compute_ops`` lists forbidden ones.

    Example:
        >>> x = torch.ones(3)
        >>> with AtenGuard() as guard:
        ...     y = torch.empty_like(x)
        ...     z = x * 2
        >>> guard.compute_ops
        ['mul']
    """

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        self.seen[name] = self.seen.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    @property
    def compute_ops(self) -> list[str]:
        """Dispatched ops that compute (not allocation, view or copy), sorted."""
        return compute_ops(list(self.seen))


_WATCHED_FUNCTIONS = (
    ("time.perf_counter", lambda: time.perf_counter),
    ("time.time", lambda: time.time),
    ("time.monotonic", lambda: time.monotonic),
    ("torch.allclose", lambda: torch.allclose),
    ("torch.isclose", lambda: torch.isclose),
    ("torch.equal", lambda: torch.equal),
    ("torch.testing.assert_close", lambda: torch.testing.assert_close),
    ("torch.Tensor.__eq__", lambda: torch.Tensor.__eq__),
    ("torch.Tensor.__sub__", lambda: torch.Tensor.__sub__),
    ("torch.Tensor.abs", lambda: torch.Tensor.abs),
    ("torch.Tensor.clone", lambda: torch.Tensor.clone),
    ("torch.manual_seed", lambda: torch.manual_seed),
    ("torch.randn", lambda: torch.randn),
    ("torch.cuda.synchronize", lambda: torch.cuda.synchronize),
    ("torch.cuda.Event.record", lambda: torch.cuda.Event.record),
    ("torch.cuda.Event.elapsed_time", lambda: torch.cuda.Event.elapsed_time),
    ("torch.nn.Module.__call__", lambda: torch.nn.Module.__call__),
    # The candidate process's own timing code (looked up where it is loaded: this module is imported first).
    ("candidate_side.run_call", lambda: _loaded("kernelgym.verifier.candidate_side", "run_call")),
    ("candidate_side.kernelbench_calls", lambda: _loaded("kernelgym.verifier.candidate_side", "kernelbench_calls")),
    ("CandidateSide.cmd_call", lambda: _loaded("kernelgym.verifier.candidate_side", "CandidateSide", "cmd_call")),
    ("CandidateSide.cmd_kernelbench_time", lambda: _loaded("kernelgym.verifier.candidate_side", "CandidateSide", "cmd_kernelbench_time")),
)


def _loaded(module: str, *names: str) -> Any:
    """``module.name1.name2...`` where that module is loaded (``None`` elsewhere)."""
    value: Any = sys.modules.get(module)
    for name in names:
        value = getattr(value, name, None)
    return value


@dataclass(frozen=True)
class GlobalState:
    """What a candidate must leave as it found it."""

    num_threads: int
    functions: tuple[tuple[str, int], ...]
    flags: tuple[tuple[str, Any], ...]

    @classmethod
    def capture(cls) -> GlobalState:
        """Snapshot the current process state (importing ``torch._dynamo`` first: its import wraps
        ``torch.manual_seed`` and others, which a candidate that imports it must not be blamed for)."""
        import torch._dynamo  # noqa: F401  (seconds the first time: a candidate's factory does it before forking)

        flags = (
            ("torch.backends.cudnn.benchmark", torch.backends.cudnn.benchmark),
            ("torch.backends.cudnn.deterministic", torch.backends.cudnn.deterministic),
            ("torch.backends.cudnn.allow_tf32", torch.backends.cudnn.allow_tf32),
            ("torch.backends.cuda.matmul.allow_tf32", torch.backends.cuda.matmul.allow_tf32),
            ("float32_matmul_precision", torch.get_float32_matmul_precision()),
            ("deterministic_algorithms", torch.are_deterministic_algorithms_enabled()),
            ("grad_enabled", torch.is_grad_enabled()),
        )
        functions = tuple((name, id(get())) for name, get in _WATCHED_FUNCTIONS)
        return cls(torch.get_num_threads(), functions, flags)

    def changes_since(self, before: GlobalState) -> list[str]:
        """Human-readable list of what differs from ``before``."""
        changes = []
        if self.num_threads != before.num_threads:
            changes.append(f"thread count {before.num_threads} -> {self.num_threads}")
        old_funcs = dict(before.functions)
        changes += [f"{name} was replaced" for name, ident in self.functions if old_funcs.get(name) != ident]
        old_flags = dict(before.flags)
        changes += [f"{name} {old_flags.get(name)!r} -> {value!r}" for name, value in self.flags if old_flags.get(name) != value]
        return changes


@contextlib.contextmanager
def convolution_precision(tf32: bool) -> Iterator[None]:
    """Within the block, cuDNN computes fp32 convolutions in TF32 (``tf32``) or in full fp32; restored after.

    The judge's reference side under a rule preset (:attr:`~kernelgym.verifier.presets.RulePreset.tf32_convolutions`);
    the answer's process is told the same before the answer loads (the ``load`` command).

    Example:
        >>> with convolution_precision(True):
        ...     torch.backends.cudnn.allow_tf32
        True
    """
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = saved


def _set_flag(module: Any, name: str) -> Any:
    return lambda value: setattr(module, name, value)


_SETTERS: dict[str, tuple[type, Any, Any]] = {
    "torch.backends.cudnn.benchmark": (bool, lambda: torch.backends.cudnn.benchmark, _set_flag(torch.backends.cudnn, "benchmark")),
    "torch.backends.cudnn.allow_tf32": (bool, lambda: torch.backends.cudnn.allow_tf32, _set_flag(torch.backends.cudnn, "allow_tf32")),
    "torch.backends.cuda.matmul.allow_tf32": (bool, lambda: torch.backends.cuda.matmul.allow_tf32,
                                              _set_flag(torch.backends.cuda.matmul, "allow_tf32")),
    "float32_matmul_precision": (str, torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
}


@contextlib.contextmanager
def settings_as(changes: Iterable[str]) -> Iterator[None]:
    """Within the block, this process has the backend settings that ``changes`` (lines of
    :meth:`GlobalState.changes_since`, as a candidate's process reported them) say were set; restored after.

    KernelBench runs the reference in the answer's own process, so a setting the answer makes at import
    (``cudnn.benchmark``, TF32) reaches the reference's calls too; judging under its contract, the judge
    gives the reference the same. Only the settings above, with values of their type, are taken; others are ignored.

    Example:
        >>> with settings_as(["float32_matmul_precision 'highest' -> 'high'"]):
        ...     torch.get_float32_matmul_precision()
        'high'
        >>> torch.get_float32_matmul_precision()
        'highest'
    """
    saved = []
    try:
        for line in changes:
            name, _, rest = str(line).partition(" ")
            if name not in _SETTERS or " -> " not in rest:
                continue
            kind, get, set_ = _SETTERS[name]
            try:
                value = ast.literal_eval(rest.rsplit(" -> ", 1)[1])
            except (ValueError, SyntaxError):
                continue
            if type(value) is kind and (kind is not str or value in ("highest", "high", "medium")):
                saved.append((set_, get()))
                set_(value)
        yield
    finally:
        for set_, value in reversed(saved):
            set_(value)
