"""Shape variants derived from a task file that declares none.

Holds:
    derive_variants: propose 2-3 rebindings of a task's module-level size constants
        (smaller, odd, not powers of two) from its source text alone.
    MAX_VARIANT_ELEMENTS: default cap on the input elements of a derived variant.

A KernelBench task file fixes its shapes in module-level constants
(``batch_size = 16``, ``dim = 16384``) that ``get_inputs``/``get_init_inputs``
read. An answer that only works for those shapes passes every trial unless
the judge also checks other shapes; tasks of the bundled suites declare such
variants, KernelBench's own files do not. :func:`derive_variants` reads the
file with :mod:`ast` (it never runs it) and proposes rebindings the judge applies
like declared ones, dropping those on which the reference itself fails.

Which constants change: integers that the two functions read (directly, or
through other module-level names and helper functions) and that look like sizes
(at least 16, or a batch size). Small integers (kernel sizes, strides, groups,
axes) stay, and a size keeps divisibility by the grouping constants it was a
multiple of (``features`` by ``num_groups``). Constants with equal values move
together, and module-level names computed from changed constants
(``bias_shape = (out_channels, 1, 1)``) are recomputed into the variant.
Every variant keeps the input tensors it can size statically under
``max_elements`` elements in total.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["MAX_VARIANT_ELEMENTS", "derive_variants"]

MAX_VARIANT_ELEMENTS = 1 << 20
"""Default cap on the elements of all input tensors of one derived variant."""

_SIZE_MIN = 16  # integers below this are kernel sizes, strides, axes, groups: left alone
_BATCH = re.compile(r"batch|^bs$|^b$|num_samples", re.IGNORECASE)
_GROUPING = re.compile(r"group|head|factor|block|chunk|patch|window|split|tile|expansion|ratio", re.IGNORECASE)
# Extents that grouping constants never divide (batch, spatial and sequence lengths).
_FREE_EXTENT = re.compile(r"batch|height|width|depth|length|seq|len\b|^[hwdlt]$", re.IGNORECASE)
_TENSOR_FACTORIES = frozenset(
    {"rand", "randn", "zeros", "ones", "empty", "full", "randint", "rand_like", "randn_like", "randperm", "arange"}
)
_UNKNOWN_CAP = 64  # per-constant ceiling when the input sizes cannot be read statically
_SIZE_CEILING = 1024  # no derived extent above this: weights grow with the sizes too


class _Unknown(Exception):
    """An expression the small evaluator does not handle."""


def derive_variants(source: str, max_elements: int = MAX_VARIANT_ELEMENTS) -> tuple[dict[str, Any], ...]:
    """Propose 2-3 shape variants of a task from its source; ``()`` when nothing fits.

    Never raises: a source it cannot read yields ``()``.

    Args:
        source: the task program text (defines ``Model``, ``get_inputs``, ``get_init_inputs``).
        max_elements: cap on the input elements of each variant (where they can be sized statically).

    Returns:
        Mappings of module-level names to new values, each different from the
        task's own binding; apply them like declared ``Task.variants``.

    Example:
        >>> src = '''
        ... import torch
        ... batch_size = 16
        ... dim = 16384
        ... def get_inputs():
        ...     return [torch.rand(batch_size, dim)]
        ... def get_init_inputs():
        ...     return []
        ... '''
        >>> [sorted(v) for v in derive_variants(src)]
        [['batch_size', 'dim'], ['batch_size', 'dim'], ['batch_size']]
        >>> all(v["dim"] % 2 for v in derive_variants(src)[:1])
        True
    """
    try:
        return _TaskConstants(ast.parse(source)).variants(max_elements)
    except (SyntaxError, ValueError, RecursionError, TypeError, ArithmeticError):
        return ()


class _TaskConstants:
    """The module-level names of one task file and what ``get_inputs``/``get_init_inputs`` read."""

    def __init__(self, tree: ast.Module) -> None:
        self.values: dict[str, ast.expr] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        reassigned: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name, value in _bindings(target, node.value):
                        if name in self.values or value is None:
                            reassigned.add(name)
                        self.values[name] = value if value is not None else node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.values[node.target.id] = node.value
            elif isinstance(node, ast.AugAssign | ast.For | ast.With) or (
                isinstance(node, ast.AnnAssign) and node.value is None
            ):
                reassigned.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
        for name in reassigned:
            self.values.pop(name, None)
        self.floor = 3
        self.env: dict[str, Any] = {}
        for name, value in self.values.items():
            try:
                self.env[name] = _evaluate(value, self.env)
            except _Unknown:
                continue

    # -- what the input functions read ------------------------------------------------------

    def read_by(self, roots: Iterable[str]) -> set[str]:
        """Module-level names reached from the given functions, through names and helper functions."""
        seen: set[str] = set()
        stack = list(roots)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            node: ast.AST | None = self.functions.get(name) or self.values.get(name)
            if node is None:
                continue
            stack.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        return seen

    def dependents(self) -> dict[str, set[str]]:
        """For each module-level value, the module-level names its expression reads."""
        return {
            name: {n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in self.values}
            for name, value in self.values.items()
        }

    # -- variants ---------------------------------------------------------------------------

    def variants(self, max_elements: int) -> tuple[dict[str, Any], ...]:
        """All-sizes-odd, all-sizes-uneven and batch-only proposals that fit, without duplicates."""
        if "get_inputs" not in self.functions:
            return ()
        reached = self.read_by(["get_inputs", "get_init_inputs"])
        ints = {n: v for n, v in self.env.items() if n in reached and type(v) is int and n in self.values}
        sizes = {
            n: v for n, v in ints.items() if not _GROUPING.search(n) and (v >= _SIZE_MIN or (_BATCH.search(n) and v >= 2))
        }
        if not sizes:
            return ()
        reads = self.dependents()
        # Computed names (``groups = in_channels``) are recomputed from the variant; they constrain nothing.
        pinned = {n: v for n, v in ints.items() if n not in sizes and not reads[n]}
        # No extent below the largest small constant (a kernel size, a dilation): the reference would refuse it.
        self.floor = max([3, *(v for n, v in pinned.items() if not _GROUPING.search(n))])
        divisors = {
            n: math.lcm(1, *(p for name, p in pinned.items() if p >= 2 and v % p == 0 and _GROUPING.search(name)))
            if not _FREE_EXTENT.search(n) else 1
            for n, v in sizes.items()
        }
        batch = {n for n in sizes if _BATCH.search(n)}
        proposals: list[dict[str, int]] = [
            self._fit(sizes, divisors, _odd_value, max_elements),
            self._fit(sizes, divisors, _uneven_value, max_elements),
        ]
        if batch:
            proposals.append(self._fit({n: sizes[n] for n in batch}, divisors, _odd_value, max_elements))
        found: list[dict[str, Any]] = []
        for proposal in proposals:
            variant = self._with_dependents(proposal)
            if not variant or variant in found:
                continue
            elements = self._input_elements(variant)
            if elements is _OVER or (isinstance(elements, int) and elements > max_elements):
                continue
            found.append(variant)
        return tuple(found)

    def _fit(
        self, sizes: Mapping[str, int], divisors: Mapping[str, int], pick: Callable[[int, int, int], int], cap: int
    ) -> dict[str, int]:
        """New values for ``sizes`` from ``pick``, shrunk (largest first) until the inputs fit under ``cap``."""
        by_value: dict[int, list[str]] = {}
        for name, value in sizes.items():
            by_value.setdefault(value, []).append(name)
        shrink = {value: 0 for value in by_value}
        statically_sized = self._input_elements({}) is not None
        while True:
            chosen: dict[str, int] = {}
            for value, names in by_value.items():
                step = math.lcm(*(divisors[n] for n in names))
                floor = 2 if any(_BATCH.search(n) for n in names) else self.floor
                new = pick(value, step, shrink[value])
                if not statically_sized:
                    new = min(new, max(_UNKNOWN_CAP, step))
                chosen.update(dict.fromkeys(names, -(-max(new, floor) // step) * step))
            shrinkable = [v for v in by_value if pick(v, 1, shrink[v] + 1) < pick(v, 1, shrink[v])]
            too_large = [v for v in shrinkable if chosen[by_value[v][0]] > _SIZE_CEILING]
            if too_large:
                for value in too_large:
                    shrink[value] += 1
                continue
            elements = self._input_elements(self._with_dependents(chosen))
            if elements is None or (isinstance(elements, int) and elements <= cap) or not shrinkable:
                return chosen
            largest = max(shrinkable, key=lambda v: chosen[by_value[v][0]])
            shrink[largest] += 1

    def _with_dependents(self, proposal: Mapping[str, int]) -> dict[str, Any]:
        """The proposal plus every module-level value recomputed from it (empty when one cannot be)."""
        env = dict(self.env)
        env.update(proposal)
        variant: dict[str, Any] = {n: v for n, v in proposal.items() if v != self.env[n]}
        if not variant:
            return {}
        reads = self.dependents()
        changed = set(variant)
        renamed = {self.env[n]: v for n, v in proposal.items()}
        for name, value in self.values.items():
            if name in proposal:
                continue
            if reads[name] & changed:
                try:
                    env[name] = _evaluate(value, env)
                except _Unknown:
                    return {}  # a derived value we cannot recompute would stay stale
            elif isinstance(env.get(name), tuple | list) and all(type(x) is int for x in env[name]):
                # A literal shape such as ``input_shape = (32768,)`` moves with the size it equals.
                old = env[name]
                env[name] = type(old)(renamed.get(x, x) if x >= _SIZE_MIN else x for x in old)
                if env[name] == old:
                    continue
            else:
                continue
            variant[name] = env[name]
            changed.add(name)
        return variant

    def _input_elements(self, variant: Mapping[str, Any]) -> int | None | object:
        """Elements of the tensors ``get_inputs`` makes under ``variant`` (``None``: not statically known)."""
        env = dict(self.env)
        env.update(variant)
        total = 0
        for name in self.read_by(["get_inputs"]):
            function = self.functions.get(name)
            if function is None:
                continue
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
                factory = _factory_name(call.func)
                if factory not in _TENSOR_FACTORIES:
                    continue
                try:
                    count = _factory_elements(factory, call, env)
                except _Unknown:
                    return None
                total += count
                if total > 1 << 40:
                    return _OVER
        return total


_OVER = object()  # more elements than any cap


def _bindings(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr | None]]:
    """(name, expression) pairs an assignment binds; ``None`` where the value cannot be split per name."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            return [pair for t, v in zip(target.elts, value.elts, strict=True) for pair in _bindings(t, v)]
        return [(n.id, None) for n in ast.walk(target) if isinstance(n, ast.Name)]
    return []


