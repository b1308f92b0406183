"""Judge answers generated offline, many in one batch (``kernelgym eval <folder-or-jsonl>``).

Holds:
    GENERATION_FILE: KernelBench's name for one generated answer, ``level_<L>_problem_<P>_sample_<S>_kernel.py``.
    ANSWER_SUFFIXES: the files a folder of ``<task>.py`` answers may hold.
    AnswerSet: the answers found at one path, each paired with its task and sample.
    read_answers: the answers of a folder (KernelBench's generations layout or ``<task>.py`` files) or a JSONL file.
    judge_answers: judge them through the verifier in batches and write a run folder like ``kernelgym bench``.

People who benchmark a model usually generate its answers first and judge them
later (KernelBench's ``eval_from_generations.py`` reads a folder of
``level_<L>_problem_<P>_sample_<S>_kernel.py`` files). Here such a folder, a
folder of files named after task ids, or a JSONL file of
``{"task_id": ..., "answer": ..., "sample": ...}`` records (``sample`` optional)
is judged in batches through ``Verifier.evaluate_many``. The run folder is the
benchmark's (``attempts.jsonl``, ``run.json``, ``summary.json``, plots), written
by the benchmark's own code, so the metrics are the same and ``--resume``
skips every answer already judged. Each answer is a one-turn episode; the
tasks of the run are the tasks that have an answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, replace
from pathlib import Path

from kernelgym.bench.config import BenchConfig, BenchSummary
from kernelgym.bench.runner import Progress, batches, write_summary
from kernelgym.bench.runs import ATTEMPTS_FILE, attempt_record, prepare_out_dir, run_settings
from kernelgym.envs.kernel_env import VerifierLike, make_verifier
from kernelgym.errors import KernelGymError
from kernelgym.tasks import default_backend, load_suite
from kernelgym.tasks.task import Task, TaskSuite
from kernelgym.verifier.result import EvalResult

__all__ = ["ANSWER_SUFFIXES", "GENERATION_FILE", "AnswerSet", "judge_answers", "read_answers"]

GENERATION_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
ANSWER_SUFFIXES = (".py", ".md", ".txt")
_SHOWN = 5  # unknown names listed in an error message


@dataclass(frozen=True)
class AnswerSet:
    """The answers found at one path.

    Attributes:
        name: a short name for the run (the path's file name).
        layout: ``"generations"``, ``"task-files"`` or ``"jsonl"``.
        suite: the tasks that have at least one answer, in suite order.
        answers: ``(task, sample, answer text)`` triples, in suite order, then sample order.
    """

    name: str
    layout: str
    suite: TaskSuite
    answers: tuple[tuple[Task, int, str], ...]

    @property
    def k(self) -> int:
        """Samples per task: one more than the highest sample index."""
        return 1 + max(sample for _, sample, _ in self.answers)


def _unknown(names: list[str], suite: TaskSuite, how: str) -> KernelGymError:
    shown = ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
    return KernelGymError(
        f"no task of suite {suite.name!r} matches {shown}; {how} (`kernelgym tasks --suite {suite.name}` lists them)"
    )


def _generations(folder: Path, suite: TaskSuite) -> list[tuple[Task, int, Path]]:
    by_number = {(t.level, t.problem_id): t for t in suite}
    found, unknown = [], []
    for path in sorted(folder.iterdir()):
        match = GENERATION_FILE.match(path.name)
        if match is None or not path.is_file():
            continue
        level, problem, sample = (int(g) for g in match.groups())
        task = by_number.get((level, problem))
        if task is None:
            unknown.append(path.name)
        else:
            found.append((task, sample, path))
    if unknown:
        raise _unknown(unknown, suite, "give the suite these answers were generated for with "
                       "--suite kernelbench:<KernelBench dir>[:level]")
    return found


def _task_files(folder: Path, suite: TaskSuite) -> list[tuple[Task, int, Path]]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in ANSWER_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    if not files:
        raise KernelGymError(
            f"{folder} holds no answers: expected level_<L>_problem_<P>_sample_<S>_kernel.py files (KernelBench's "
            f"generations) or files named after task ids ({', '.join('*' + s for s in ANSWER_SUFFIXES)})"
        )
    found, unknown = [], []
    for path in files:
        spec = path.relative_to(folder).with_suffix("").as_posix()
        try:
            found.append((suite[spec], 0, path))
        except KernelGymError:
            unknown.append(spec)
    if unknown:
        raise _unknown(unknown, suite, "name each answer file after its task id, e.g. 1_ReLU.py or level1/1_ReLU.py")
    return found


def _jsonl(path: Path, suite: TaskSuite) -> list[tuple[Task, int, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelGymError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    found, unknown, next_sample = [], [], {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KernelGymError(f"{path}:{number} is not JSON ({exc.msg}); write one JSON object per line") from None
        sample = record.get("sample") if isinstance(record, dict) else None
        if (not isinstance(record, dict) or not isinstance(record.get("task_id"), str)
                or not isinstance(record.get("answer"), str)
                or not (sample is None or (isinstance(sample, int) and not isinstance(sample, bool) and sample >= 0))):
            raise KernelGymError(
                f'{path}:{number}: expected {{"task_id": "<task id>", "answer": "<text>"}} '
                '(and optionally "sample": <integer >= 0>)'
            )
        try:
            task = suite[record["task_id"]]
        except KernelGymError:
            unknown.append(f"{record['task_id']!r} ({path}:{number})")  # the line, so the record can be found
            continue
        if sample is None:
            sample = next_sample.get(task.id, 0)
        next_sample[task.id] = max(next_sample.get(task.id, 0), sample + 1)
        found.append((task, sample, record["answer"]))
    if unknown:
        raise _unknown(unknown, suite, "use the task ids of --suite in task_id")
    if not found:
        raise KernelGymError(f"{path} holds no answers; write one {{\"task_id\": ..., \"answer\": ...}} object per line")
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KernelGymError(f"cannot read answer file {path}: {exc.strerror or exc}") from None


def read_answers(path: str | Path, suite: TaskSuite) -> AnswerSet:
    """The answers at ``path``, each paired with its task of ``suite`` and its sample index.

    Args:
        path: a folder in KernelBench's generations layout (``level_<L>_problem_<P>_sample_<S>_kernel.py``;
            other files are ignored), a folder of answers named after task ids (``1_ReLU.py``,
            ``level1/1_ReLU.py``; ``.py``, ``.md`` or ``.txt``), or a ``.jsonl`` file of
            ``{"task_id", "answer"[, "sample"]}`` records (samples numbered in order when absent).
        suite: the tasks the answers answer.

    Raises:
        KernelGymError: the path is missing, holds no answers, names a task the suite lacks,
            or answers one (task, sample) twice.

    Example:
        >>> import pathlib, tempfile
        >>> from kernelgym.tasks import load_suite
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "level_1_problem_3_sample_0_kernel.py").write_text("class ModelNew: ...")
        >>> answers = read_answers(folder, load_suite("cpu"))
        >>> answers.layout, [(task.id, sample) for task, sample, _ in answers.answers]
        ('generations', [('level1/3_Tanh', 0)])
    """
    path = Path(path)
    if not path.exists():
        raise KernelGymError(f"{path} does not exist; give a folder of answers or a .jsonl file of them")
    if path.is_dir():
        generated = any(GENERATION_FILE.match(p.name) for p in path.iterdir())
        layout = "generations" if generated else "task-files"
        files = _generations(path, suite) if generated else _task_files(path, suite)
        found = [(task, sample, _read_text(file)) for task, sample, file in files]
    else:
        layout, found = "jsonl", _jsonl(path, suite)
    seen: set[tuple[str, int]] = set()
    for task, sample, _ in found:
        if (task.id, sample) in seen:
            raise KernelGymError(f"{path} answers task {task.id!r} (sample {sample}) twice; keep one of them")
        seen.add((task.id, sample))
    order = {task_id: i for i, task_id in enumerate(suite.ids())}
    found.sort(key=lambda item: (order[item[0].id], item[1]))
    tasks = tuple(dict.fromkeys(task for task, _, _ in found))
    return AnswerSet(path.name or str(path), layout, TaskSuite(suite.name, tasks), tuple(found))


def _as_judged(verifier: VerifierLike, batch: Sequence[tuple[Task, int, str]]) -> Iterator[tuple[tuple[Task, int, str], EvalResult]]:
    """Each answer of ``batch`` with its result, in the order the verdicts come (a slow answer holds up no other's
    record); in the batch's order where the verifier has no ``submit``."""
    submit = getattr(verifier, "submit", None)
    if submit is None:
        yield from zip(batch, verifier.evaluate_many([(task, text) for task, _, text in batch]), strict=True)
        return
    futures = {submit(task, text): item for item in batch for task, _, text in [item]}
    for future in as_completed(futures):
        yield futures[future], future.result()


