"""The package's imports point one way (DESIGN.md's layer order) and form no circle between subpackages."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kernelgym"

# Layer of every top-level module or subpackage: each may import only from lower layers and itself.
# Peers (same number) may not import each other, except agents, which bench and training build on.
LAYERS = {
    "errors": 0, "registry": 0.5, "options": 0.5,
    "tasks": 1, "backends": 1,
    "verifier": 2,
    "executor": 3,
    "envs": 4,
    "wrappers": 5,
    "agents": 6, "openrlhf": 6.25, "bench": 6.5, "training": 6.5, "serve": 6.5,
    "cli": 7,
    "__init__": 8,
}


def _unit(path: Path) -> str:
    """The layer unit of a module: its subpackage, or its own name at the top."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> set[str]:
    """Every kernelgym unit ``path`` imports, at module level or inside functions (``__init__``: the package itself)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kernelgym":
                found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "suites" not in p.relative_to(PACKAGE).parts]


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in _modules():
        unit = _unit(path)
        edges.setdefault(unit, set()).update(u for u in _imports(path) if u != unit)
    return edges


def test_every_unit_has_a_layer() -> None:
    assert {_unit(p) for p in _modules()} <= set(LAYERS)


def test_imports_only_point_down() -> None:
    upward = []
    for path in _modules():
        unit = _unit(path)
        for target in _imports(path) - {unit}:
            if LAYERS[target] >= LAYERS[unit]:
                upward.append(f"{path.relative_to(PACKAGE.parent)} imports kernelgym.{target}")
    assert upward == []


def test_no_circle_between_subpackages() -> None:
    edges = _edges()
    circles = []

    def visit(unit: str, stack: list[str]) -> None:
        for target in edges.get(unit, ()):
            if target in stack:
                circles.append(" -> ".join([*stack[stack.index(target):], target]))
            else:
                visit(target, [*stack, target])

    for start in edges:
        visit(start, [start])
    assert circles == []


def test_no_module_outside_task_data_is_oversized() -> None:
    oversized = [f"{p.relative_to(PACKAGE)}: {n}" for p in _modules() if (n := len(p.read_text().splitlines())) > 650]
    assert oversized == []
