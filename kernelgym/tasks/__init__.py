"""Tasks: KernelBench-format reference programs, suites of them, and their loaders.

Holds:
    Task, TaskSuite: the task types (kernelgym.tasks.task).
    load_suite, load_task_file, load_kernelbench_dir, load_kernelbench_parquet, bundled_suites:
        the loaders (kernelgym.tasks.loaders).
    default_backend: the backend a suite targets unless told otherwise.
"""

from __future__ import annotations

from kernelgym.tasks.loaders import (
    bundled_suites,
    default_backend,
    load_kernelbench_dir,
    load_kernelbench_parquet,
    load_suite,
    load_task_file,
)
from kernelgym.tasks.task import Task, TaskSuite

__all__ = [
    "Task",
    "TaskSuite",
    "bundled_suites",
    "default_backend",
    "load_kernelbench_dir",
    "load_kernelbench_parquet",
    "load_suite",
    "load_task_file",
]