def judge_answers(
    path: str | Path, config: BenchConfig, verifier: VerifierLike | None = None
) -> BenchSummary:
    """Judge the answers at ``path`` (see :func:`read_answers`) and write a benchmark run folder.

    Args:
        path: the answers.
        config: the run's settings; ``suite``, ``backend``, ``out_dir``, ``resume``, ``overwrite``,
            the executor's and the judge's settings, ``batch_size``, ``plots`` and ``progress`` are used;
            ``agent`` becomes ``answers:<name>``, ``k`` the number of samples, ``turns`` 1.
        verifier: a verifier to share instead of building one (left open).

    Returns:
        The summary, with the metrics of ``kernelgym bench`` over the answered tasks.

    Raises:
        KernelGymError: unusable answers, a run folder in the way, or a resume with other answers or settings.
    """
    suite = load_suite(config.suite)
    answers = read_answers(path, suite)
    backend = config.backend or default_backend(config.suite)
    config = replace(config, agent=f"answers:{answers.name}", k=answers.k, turns=1, backend=backend)
    out = Path(config.out_dir)
    records = prepare_out_dir(out, run_settings(config, config.agent, backend, answers.suite), config)
    judged = {(r["task_id"], int(r["sample"])): r["status"] == "ok" for r in records}
    pending = [item for item in answers.answers if (item[0].id, item[1]) not in judged]
    keys = {(task.id, sample) for task, sample, _ in answers.answers}
    passed = sum(ok for key, ok in judged.items() if key in keys)
    progress = Progress(len(answers.answers), len(answers.answers) - len(pending), passed, config.progress, "eval")
    own_verifier = verifier is None
    try:
        if pending and verifier is None:
            verifier = make_verifier(backend, config.executor, config.verifier, config.num_workers, config.cache_dir,
                                     **config.executor_options())
        with (out / ATTEMPTS_FILE).open("a", encoding="utf-8") as sink:
            for batch in batches(pending, config.batch_size):
                progress.stage(f"judging {len(batch)} answers")
                for (task, sample, text), result in _as_judged(verifier, batch):  # each written as its verdict comes
                    record = attempt_record(task, sample, 1, text, result, terminated=result.ok, truncated=not result.ok)
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                    progress.advance(result.ok)
    finally:
        progress.close()
        if own_verifier and verifier is not None:
            verifier.close()
    return write_summary(config, config.agent, backend, answers.suite, out)
