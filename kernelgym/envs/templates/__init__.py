"""Kernel templates: full KernelBench answers with a grid of tunable parameters, for KernelTuneEnv.

Holds:
    TemplateParam: one tunable parameter (its values and the code each value puts in the template).
    KernelTemplate: a ``string.Template`` answer for one task and backend, with its parameter grid.
    register_template: add a template to the registry.
    get_template: the template of a task for a backend.
    templates_for: every registered template of a backend.

Templates are plain Python modules in this package (``cpu``: C++ through ``load_inline`` for the
``cpp`` backend; ``gpu``: Triton kernels for the ``triton`` backend); each calls
:func:`register_template` once per template. A configuration is a tuple of value indices, one per
parameter; :meth:`KernelTemplate.render` turns it into the answer text the verifier judges.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kernelgym.errors import KernelGymError, TaskError
from kernelgym.registry import Registry

__all__ = ["KernelTemplate", "TemplateParam", "get_template", "register_template", "templates_for"]

Value = int | str


@dataclass(frozen=True)
class TemplateParam:
    """One tunable parameter of a template.

    Attributes:
        name: the ``${NAME}`` placeholder it fills.
        values: the values a configuration may choose (reported in ``info`` and docs).
        code: the text each value puts into the template; empty means ``str(value)``.
            A text may itself hold ``${OTHER}`` placeholders of other parameters.

    Example:
        >>> TemplateParam("ORDER", ("ijk", "ikj"), ("for i for j", "for i for k")).text(1)
        'for i for k'
        >>> TemplateParam("TILE", (16, 64)).text(0)
        '16'
    """

    name: str
    values: tuple[Value, ...]
    code: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"template parameter {self.name!r} has no values")
        if self.code and len(self.code) != len(self.values):
            raise ValueError(f"template parameter {self.name!r}: one code text per value is needed")

    def text(self, index: int) -> str:
        """The code for value number ``index``."""
        return self.code[index] if self.code else str(self.values[index])


def _identifiers(text: str) -> set[str]:
    """The ``$name``/``${name}`` placeholders of ``text`` (``Template.get_identifiers`` needs Python 3.11)."""
    pattern = re.compile(string.Template.pattern.pattern, re.VERBOSE | re.IGNORECASE)
    names = (m.group("named") or m.group("braced") for m in pattern.finditer(text))
    return {name for name in names if name}


@dataclass(frozen=True)
class KernelTemplate:
    """A complete answer for one task whose tunable parts are ``${NAME}`` placeholders.

    Attributes:
        task_id: the bundled task it answers (e.g. ``"level1/14_Small_Matmul"``).
        suite: the bundled suite of that task (``"cpu"`` or ``"gpu"``).
        backend: the backend the answer targets (``"cpp"`` or ``"triton"``).
        source: the answer program, a ``string.Template`` text.
        params: the tunable parameters, in action order.
        dims: module-level names of the task's problem dimensions (observation features).
        summary: one sentence on what the parameters trade off.

    Example:
        >>> t = KernelTemplate("level1/1_ReLU", "cpu", "cpp", "B = ${B}", (TemplateParam("B", (1, 2)),), ("dim",))
        >>> t.nvec, t.size, t.render((1,)), t.config((1,))
        ((2,), 2, 'B = 2', {'B': 2})
    """

    task_id: str
    suite: str
    backend: str
    source: str
    params: tuple[TemplateParam, ...]
    dims: tuple[str, ...] = ()
    summary: str = ""

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"template of {self.task_id!r} repeats a parameter name")
        used = _identifiers(self.source) | {i for p in self.params for c in p.code for i in _identifiers(c)}
        if used != set(names):
            raise ValueError(
                f"template of {self.task_id!r}: placeholders {sorted(used)} do not match parameters {sorted(names)}"
            )

    @property
    def nvec(self) -> tuple[int, ...]:
        """Number of values of each parameter (the ``MultiDiscrete`` shape)."""
        return tuple(len(p.values) for p in self.params)

    @property
    def size(self) -> int:
        """Number of configurations in the grid."""
        total = 1
        for n in self.nvec:
            total *= n
        return total

    def grid(self) -> Iterator[tuple[int, ...]]:
        """Every configuration (tuples of value indices), in lexicographic order."""
        return itertools.product(*(range(n) for n in self.nvec))

    def _indices(self, action: Sequence[int]) -> tuple[int, ...]:
        indices = tuple(int(a) for a in action)
        if len(indices) != len(self.params) or any(not 0 <= i < n for i, n in zip(indices, self.nvec, strict=True)):
            raise KernelGymError(f"configuration {indices} is outside the grid {self.nvec} of {self.task_id!r}")
        return indices

    def config(self, action: Sequence[int]) -> dict[str, Value]:
        """Parameter name -> chosen value.

        Raises:
            KernelGymError: the configuration is outside the grid.
        """
        indices = self._indices(action)
        return {p.name: p.values[i] for p, i in zip(self.params, indices, strict=True)}

    def render(self, action: Sequence[int]) -> str:
        """The answer program for a configuration.

        Raises:
            KernelGymError: the configuration is outside the grid.
        """
        indices = self._indices(action)
        plain: Mapping[str, str] = {p.name: p.text(i) for p, i in zip(self.params, indices, strict=True)}
        filled = {name: string.Template(text).safe_substitute(plain) for name, text in plain.items()}
        return string.Template(self.source).substitute(filled)


_TEMPLATES: Registry[KernelTemplate] = Registry("tuning template")


def _template_key(task_id: str, backend: str) -> str:
    return f"{backend}:{task_id}"


def register_template(template: KernelTemplate) -> KernelTemplate:
    """Add ``template`` to the registry (keyed by task id and backend) and return it.

    Raises:
        DuplicateNameError: another template is registered for that task and backend.
    """
    return _TEMPLATES.add(_template_key(template.task_id, template.backend), template)


def _load_builtin_templates() -> None:
    # Importing the modules runs their register_template calls.
    from kernelgym.envs.templates import cpu, gpu  # noqa: F401


def templates_for(backend: str) -> list[KernelTemplate]:
    """Registered templates of ``backend``, in registration order.

    Example:
        >>> [t.task_id for t in templates_for("cpp")][:1]
        ['level1/14_Small_Matmul']
    """
    _load_builtin_templates()
    return [t for t in _TEMPLATES.values() if t.backend == backend]


def get_template(task_id: str, backend: str) -> KernelTemplate:
    """The template of ``task_id`` for ``backend``.

    Raises:
        TaskError: no template is registered for that task and backend.
    """
    _load_builtin_templates()
    template = _TEMPLATES.get(_template_key(task_id, backend))
    if template is None:
        known = ", ".join(t.task_id for t in templates_for(backend)) or "none"
        raise TaskError(f"no {backend!r} tuning template for task {task_id!r} (templates exist for: {known})")
    return template