def _factory_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch":
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _factory_elements(factory: str, call: ast.Call, env: Mapping[str, Any]) -> int:
    """Elements one tensor factory call makes (``_Unknown`` when its size cannot be evaluated)."""
    if factory in ("rand_like", "randn_like"):
        raise _Unknown(factory)
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    args = list(call.args)
    if "size" in keywords:
        shape = _evaluate(keywords["size"], env)
    elif factory == "randint":
        shape = _evaluate(args[-1], env) if len(args) >= 2 else ()
    elif factory == "full":
        shape = _evaluate(args[0], env) if args else ()
    elif factory in ("randperm", "arange"):
        shape = _evaluate(args[-1] if factory == "randperm" else args[0], env) if args else 0
        shape = (int(shape),) if len(args) <= 1 else (abs(int(_evaluate(args[1], env) - _evaluate(args[0], env))),)
    else:
        parts: list[Any] = []
        for arg in args:
            value = _evaluate(arg.value if isinstance(arg, ast.Starred) else arg, env)
            parts.extend(value if isinstance(value, list | tuple) else [value])
        shape = tuple(parts)
    dims = shape if isinstance(shape, list | tuple) else (shape,)
    if not all(type(d) is int for d in dims):
        raise _Unknown(factory)
    return math.prod(dims)


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b if abs(b) <= 64 else _raise_unknown(),
}


