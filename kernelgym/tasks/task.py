"""Tasks and task suites.

Holds:
    Task: one reference program (KernelBench format) to be replaced by a ``ModelNew``.
    TaskSuite: an ordered, named collection of tasks with lookup by id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelgym.errors import TaskError

__all__ = ["Task", "TaskSuite"]


@dataclass(frozen=True)
class Task:
    """A KernelBench-format reference program.

    The source defines ``class Model(nn.Module)``, ``get_inputs()`` and
    ``get_init_inputs()``. A candidate answer defines ``ModelNew`` with the
    same constructor arguments and the same outputs.

    Attributes:
        id: unique id inside its suite, ``"level{N}/{problem_id}_{name}"`` (a task file named
            otherwise: ``"level{N}/{stem}"`` or the file's stem).
        name: the problem name, e.g. ``"ReLU"``.
        level: KernelBench level (1 = single op, 2 = fused ops, 3 = architectures; 0 = unknown).
        problem_id: number of the problem inside its level (0 = unknown).
        source: the reference program text.
        suite: name of the suite the task came from.
        atol: absolute tolerance override (``None``: dtype default).
        rtol: relative tolerance override (``None``: dtype default).
        variants: extra input shapes; each maps module-level names of the
            reference (``batch_size``, ``dim``, ...) to values that replace them
            before ``get_inputs``/``get_init_inputs`` are called again.
        solutions: bundled honest reference solutions, backend name -> answer text.
        sandboxed: the source is untrusted (a served judge's request sent it): the judge runs it only in a
            sandboxed process, as it runs answers, and takes plain data back
            (:mod:`kernelgym.verifier.sandboxed_task`); never in its own process.

    ``variants`` and ``solutions`` hold plain dicts (so a task pickles into worker
    processes) and are left out of the hash.
    """

    id: str
    name: str
    level: int
    problem_id: int
    source: str
    suite: str = ""
    atol: float | None = None
    rtol: float | None = None
    variants: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    solutions: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    sandboxed: bool = False

    def solution(self, backend: str) -> str:
        """Return the bundled reference solution for ``backend``.

        Raises:
            TaskError: the task ships no solution for that backend.
        """
        try:
            return self.solutions[backend]
        except KeyError:
            raise TaskError(
                f"task {self.id!r} has no bundled {backend!r} solution "
                f"(it has: {', '.join(sorted(self.solutions)) or 'none'})"
            ) from None


@dataclass(frozen=True)
class TaskSuite:
    """An ordered collection of tasks.

    Example:
        >>> from kernelgym.tasks import load_suite
        >>> suite = load_suite("cpu")
        >>> len(suite) >= 20 and suite[suite.ids()[0]].level >= 1
        True
    """

    name: str
    tasks: tuple[Task, ...]

    def __post_init__(self) -> None:
        ids = [t.id for t in self.tasks]
        if len(set(ids)) != len(ids):
            raise TaskError(f"suite {self.name!r} has duplicate task ids")

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        matches = [t for t in self.tasks if t.id.split("/")[-1] == task_id or t.name == task_id]
        if len(matches) == 1:
            return matches[0]
        raise TaskError(
            f"no task {task_id!r} in suite {self.name!r}; `kernelgym tasks --suite {self.name}` lists them"
        )

    def ids(self) -> list[str]:
        """Task ids in suite order."""
        return [t.id for t in self.tasks]

    def filter(self, level: int | None = None, limit: int | None = None, ids: Sequence[str] = ()) -> TaskSuite:
        """The sub-suite of one level, then of the tasks ``ids`` (in that order; empty: all), then its first ``limit``.

        Raises:
            TaskError: an id names no task of the level.
        """
        suite = TaskSuite(self.name, tuple(t for t in self.tasks if level is None or t.level == level))
        tasks = [suite[task_id] for task_id in ids] if ids else list(suite.tasks)
        return TaskSuite(self.name, tuple(tasks[:limit] if limit is not None else tasks))
