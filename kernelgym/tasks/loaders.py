"""Loaders that turn KernelBench-format files into tasks and suites.

Task files are only read and parsed (``ast``), never executed here: running a
reference program is the verifier's job, inside a worker process.

Holds:
    load_task_file: any task file -> Task (level and id from KernelBench's ``level{N}/{id}_{Name}.py`` naming).
    load_kernelbench_dir: a KernelBench tree (``level1/``, ``level2/``, ...) -> TaskSuite,
        with an optional ``manifest.json`` and ``solutions/<backend>/`` beside the levels; a tree
        without solutions of its own gets the bundled ``kernelbench`` answer set.
    load_kernelbench_parquet: KernelBench's Hugging Face parquet export -> TaskSuite.
    load_suite: one entry point for bundled suites, ``kernelbench:<path>[:level]`` specs and plain paths.
    bundled_suites: names of the suites shipped inside the package.
    default_backend: the backend a suite targets unless told otherwise (``eval``, ``bench`` and the envs agree).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelgym.errors import TaskError, require_extra
from kernelgym.tasks.task import Task, TaskSuite

__all__ = [
    "bundled_suites",
    "default_backend",
    "load_kernelbench_dir",
    "load_kernelbench_parquet",
    "load_suite",
    "load_task_file",
]

SUITES_DIR = Path(__file__).resolve().parent / "suites"
"""Where the bundled suites live (package data)."""

KERNELBENCH_SOLUTIONS = SUITES_DIR / "kernelbench"
"""Honest answers for KernelBench's own task files (``solutions/<backend>/level<N>/``), by task id."""

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_TASK_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_TASK_STEM = re.compile(r"^(\d+)_(.+)$")
_REQUIRED = ("class Model", "def get_inputs", "def get_init_inputs")
_MANIFEST_KEYS = frozenset({"atol", "rtol", "variants", "why"})
_PARQUET_COLUMNS = ("code", "level", "name", "problem_id")
_KERNELBENCH_PREFIX = "kernelbench:"


