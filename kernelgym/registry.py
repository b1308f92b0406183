"""Name -> object tables behind every ``@register_...`` decorator (backends, executors, agents, rules, templates).

Holds:
    DuplicateNameError: a second, different object was registered under a name already taken.
    Registry: a table that refuses a duplicate name.

A registry refuses to let a new object silently replace the one registered
under the same name (as verl's ``register`` does). Running the same definition
again (a module imported twice under one name, e.g. reloaded) is not a
duplicate: it is recognised by its module and qualified name and replaces the
older copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from kernelgym.errors import KernelGymError

__all__ = ["DuplicateNameError", "Registry"]

T = TypeVar("T")


class DuplicateNameError(KernelGymError):
    """A name was registered twice with two different objects."""


def _origin(obj: object) -> tuple[str, str]:
    return getattr(obj, "__module__", ""), getattr(obj, "__qualname__", repr(obj))


class Registry(Generic[T]):
    """A name -> object table that refuses a duplicate name.

    Args:
        kind: what it holds, in words (``"backend"``), for error messages.

    Example:
        >>> shapes = Registry("shape")
        >>> def circle(): ...
        >>> def disc(): ...
        >>> shapes.add("round", circle) is circle
        True
        >>> shapes.add("round", disc)
        Traceback (most recent call last):
        ...
        kernelgym.registry.DuplicateNameError: a shape named 'round' is already registered (...circle); choose another name
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` as ``name`` and return it.

        Raises:
            DuplicateNameError: another object is registered as ``name``.
        """
        old = self._items.get(name)
        if old is not None and old is not obj and _origin(old) != _origin(obj):
            module, qualname = _origin(old)
            raise DuplicateNameError(
                f"a {self.kind} named {name!r} is already registered ({module}.{qualname}); choose another name"
            )
        self._items[name] = obj
        return obj

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's temporary entry); unknown names are ignored."""
        self._items.pop(name, None)

    def get(self, name: str) -> T | None:
        """The object registered as ``name``, or ``None``."""
        return self._items.get(name)

    def values(self) -> list[T]:
        """The registered objects, in registration order."""
        return list(self._items.values())

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)
