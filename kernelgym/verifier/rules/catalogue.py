"""The catalogue of every rule (static and runtime), its decorator, and the findings of one inspection.

Holds:
    STAGES: where a rule is checked: ``python`` and ``native`` (static), ``runtime`` (the worker).
    Rule: one rule: id, stage, summary, and the module that checks it.
    rule: decorator registering a rule on the function or method that checks it.
    catalogue: every registered rule, by id (the rule modules imported first).
    Findings: the violations of one inspection, one per (rule, line, where).
    rule_message: the sentence for a Python rule about one name.

A new rule is one checking function (or method) in the module of its concern
(``python``/``forward`` for Python, ``cpp`` for C++/CUDA, ``runtime`` for what
the worker sees), its ``@rule(...)`` registration, and a red-team sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeVar

from kernelgym.registry import Registry
from kernelgym.verifier.result import Violation

__all__ = ["STAGES", "Findings", "Rule", "catalogue", "rule", "rule_message"]

Stage = Literal["python", "native", "runtime"]
STAGES: tuple[Stage, ...] = ("python", "native", "runtime")
F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class Rule:
    """One rule of the catalogue.

    Attributes:
        id: the rule id a :class:`~kernelgym.verifier.result.Violation` carries (``torch-compute-in-forward``).
        stage: ``python`` or ``native`` (static, checked by ``inspect``) or ``runtime`` (checked by the worker).
        summary: what the rule flags, in one line (the documentation table).
        module: the module that checks it.
    """

    id: str
    stage: Stage
    summary: str
    module: str


_CATALOGUE: Registry[Rule] = Registry("rule")


def rule(rule_id: str, summary: str, *, stage: Stage) -> Callable[[F], F]:
    """Decorator registering rule ``rule_id`` on the function (or method) that checks it.

    Raises:
        DuplicateNameError: another rule is registered as ``rule_id``.
        ValueError: ``stage`` is not one of :data:`STAGES`.
    """
    if stage not in STAGES:
        raise ValueError(f"a rule's stage is one of {STAGES}, not {stage!r}")

    def decorate(checker: F) -> F:
        _CATALOGUE.add(rule_id, Rule(rule_id, stage, summary, checker.__module__))
        return checker

    return decorate


def catalogue(stage: Stage | None = None) -> Mapping[str, Rule]:
    """Every registered rule by id (only those of ``stage`` when given), in id order.

    Example:
        >>> "torch-compute-in-forward" in catalogue("python"), "aten-fallback" in catalogue("runtime")
        (True, True)
    """
    import kernelgym.verifier.rules  # noqa: F401  (imports every rule module, which registers its rules)

    return MappingProxyType(
        {name: _CATALOGUE[name] for name in _CATALOGUE.names() if stage is None or _CATALOGUE[name].stage == stage}
    )


_MAX_VIOLATIONS = 60


# --------------------------------------------------------------------------------------------
# Findings and messages
# --------------------------------------------------------------------------------------------

_MESSAGES = {
    "threading": "{name} starts threads, processes or asynchronous work; do all work synchronously in forward "
    "with your kernel (OpenMP inside C++ is fine).",
    "network": "{name} is network access, which is not allowed; the answer must be self-contained.",
    "subprocess": "{name} runs other processes or sends signals; remove it and compute in your kernel.",
    "file-access": "{name} accesses files or the operating system; remove it: pass kernel sources to load_inline "
    "as strings and compute every output from the inputs.",
    "harness-introspection": "{name} inspects the evaluation harness (frames, stack, gc, sys.modules); remove it.",
    "dynamic-code": "{name} runs or looks up code dynamically; use direct imports and direct calls.",
    "unresolved-call": "{name} is called, but what it holds is bound at run time and the judge cannot see it; "
    "call your kernel, its launcher or your own function by name.",
    "torch-compiler": "{name} lets a PyTorch compiler generate the kernel; write the kernel yourself "
    "(load_inline or @triton.jit).",
    "monkey-patching": "{name} replaces behaviour of torch/time/triton or another module; do not modify libraries "
    "or the harness.",
    "global-flags": "{name} changes process-wide state (backend flags, threads, precision, RNG seeds, environment); "
    "leave global settings alone.",
    "precision-downgrade": "{name} lowers precision below the task's float32; compute and accumulate in float32.",
    "extra-stream": "{name} puts work on a non-default stream that the timer does not wait for; launch on the "
    "current stream.",
    "private-torch-api": "{name} is a private PyTorch internal; use only public allocation APIs and your own kernel.",
    "private-torch-compute": "{name} is a PyTorch operator reached through a private module; compute it in your own kernel.",
    "tensor-subclass": "{name}: outputs must be plain torch.Tensor objects; do not subclass Tensor or override "
    "__torch_function__/__torch_dispatch__.",
    "forbidden-import": "importing {name} is not allowed; use torch, torch.utils.cpp_extension, triton, math and "
    "standard helpers (typing, functools, ...).",
}


def rule_message(rule: str, name: str, target: str | None = None) -> str:
    """The sentence for ``rule`` about the code ``name`` (which resolves to ``target``)."""
    shown = f"`{name}`" if target is None or target == name else f"`{name}` (`{target}`)"
    return _MESSAGES[rule].format(name=shown)


class Findings:
    """Collects violations, one per (rule, line, where)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], Violation] = {}

    def add(self, rule_id: str, line: int, message: str, where: str = "python") -> None:
        """Record one violation (the first one per rule, line and place wins).

        Raises:
            KeyError: ``rule_id`` is not in the catalogue (a rule must be registered where it is checked).
        """
        if rule_id not in _CATALOGUE:
            raise KeyError(f"rule {rule_id!r} is not registered; decorate its checker with @rule")
        key = (rule_id, line, where)
        if key not in self.items:
            self.items[key] = Violation(rule_id, line, message, where)

    def result(self) -> tuple[Violation, ...]:
        """The violations by line, Python before native on the same line, at most a screenful."""
        ordered = sorted(self.items.values(), key=lambda v: (v.line, v.where != "python", v.rule))
        return tuple(ordered[:_MAX_VIOLATIONS])