def _check_source(source: str, where: str) -> None:
    """Raise TaskError unless ``source`` parses and defines Model, get_inputs and get_init_inputs at top level."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as exc:
        raise TaskError(f"{where} is not valid Python (line {exc.lineno}: {exc.msg}); fix the task file") from None
    defined = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined.add(f"class {node.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(f"def {node.name}")
    missing = [name for name in _REQUIRED if name not in defined]
    if missing:
        raise TaskError(
            f"{where} is not a KernelBench task: it does not define {', '.join(f'`{m}`' for m in missing)} "
            "at module level; a task file defines `class Model(nn.Module)`, `def get_inputs()` and "
            "`def get_init_inputs()`"
        )


def _make_task(source: str, level: int, problem_id: int, name: str, suite: str, where: str) -> Task:
    _check_source(source, where)
    return Task(
        id=f"level{level}/{problem_id}_{name}",
        name=name,
        level=level,
        problem_id=problem_id,
        source=source,
        suite=suite,
    )


def load_task_file(path: str | Path, suite: str = "") -> Task:
    """Load one task file: any Python file that defines ``Model``, ``get_inputs`` and ``get_init_inputs``.

    The file is parsed, not run. KernelBench's naming, ``.../level{N}/{id}_{Name}.py``,
    gives the level, problem id and name; a file named otherwise still loads:
    without a ``level{N}`` folder its level is 0, without an ``{id}_`` prefix its
    problem id is 0 and its name is the file's stem.

    Args:
        path: the task file.
        suite: the suite name recorded on the task.

    Returns:
        The task; its id is ``"level{N}/{stem}"`` inside a ``level{N}`` folder, else the file's stem.

    Raises:
        TaskError: the file is missing, not Python, or lacks a required definition.

    Example:
        >>> load_task_file(SUITES_DIR / "cpu" / "level1" / "3_Tanh.py").id
        'level1/3_Tanh'
    """
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise TaskError(f"cannot read task file {path}: {reason}; give the path of a task .py file") from None
    level_match = _LEVEL_DIR.match(path.parent.name)
    name_match = _TASK_STEM.match(path.stem)
    level = int(level_match.group(1)) if level_match else 0
    problem_id, name = (int(name_match.group(1)), name_match.group(2)) if name_match else (0, path.stem)
    _check_source(source, str(path))
    return Task(
        id=f"level{level}/{path.stem}" if level_match else path.stem,
        name=name,
        level=level,
        problem_id=problem_id,
        source=source,
        suite=suite,
    )


def _level_dirs(root: Path) -> list[tuple[int, Path]]:
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _LEVEL_DIR.match(p.name))]
    return sorted(found)


def _find_kernelbench_root(path: Path) -> Path | None:
    """The folder that holds ``level<N>/`` folders: ``path`` itself or its ``KernelBench/`` child."""
    for candidate in (path, path / "KernelBench"):
        if candidate.is_dir() and _level_dirs(candidate):
            return candidate
    return None


def _task_files(level_dir: Path) -> list[tuple[int, Path]]:
    found = [(int(m.group(1)), p) for p in level_dir.iterdir() if p.is_file() and (m := _TASK_FILE.match(p.name))]
    return sorted(found)


def _read_manifest(root: Path) -> dict[str, Mapping[str, Any]]:
    """Per-task settings from ``root/manifest.json``: ``{"tasks": {task_id: {...}}}`` or ``{task_id: {...}}``."""
    path = root / "manifest.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskError(f"cannot read suite manifest {path}: {exc}") from None
    entries = data.get("tasks", data) if isinstance(data, dict) else None
    if not isinstance(entries, dict) or not all(isinstance(v, dict) for v in entries.values()):
        raise TaskError(f"suite manifest {path} must map task ids to objects, e.g. {{\"tasks\": {{\"level1/1_ReLU\": {{}}}}}}")
    for task_id, entry in entries.items():
        unknown = sorted(set(entry) - _MANIFEST_KEYS)
        if unknown:
            raise TaskError(
                f"suite manifest {path}: task {task_id!r} has unknown keys {unknown}; "
                f"allowed keys are {sorted(_MANIFEST_KEYS)}"
            )
        variants = entry.get("variants", [])
        if not isinstance(variants, list) or not all(isinstance(v, dict) and v for v in variants):
            raise TaskError(
                f"suite manifest {path}: task {task_id!r} 'variants' must be a list of non-empty objects "
                'like {"batch_size": 7, "dim": 1001}'
            )
    return entries


def _read_solutions(root: Path) -> dict[str, dict[str, str]]:
    """Task id -> backend -> answer text, from ``root/solutions/<backend>/level<N>/<id>_<Name>.py``."""
    solutions: dict[str, dict[str, str]] = {}
    base = root / "solutions"
    if not base.is_dir():
        return solutions
    for backend_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for level, level_dir in _level_dirs(backend_dir):
            for _, path in _task_files(level_dir):
                task_id = f"level{level}/{path.stem}"
                solutions.setdefault(task_id, {})[backend_dir.name] = path.read_text(encoding="utf-8")
    return solutions


def _with_extras(task: Task, entry: Mapping[str, Any], solutions: Mapping[str, str]) -> Task:
    def tolerance(key: str) -> float | None:
        value = entry.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
            raise TaskError(f"task {task.id!r}: manifest {key!r} must be a non-negative number, got {value!r}")
        return None if value is None else float(value)

    return replace(
        task,
        atol=tolerance("atol"),
        rtol=tolerance("rtol"),
        variants=tuple(dict(v) for v in entry.get("variants", ())),
        solutions=dict(solutions),
    )


def load_kernelbench_dir(path: str | Path, level: int | None = None, name: str = "kernelbench") -> TaskSuite:
    """Load a KernelBench tree: a folder holding ``level1/``, ``level2/``, ... (or their ``KernelBench/`` parent).

    Beside the level folders, an optional ``manifest.json`` sets per-task
    ``atol``/``rtol``/``variants`` and an optional ``solutions/<backend>/level<N>/``
    tree holds reference answers (this is how bundled suites are stored). A tree
    without ``solutions/`` (KernelBench itself) gets the bundled answers of
    :data:`KERNELBENCH_SOLUTIONS` for the task ids it has.

    Args:
        path: the tree's root, or the repository root that contains ``KernelBench/``.
        level: keep only this level.
        name: the suite name.

    Returns:
        The tasks ordered by level, then problem id.

    Raises:
        TaskError: no level folders, no tasks, a bad task file, or a manifest or
            solution naming a task that does not exist.
    """
    path = Path(path)
    root = _find_kernelbench_root(path)
    if root is None:
        raise TaskError(
            f"{path} is not a KernelBench directory: it has no level<N>/ folders "
            "(give the folder that holds level1/, level2/, ... or its parent with KernelBench/)"
        )
    tasks = [
        load_task_file(file, suite=name) for _, level_dir in _level_dirs(root) for _, file in _task_files(level_dir)
    ]
    manifest = _read_manifest(root)
    solutions = _read_solutions(root)
    known = {t.id for t in tasks}
    for what, ids in (("manifest.json", manifest), ("solutions/", solutions)):
        stray = sorted(set(ids) - known)
        if stray:
            raise TaskError(f"{root}: {what} names tasks that have no reference file: {', '.join(stray)}")
    if not solutions:
        solutions = _read_solutions(KERNELBENCH_SOLUTIONS)
    tasks = [t for t in tasks if level is None or t.level == level]
    if not tasks:
        where = f"level{level}/ of {root}" if level is not None else str(root)
        raise TaskError(f"no task files (<id>_<Name>.py) found in {where}")
    return TaskSuite(name, tuple(_with_extras(t, manifest.get(t.id, {}), solutions.get(t.id, {})) for t in tasks))


def _parquet_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.rglob("*.parquet"))
    return [path]


def _parquet_name(raw: str, problem_id: int) -> str:
    """``"1_Square_matrix_multiplication_.py"`` or ``"Square_matrix_multiplication_"`` -> the bare name."""
    name = raw.strip().removesuffix(".py")
    return name.removeprefix(f"{problem_id}_")


def load_kernelbench_parquet(path: str | Path, level: int | None = None, name: str = "kernelbench") -> TaskSuite:
    """Load KernelBench's Hugging Face parquet export (columns ``code``, ``level``, ``name``, ``problem_id``).

    Reads a local file, or every ``*.parquet`` under a local folder (the
    dataset's ``data/level_1-00000-of-00001.parquet`` layout). Names may come
    with or without the ``{id}_`` prefix and the ``.py`` suffix.

    Args:
        path: a ``.parquet`` file or a folder of them.
        level: keep only this level.
        name: the suite name.

    Returns:
        The tasks ordered by level, then problem id.

    Raises:
        MissingExtraError: pyarrow is not installed (``pip install 'kernelgym[kernelbench]'``).
        TaskError: the file is missing or lacks a column, or a row is not a KernelBench task.
    """
    path = Path(path)
    if not path.exists():
        raise TaskError(f"no such parquet file or folder: {path}")
    files = _parquet_files(path)
    if not files:
        raise TaskError(f"no *.parquet files under {path}")
    parquet = require_extra("pyarrow.parquet", "kernelbench")
    tasks = []
    for file in files:
        try:
            table = parquet.read_table(file)
        except (OSError, ValueError) as exc:
            raise TaskError(f"cannot read parquet file {file}: {exc}") from None
        missing = [c for c in _PARQUET_COLUMNS if c not in table.column_names]
        if missing:
            raise TaskError(
                f"{file} is not a KernelBench parquet export: it lacks column(s) {', '.join(missing)} "
                f"(expected {', '.join(_PARQUET_COLUMNS)})"
            )
        for row in table.select(list(_PARQUET_COLUMNS)).to_pylist():
            row_level, problem_id = int(row["level"]), int(row["problem_id"])
            if level is not None and row_level != level:
                continue
            task_name = _parquet_name(row["name"], problem_id)
            where = f"{file} (level {row_level}, problem {problem_id})"
            tasks.append(_make_task(row["code"], row_level, problem_id, task_name, name, where))
    if not tasks:
        raise TaskError(f"no tasks{f' of level {level}' if level is not None else ''} in {path}")
    tasks.sort(key=lambda t: (t.level, t.problem_id))
    return TaskSuite(name, tuple(tasks))


def bundled_suites() -> list[str]:
    """Names of the suites shipped with kernelgym (folders under ``kernelgym/tasks/suites/``).

    Example:
        >>> "cpu" in bundled_suites()
        True
    """
    if not SUITES_DIR.is_dir():
        return []
    return sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir() and _level_dirs(p))


def default_backend(suite: str | Path) -> str:
    """The backend a suite targets: ``cpp`` for the bundled CPU suite, ``cuda`` for every other suite.

    Example:
        >>> default_backend("cpu"), default_backend("gpu"), default_backend("kernelbench:/data/KernelBench:1")
        ('cpp', 'cuda', 'cuda')
    """
    return "cpp" if str(suite) == "cpu" else "cuda"


def _load_path(path: Path, level: int | None) -> TaskSuite:
    if not path.exists():
        raise TaskError(f"no such task directory or parquet file: {path}")
    if path.is_dir() and _find_kernelbench_root(path) is not None:
        return load_kernelbench_dir(path, level=level)
    if path.suffix == ".parquet" or (path.is_dir() and any(path.rglob("*.parquet"))):
        return load_kernelbench_parquet(path, level=level)
    raise TaskError(
        f"{path} is neither a KernelBench directory (with level<N>/ folders) nor a KernelBench parquet file"
    )


def load_suite(spec: str | Path) -> TaskSuite:
    """Load a task suite from a short spec.

    Specs:
        ``"cpu"``, ``"gpu"``: a bundled suite (see :func:`bundled_suites`).
        ``"kernelbench:<dir-or-parquet>[:level]"``: a KernelBench tree or parquet export,
        optionally one level (``kernelbench:/data/KernelBench:1``).
        any other path: a KernelBench tree or parquet export.

    Raises:
        TaskError: unknown suite name, missing path, or unusable content.

    Example:
        >>> suite = load_suite("cpu")
        >>> suite["level1/1_ReLU"].name
        'ReLU'
    """
    spec = str(spec)
    if spec.startswith(_KERNELBENCH_PREFIX):
        rest = spec[len(_KERNELBENCH_PREFIX):]
        head, sep, tail = rest.rpartition(":")
        if sep and tail.isdigit():
            return _load_path(Path(head).expanduser(), int(tail))
        return _load_path(Path(rest).expanduser(), None)
    available = bundled_suites()
    if spec in available:
        return load_kernelbench_dir(SUITES_DIR / spec, name=spec)
    path = Path(spec).expanduser()
    if path.exists() or "/" in spec or "\\" in spec or path.suffix == ".parquet":
        return _load_path(path, None)
    raise TaskError(
        f"unknown task suite {spec!r}; bundled suites: {', '.join(available) or 'none'}; "
        "or give kernelbench:<dir-or-parquet>[:level] or a path to a KernelBench directory or parquet file"
    )
