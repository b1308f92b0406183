"""How the judge's harness touches a candidate's objects in its process: their mode set and their outputs read,
without running any of their code.

Holds:
    set_mode: a model's ``training`` flag set, as ``nn.Module.train`` sets it, calling nothing of the model's.
    plain_leaves / NotPlainOutput: the leaves of a forward's result, read by exact type only, or why they cannot be.
    inert: whether letting go of what a call returned runs none of the candidate's code.

A hook there (``train``, ``__iter__``, ``__del__``) would run outside the watched and timed region of a call:
the harness calls none of them.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

__all__ = ["NotPlainOutput", "inert", "plain_leaves", "set_mode", "detach"]

# What reading a model and its outputs uses, taken before any candidate loads. Each is a base class's own slot or
# method, called unbound: an override, an instance attribute or a metaclass of the candidate's is never consulted.
_module_dict = torch.nn.Module.__dict__["__dict__"].__get__
_tensor_dict = torch.Tensor.__dict__["__dict__"].__get__
_grad_fn = torch._C.TensorBase.grad_fn.__get__
_view_base = torch._C.TensorBase._base.__get__
detach = torch._C.TensorBase.detach
"""``Tensor.detach``, unbound: a candidate's tensor subclass or patch is never consulted."""
_storage = torch._C.TensorBase.untyped_storage
_resizable = torch._C.StorageBase.resizable
_type_name = type.__dict__["__name__"].__get__
_is_subclass = type.__subclasscheck__
_weakref_count = weakref.getweakrefcount
# Types are told apart by identity only: ``in`` or a hash would call a metaclass's ``__eq__`` or ``__hash__``.
_VALUES = (bool, int, float, str, type(None))
_STRUCT_SEQUENCES = frozenset(id(kind) for kind in vars(torch.return_types).values() if isinstance(kind, type) and issubclass(kind, tuple))


class NotPlainOutput(Exception):
    """An output the judge would have to run the candidate's code to read.

    Attributes:
        rule: ``output-not-plain-tensor`` (not an exact ``torch.Tensor``, or one carrying attributes of its own)
            or ``output-not-plain-container`` (a subclass of ``tuple``, ``list`` or ``dict``).
        detail: what the output is, in a phrase.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule = rule
        self.detail = detail


def set_mode(model: torch.nn.Module, training: bool) -> None:
    """Set ``training`` on ``model`` and every module below it, as ``nn.Module.train`` does, calling none of their code.

    The flag is written into each module's own ``__dict__`` through ``nn.Module``'s slot, and the modules are
    found through ``_modules`` read the same way: an override of ``train``, ``modules``, ``children``,
    ``__setattr__``, ``__getattr__`` or ``__dict__`` never runs (what it did ran before the guards were armed
    and the clock started).

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.

    Example:
        >>> class Hooked(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.inner = torch.nn.Linear(2, 2)
        ...     def train(self, mode=True):
        ...         raise RuntimeError("never called")
        >>> model = Hooked()
        >>> set_mode(model, False)
        >>> model.training, model.inner.training
        (False, False)
    """
    if not _is_subclass(torch.nn.Module, type(model)):
        raise TypeError(f"ModelNew(*get_init_inputs()) returned a {_type_name(type(model))}, not an nn.Module")
    stack, seen = [model], set()
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        attributes = _module_dict(module)
        dict.__setitem__(attributes, "training", training)
        children = dict.get(attributes, "_modules")
        if type(children) is dict:
            stack += [child for child in dict.values(children) if _is_subclass(torch.nn.Module, type(child))]


def plain_leaves(output: Any) -> list[Any]:
    """The leaves of a forward's result, in :func:`~kernelgym.verifier.compare.flatten_outputs`' order, read without running its code.

    Plain means exact types: ``torch.Tensor`` with no attributes of its own, ``tuple``, ``list`` (or one of
    torch's own ``torch.return_types``), ``dict`` with ``str`` keys, and ``bool``, ``int``, ``float``, ``str``
    or ``None`` leaves. A subclass could compute when it is iterated or read, after the clock stopped.

    Raises:
        NotPlainOutput: anything else.

    Example:
        >>> plain_leaves((torch.zeros(1), [torch.ones(2)], 3))[2]
        3
        >>> class Lazy(list):
        ...     pass
        >>> plain_leaves(Lazy())
        Traceback (most recent call last):
        ...
        kernelgym.verifier.candidate_objects.NotPlainOutput: a Lazy, a subclass of list
    """
    leaves: list[Any] = []
    _collect(output, leaves)
    return leaves


def _collect(value: Any, leaves: list[Any]) -> None:
    kind = type(value)
    if kind is torch.Tensor:
        if dict.__len__(_tensor_dict(value)):
            raise NotPlainOutput("output-not-plain-tensor", "a torch.Tensor carrying attributes of its own")
        leaves.append(value)
    elif kind is list:
        for item in list.__iter__(value):
            _collect(item, leaves)
    elif kind is tuple or id(kind) in _STRUCT_SEQUENCES:
        for item in tuple.__iter__(value):
            _collect(item, leaves)
    elif kind is dict:
        keys = list(dict.__iter__(value))
        if not all(type(key) is str for key in keys):
            raise NotPlainOutput("output-not-plain-container", "a dict with keys other than strings")
        for key in sorted(keys):
            _collect(dict.__getitem__(value, key), leaves)
    elif any(kind is plain for plain in _VALUES):
        leaves.append(value)
    else:
        containers = [name for base, name in ((tuple, "tuple"), (list, "list"), (dict, "dict")) if _is_subclass(base, kind)]
        if containers:
            raise NotPlainOutput("output-not-plain-container", f"a {_type_name(kind)}, a subclass of {containers[0]}")
        raise NotPlainOutput("output-not-plain-tensor", f"a {_type_name(kind)}")


def inert(values: list[Any]) -> bool:
    """Whether letting go of ``values`` (what a call returned) runs none of the candidate's code.

    True for plain values and plain tensors with no attributes, weak references or autograd history, in memory
    torch allocated (the deleter of a foreign buffer is code), whose view bases are the same.
    """
    for value in values:
        while type(value) is torch.Tensor:
            try:
                foreign = not _resizable(_storage(value))
            except RuntimeError:  # no storage (sparse): not known to be inert
                return False
            if foreign or dict.__len__(_tensor_dict(value)) or _weakref_count(value) or _grad_fn(value) is not None:
                return False
            value = _view_base(value)
        if not any(type(value) is plain for plain in _VALUES):
            return False
    return True
