"""A benchmark run folder: what it holds, how a run is started or resumed in it.

Holds:
    ATTEMPTS_FILE, SUMMARY_FILE, RUN_FILE, PLOT_FILES: what a run writes into its folder.
    read_attempts: the attempt records of a run folder, tolerating a torn last line.
    run_settings: the settings a run records in ``run.json``.
    prepare_out_dir: check or start the run folder; the records of the run being resumed.
    split_judge_errors: a run's records less its judge errors, and the answers to judge again.
    judge_error_answers: the answers of a run folder's judge errors, by episode (judged again on resume).
    episode_records: the records grouped by episode, in turn order.
    attempt_record: the record of one judged attempt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelgym.bench.config import BenchConfig
from kernelgym.errors import KernelGymError
from kernelgym.tasks.task import Task, TaskSuite
from kernelgym.verifier.result import EvalResult, is_judge_error

__all__ = [
    "ATTEMPTS_FILE", "PLOT_FILES", "RUN_FILE", "SUMMARY_FILE", "attempt_record", "episode_records", "prepare_out_dir",
    "judge_error_answers", "read_attempts", "run_settings", "split_judge_errors",
]


ATTEMPTS_FILE = "attempts.jsonl"


SUMMARY_FILE = "summary.json"


RUN_FILE = "run.json"


PLOT_FILES = ("speedup_distribution.png", "metrics_per_level.png", "metrics_per_turn.png")


# The settings a resumed run must share with the run it continues.
_IDENTITY = ("suite", "agent", "backend", "k", "turns", "success_speedup", "seed")


def read_attempts(path: str | Path) -> list[dict[str, Any]]:
    """The attempt records of ``attempts.jsonl``, in file order.

    A run killed while writing may leave a torn last line; it is dropped (its
    attempt is judged again on resume). A bad line anywhere else is an error.

    Raises:
        KernelGymError: a line other than the last is not a JSON object.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "attempts.jsonl"
        >>> _ = path.write_text('{"task_id": "a", "turn": 1}\\n{"task_id": "a", "tu')
        >>> [r["task_id"] for r in read_attempts(path)]
        ['a']
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise KernelGymError(f"{path}:{number} is not valid JSON; the run file is damaged") from None
        if not isinstance(record, dict):
            raise KernelGymError(f"{path}:{number} is not a JSON object; the run file is damaged")
        records.append(record)
    return records


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def run_settings(config: BenchConfig, agent_name: str, backend: str, suite: TaskSuite) -> dict[str, Any]:
    settings = {name: getattr(config, name) for name in _IDENTITY}
    settings.update(agent=agent_name, backend=backend)
    settings.update(
        agent_options={key: _json_safe(value) for key, value in config.agent_options.items()},
        task_ids=suite.ids(),
        verifier=_json_safe(asdict(config.verifier)),
        executor=config.executor,
        fast_p_thresholds=list(config.fast_p_thresholds),
        max_feedback_chars=config.max_feedback_chars,
    )
    return settings


def prepare_out_dir(out: Path, settings: Mapping[str, Any], config: BenchConfig) -> list[dict[str, Any]]:
    """Check or start the run folder; return the records of the run being resumed.

    Judge errors are dropped from the run being resumed (see :func:`split_judge_errors`), so they are judged again.
    """
    run_file, attempts_file = out / RUN_FILE, out / ATTEMPTS_FILE
    existing = run_file.is_file() or attempts_file.is_file()
    if existing and config.overwrite:
        for name in (RUN_FILE, ATTEMPTS_FILE, SUMMARY_FILE, *PLOT_FILES):
            (out / name).unlink(missing_ok=True)
        existing = False
    if existing and not config.resume:
        raise KernelGymError(
            f"{out} already holds a benchmark run; pass --resume to continue it, --overwrite to start again, "
            "or choose another --out"
        )
    records: list[dict[str, Any]] = []
    if existing:
        try:
            previous = json.loads(run_file.read_text(encoding="utf-8")) if run_file.is_file() else {}
        except json.JSONDecodeError:
            raise KernelGymError(f"{run_file} is damaged; cannot tell what run to resume") from None
        changed = [name for name in _IDENTITY if name in previous and previous[name] != settings[name]]
        if changed:
            diffs = ", ".join(f"{n}: {previous[n]!r} -> {settings[n]!r}" for n in changed)
            raise KernelGymError(f"cannot resume the run in {out} with different settings ({diffs})")
        records = split_judge_errors(read_attempts(attempts_file))[0]
        # Rewrite without a torn tail or judge errors, so appended lines start on a fresh line.
        text = "".join(json.dumps(r) + "\n" for r in records)
        if attempts_file.is_file() and attempts_file.read_text(encoding="utf-8") != text:
            tmp = attempts_file.with_suffix(".jsonl.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, attempts_file)
    out.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return records


def split_judge_errors(
    records: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], dict[tuple[str, int], str]]:
    """The records less each episode's first judge error and what came after it; that attempt's answer, by episode.

    A judge error says nothing about the answer, so the attempt is judged again; the attempts after it
    answered the judge's failure, not a verdict, and are dropped with it.

    Example:
        >>> records = [{"task_id": "a", "sample": 0, "turn": 1, "status": "judge_error", "response": "x"},
        ...            {"task_id": "b", "sample": 0, "turn": 1, "status": "ok", "response": "y"}]
        >>> kept, again = split_judge_errors(records)
        >>> [r["task_id"] for r in kept], again
        (['b'], {('a', 0): 'x'})
    """
    records = list(records)
    cut: dict[tuple[str, int], int] = {}
    again: dict[tuple[str, int], str] = {}
    for record in records:
        key = (record["task_id"], int(record["sample"]))
        if is_judge_error(record) and record["turn"] < cut.get(key, record["turn"] + 1):
            cut[key], again[key] = record["turn"], record.get("response", "")
    kept = [r for r in records if r["turn"] < cut.get((r["task_id"], int(r["sample"])), r["turn"] + 1)]
    return kept, again


def judge_error_answers(path: str | Path) -> dict[tuple[str, int], str]:
    """The answers of the judge errors in ``attempts.jsonl`` at ``path``, by episode: what a resumed run judges again."""
    return split_judge_errors(read_attempts(path))[1]


def episode_records(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], list[Mapping[str, Any]]]:
    episodes: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for record in records:
        episodes.setdefault((record["task_id"], int(record["sample"])), []).append(record)
    for key, group in episodes.items():
        group.sort(key=lambda r: r["turn"])
        if [r["turn"] for r in group] != list(range(1, len(group) + 1)):
            raise KernelGymError(f"attempts of episode {key} are not turns 1..n; the run file is damaged")
    return episodes


def attempt_record(
    task: Task, sample: int, turn: int, answer: str, result: EvalResult, terminated: bool, truncated: bool
) -> dict[str, Any]:
    head = {
        "task_id": task.id,
        "level": task.level,
        "sample": sample,
        "turn": turn,
        "final": terminated or truncated,
        "terminated": terminated,
        "response": answer,
    }
    return {**head, **{key: value for key, value in result.to_dict().items() if key not in head}}