def _raise_unknown() -> Any:
    raise _Unknown("too large")


_MAX_INT_BITS = 256
_MAX_SEQUENCE = 65536


def _bounded(value: Any) -> Any:
    """``value`` if it is small enough to be a size; a task's source is read, never trusted, and
    ``n = 2**64`` repeated as ``n = n**64`` or ``s = s * 4096`` would otherwise fill the judge's memory."""
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise _Unknown("too large")
    if isinstance(value, list | tuple | str) and len(value) > _MAX_SEQUENCE:
        raise _Unknown("long sequence")
    return value


def _evaluate(node: ast.expr, env: Mapping[str, Any]) -> Any:
    """Numbers, strings, names bound in ``env``, tuples/lists and arithmetic on them; ``_Unknown`` otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool | type(None)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise _Unknown(node.id)
    if isinstance(node, ast.Tuple | ast.List):
        items: list[Any] = []
        for element in node.elts:
            if isinstance(element, ast.Starred):
                items.extend(_evaluate(element.value, env))
            else:
                items.append(_evaluate(element, env))
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        if isinstance(left, list | tuple | str) or isinstance(right, list | tuple | str):
            if isinstance(node.op, ast.Mult | ast.Add):
                if isinstance(node.op, ast.Mult) and max(
                    abs(v) for v in (left, right) if isinstance(v, int)
                ) > 4096:
                    raise _Unknown("long sequence")
                return _bounded(_BINARY[type(node.op)](left, right))
            raise _Unknown("sequence arithmetic")
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "min", "max", "round"):
        args = [_evaluate(a, env) for a in node.args]
        return {"int": int, "min": min, "max": max, "round": round}[node.func.id](*args)
    raise _Unknown(type(node).__name__)


def _odd_value(value: int, step: int, shrink: int) -> int:
    """An odd size (a multiple of ``step`` times an odd number) near value/8, smaller with each ``shrink``."""
    target = max(value // (8 << shrink), 1)
    if step > 1:
        k = max(target // step, 1)
        k += 1 - k % 2
        return step * k if step * k < value else step
    odd = target if target % 2 else target + 1
    return max(odd if odd != value else odd - 2, 3)


def _uneven_value(value: int, step: int, shrink: int) -> int:
    """A size that is no power of two (three times a power of two, or a multiple of ``step``) near value/6."""
    target = max(value // (6 << shrink), 1)
    if step > 1:
        k = max(round(target / step), 1)
        k = k + 1 if k & (k - 1) == 0 and k > 1 else k
        return step * k if step * k < value else step
    power = max(1 << max(target.bit_length() - 2, 0), 1)
    candidate = 3 * power
    if candidate >= value:
        candidate = max(value - value // 3, 3)
    return candidate if candidate & (candidate - 1) else candidate + 1
