"""Judge real LLM answers (CUDA-L1's published KernelBench answers) with kernelgym and with KernelBench's evaluator.

    # on one H100/H200 after `kernelgym prepare --backend cuda`, KernelBench in an ignored folder (.kb)
    python benchmarks/real_answers.py --answers cudal1_h100.json --kernelbench .kb --evaluator .kb/evaluator --out "$OUT"
    python benchmarks/real_answers.py --answers cudal1_h100.json --kernelbench .kb --dry-run --shard 1/4
    python benchmarks/real_answers.py report --inputs a/results.jsonl b/results.jsonl --out runs/real

The answers are read from the JSON-lines file given with ``--answers`` (one
object per line: ``level_id``, ``task_id``, ``ref_code``, ``custom_code``,
``score_default``, ...); a row is matched by level and problem id to the task
file ``level{L}/{id}_{Name}.py`` of the KernelBench tree given with
``--kernelbench``, and rows without ``custom_code`` are left out. The
reference is that task file (``--reference answers``: the row's own
``ref_code``, what the answer was written against). Phases, in order:

``kernelgym``
    one ``Verifier`` for the whole selection, every answer submitted at once,
    each verdict recorded as it arrives (strict status, the verdict and
    speedup under KernelBench's contract, stage seconds, the answer's own
    wall from submit to verdict, and how its code builds: ``load_inline``
    calls, inside a function, inside ``try:``).
``kernelbench``
    the answers of a seeded random sample (``--kb-sample``, ``--seed``, drawn
    from every answer with code, whatever this call selects) that this call
    selects, judged one at a time by KernelBench's own pipeline as
    ``kernelbench_scale.py`` runs it (its defaults), so that each is judged by
    both in the same call, kernelgym first.

A run may span calls: ``--shard i/n`` takes every n-th answer from the i-th
(the sample's first), each call appends to ``<out>/results.jsonl`` and ``--resume`` skips what is
recorded already. Besides one line per answer and phase, each call writes a
``call`` line (machine, software, flags) and a ``totals`` line per phase
(wall, answers judged). ``report`` rebuilds ``summary.json`` and
``summary.md`` from one or more results files: verdict counts, the agreement
of both judges' verdicts and speedups, throughput, timeouts on answers
KernelBench judged correct, and each answer's judging time against its builds
and calls.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import datetime
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import kernelbench_scale as kbs  # noqa: E402

from kernelgym.tasks import Task, load_kernelbench_dir  # noqa: E402
from kernelgym.verifier.result import Status  # noqa: E402

__all__ = ["Corpus", "read_answers", "answer_facts", "draw_sample", "select", "summarize", "render_markdown", "main"]

PHASES = ("kernelgym", "kernelbench")
LABEL = "cudal1"
KB_CLASSES = ("correct", "incorrect", "not compiled")
RUN_META = (*kbs.RUN_META, "backend", "reference", "prepare_s", "prepare_failed")
"""What the summary takes from each call's ``call`` line."""
SLACK_S = 20.0
"""Seconds added to an answer's builds and calls before its judging time is compared with them."""
OWN_TIME_LIMIT = 2.0
"""The judging time may be at most this many times its builds, its calls and :data:`SLACK_S` together."""
REPEATABLE = 0.05
"""KernelBench's speedups of an answer within this share of each other: a figure a second judge can be held to."""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The answers of a JSON-lines file that have code and a task file, and what was left out.

    Attributes:
        answers: one CUDA answer per row with code, in level and problem-id order.
        scores: CUDA-L1's own speedup (``score_default``) per answer key.
        rows: the rows read.
        without_code: rows with no ``custom_code``.
        unmatched: ``level/id`` of rows with code whose task file the tree lacks.
        same_reference: answers whose row's ``ref_code`` is the task file's source (whitespace aside).
    """

    answers: tuple[kbs.Answer, ...]
    scores: dict[str, float | None]
    rows: int
    without_code: int
    unmatched: tuple[str, ...]
    same_reference: int


def read_answers(path: str | Path, tasks: Iterable[Task], reference: str = "task-file") -> Corpus:
    """Read a CUDA-L1 JSON-lines file and match each row with code to its KernelBench task.

    Example:
        >>> import tempfile
        >>> task = Task("level1/19_ReLU", "ReLU", 1, 19, "class Model: pass")
        >>> rows = [{"level_id": 1, "task_id": 19, "ref_code": "", "custom_code": "class ModelNew: pass"},
        ...         {"level_id": 1, "task_id": 20, "ref_code": "", "custom_code": None},
        ...         {"level_id": 1, "task_id": 21, "ref_code": "", "custom_code": "None"}]
        >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        ...     _ = f.write("\\n".join(json.dumps(r) for r in rows))
        >>> corpus = read_answers(f.name, [task])
        >>> [a.key for a in corpus.answers], corpus.without_code
        (['cudal1:level1/19_ReLU'], 2)
    """
    by_number = {(t.level, t.problem_id): t for t in tasks}
    answers, scores, unmatched = [], {}, []
    rows = without_code = same = 0
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        rows += 1
        if not row.get("custom_code") or row["custom_code"].strip() == "None":  # CUDA-L1 writes "None" for no answer
            without_code += 1
            continue
        task = by_number.get((int(row["level_id"]), int(row["task_id"])))
        if task is None:
            unmatched.append(f"level{row['level_id']}/{row['task_id']}")
            continue
        ref = row.get("ref_code") or ""
        same += " ".join(ref.split()) == " ".join(task.source.split())
        if reference == "answers" and ref:
            task = dataclasses.replace(task, source=ref)
        answer = kbs.Answer(task, "cuda", row["custom_code"], label=LABEL)
        answers.append(answer)
        scores[answer.key] = row.get("score_default")
    answers.sort(key=lambda a: (a.task.level, a.task.problem_id))
    return Corpus(tuple(answers), scores, rows, without_code, tuple(unmatched), same)


def _is_load_inline(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "load_inline") or (
        isinstance(func, ast.Attribute) and func.attr == "load_inline")


def answer_facts(code: str) -> dict[str, Any]:
    """How an answer builds: its ``load_inline`` calls, whether one sits in a function or in a ``try:`` body,
    and whether its sources hold a ``PYBIND11_MODULE`` block (beside ``functions=`` that fails to build).
    Where the code does not parse, the calls are counted in its text and the rest is ``None``.

    Example:
        >>> code = "class ModelNew:\\n    def __init__(self):\\n        try:\\n            m = load_inline(name='m')\\n        except RuntimeError:\\n            m = None\\n"
        >>> answer_facts(code)
        {'load_inline': 1, 'in_function': True, 'in_try': True, 'pybind11_module': False}
    """
    facts: dict[str, Any] = {"load_inline": len(re.findall(r"\bload_inline\s*\(", code)), "in_function": None, "in_try": None,
                             "pybind11_module": "PYBIND11_MODULE" in code}
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return facts
    found: list[tuple[bool, bool]] = []
    try_nodes = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))

    def visit(node: ast.AST, in_function: bool, in_try: bool) -> None:
        if _is_load_inline(node):
            found.append((in_function, in_try))
        inner_function = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        body = set(map(id, node.body)) if isinstance(node, try_nodes) else set()
        for child in ast.iter_child_nodes(node):
            visit(child, inner_function, in_try or id(child) in body)

    visit(tree, False, False)
    facts.update(load_inline=len(found), in_function=any(f for f, _ in found), in_try=any(t for _, t in found))
    return facts


def draw_sample(answers: Sequence[kbs.Answer], size: int, seed: int) -> list[str]:
    """The keys of ``size`` answers drawn at random with ``seed`` (the same draw whatever the order of ``answers``
    or a call's selection), in level and problem-id order.

    Example:
        >>> tasks = [Task(f"level1/{i}_T", "T", 1, i, "") for i in range(1, 6)]
        >>> answers = [kbs.Answer(t, "cuda", "x", label=LABEL) for t in tasks]
        >>> draw_sample(answers, 2, 0) == draw_sample(list(reversed(answers)), 2, 0)
        True
    """
    order = {a.key: (a.task.level, a.task.problem_id) for a in answers}
    keys = sorted(order)
    return sorted(random.Random(seed).sample(keys, min(size, len(keys))), key=order.__getitem__)


def select(answers: Sequence[kbs.Answer], levels: Sequence[int], shard: tuple[int, int], limit: int | None,
           finished: Collection[tuple[str, str]] = (), phases: Sequence[str] = PHASES,
           sample: Iterable[str] = ()) -> list[kbs.Answer]:
    """This call's answers: those of ``levels`` (all when empty), every n-th from the i-th (``shard`` = (i, n),
    i from 1; the answers of the ``sample`` are dealt first, so every shard gets its share of them), less those
    every asked phase has recorded (``finished`` holds (phase, key); KernelBench's phase only asks for the
    sample), at most ``limit``.

    Example:
        >>> tasks = [Task(f"level{1 + i % 2}/{i}_T", "T", 1 + i % 2, i, "") for i in range(1, 7)]
        >>> answers = [kbs.Answer(t, "cuda", "x", label=LABEL) for t in tasks]
        >>> [a.task.problem_id for a in select(answers, [2], (1, 1), None)]
        [1, 3, 5]
        >>> [a.task.problem_id for a in select(answers, [], (2, 3), None, {("kernelgym", answers[1].key)}, ["kernelgym"])]
        [5]
    """
    index, count = shard
    sample = set(sample)
    picked = sorted((a for a in answers if not levels or a.task.level in levels), key=lambda a: a.key not in sample)
    picked = picked[index - 1::count]

    def done(answer: kbs.Answer) -> bool:
        return all((phase, answer.key) in finished for phase in phases if phase == "kernelgym" or answer.key in sample)

    picked = [a for a in picked if not done(a)]
    return picked[:limit] if limit is not None else picked


# -- judging --------------------------------------------------------------------------------------------------


def _first_line(text: str) -> str:
    """The feedback's first line after its ``Status:`` line (which the record holds already)."""
    lines = (line.strip() for line in text.splitlines() if line.strip() and not line.startswith("Status:"))
    return next(lines, "")[:300]


def kernelgym_record(answer: kbs.Answer, result: Any, wall_s: float, batch_s: float) -> dict[str, Any]:
    """One kernelgym verdict as a record: ``kernelbench_scale``'s fields, both verdicts, timings and the answer's facts."""
    verdict = result.kernelbench_verdict
    return {
        **kbs._kernelgym_record("kernelgym", answer, result, wall_s),
        "level": answer.task.level, "task_number": answer.task.problem_id, "batch_s": round(batch_s, 3),
        "kernelbench_verdict": verdict.value if verdict is not None else None,
        "kernelbench_speedup": result.kernelbench_speedup_eager, "kernelbench_differs_by": result.kernelbench_differs_by,
        "own_kernel_share": result.own_kernel_share,
        "feedback_first_line": _first_line(result.feedback or ""), **answer_facts(answer.program),
        "contract_line": next((line for line in (result.feedback or "").splitlines()
                               if line.startswith("Under KernelBench's own contract")), ""),
    }


def run_kernelgym(answers: Sequence[kbs.Answer], args: argparse.Namespace, recorder: kbs.CallRecorder,
                  deadline: float) -> dict[str, Any]:
    """Submit every answer to one verifier and record each verdict as it arrives; at the deadline the answers still
    without a verdict are recorded ``not_run``. Returns the phase's totals.

    With ``args.warm_up`` = k, the first k answers are judged before the clock starts and not recorded: the workers
    (a process, torch and a device context each) are then up, as in a loop that keeps its verifier.
    """
    from kernelgym import Verifier
    from kernelgym.verifier import VerifierConfig

    warm_up, answers = answers[:args.warm_up], answers[args.warm_up:]
    start = time.perf_counter()
    done: set[int] = set()
    hits = 0
    failure = ""
    try:
        with Verifier(backend=args.backend, config=VerifierConfig(rules=args.rules),
                      cache_dir=args.cache_dir or None) as verifier:
            if warm_up:
                began = time.perf_counter()
                concurrent.futures.wait([verifier.submit(a.task, a.text) for a in warm_up])
                kbs.log(f"kernelgym: {len(warm_up)} warm-up answers judged in {time.perf_counter() - began:.1f} s")
                start = time.perf_counter()
            submitted = {}
            for index, answer in enumerate(answers):
                submitted[verifier.submit(answer.task, answer.text)] = (index, time.perf_counter())
            kbs.log(f"kernelgym: {len(answers)} answers submitted in {time.perf_counter() - start:.1f} s")
            for index, began, result, error in kbs.verdicts_as_they_come(submitted, deadline, "kernelgym"):
                now = time.perf_counter()
                answer = answers[index]
                if error is not None:
                    recorder.add({**kbs._base("kernelgym", answer), "status": "harness_error", "seconds": round(now - began, 3),
                                  "feedback": kbs._record_text(f"{type(error).__name__}: {error}")})
                else:
                    hits += result.cache_hit
                    recorder.add(kernelgym_record(answer, result, now - began, now - start))
                done.add(index)
            wall = time.perf_counter() - start
    except Exception as exc:  # an executor failure ends the batch; what is left is recorded as such
        failure = f"{type(exc).__name__}: {exc}"
        kbs.log(f"kernelgym: batch failed: {traceback.format_exc()}")
        wall = time.perf_counter() - start
    for index, answer in enumerate(answers):
        if index not in done:
            status, why = ("harness_error", failure) if failure else ("not_run", "deadline passed before its verdict")
            recorder.add({**kbs._base("kernelgym", answer), "status": status, "seconds": 0.0, "feedback": why})
    return {"wall_s": round(wall, 3), "judged": len(done), "cache_hits": hits, "warm_up": len(warm_up)}


# -- summary --------------------------------------------------------------------------------------------------


def kernelbench_class(status: str) -> str | None:
    """KernelBench's verdict class of one of its records' status: correct, incorrect (compiled, wrong or raised) or
    not compiled (``compiled`` false: a failed build, an error before running, or its pipeline's timeout).

    Example:
        >>> [kernelbench_class(s) for s in ("ok", "runtime_error", "timeout", "not_run")]
        ['correct', 'incorrect', 'not compiled', None]
    """
    return {"ok": "correct", "incorrect": "incorrect", "runtime_error": "incorrect", "compile_error": "not compiled",
            "error": "not compiled", "timeout": "not compiled"}.get(status)


def contract_verdict(record: dict[str, Any]) -> str:
    """kernelgym's verdict under KernelBench's contract (its strict status where the record has none)."""
    return record.get("kernelbench_verdict") or record["status"]


def both_judged(records: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(kernelgym record, KernelBench record) of every answer both judged, in answer order."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        if r["status"] != "not_run":
            latest[(r["phase"], r["answer"])] = r
    keys = sorted(a for p, a in latest if p == "kernelbench" and ("kernelgym", a) in latest)
    return [(latest[("kernelgym", a)], latest[("kernelbench", a)]) for a in keys]


def _kernelbench_speedups(records: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Every speedup KernelBench's evaluator gave each answer it called correct, in the records' order."""
    speedups: dict[str, list[float]] = {}
    for r in records:
        if r["phase"] == "kernelbench" and r["status"] == "ok" and r.get("speedup"):
            speedups.setdefault(r["answer"], []).append(r["speedup"])
    return speedups


def _contract_speedup(kg: dict[str, Any]) -> float | None:
    """kernelgym's speedup under KernelBench's contract (the strict one where the contract's verdict is the strict
    one), where that verdict is ``ok``."""
    speedup = kg.get("kernelbench_speedup") or kg.get("speedup")
    return speedup if contract_verdict(kg) == "ok" and speedup else None


def kernelbench_spread(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """KernelBench's evaluator against itself: on answers it called correct in two judgements or more (in the records'
    order), median |last speedup / first speedup - 1|: the floor under any agreement with one of its runs.

    Example:
        >>> rs = [{"phase": "kernelbench", "answer": "a", "status": "ok", "speedup": s} for s in (1.0, 1.1)]
        >>> kernelbench_spread(rs)["median_abs_deviation"]
        0.1
    """
    speedups = _kernelbench_speedups(records)
    deviations = {a: abs(s[-1] / s[0] - 1.0) for a, s in speedups.items() if len(s) > 1}
    return {"answers": len(deviations),
            "median_abs_deviation": round(statistics.median(deviations.values()), 4) if deviations else None,
            "over_5_percent": sum(d > 0.05 for d in deviations.values())}


def against_kernelbench_median(records: Iterable[dict[str, Any]], repeatable: float | None = None) -> dict[str, Any]:
    """kernelgym's latest speedup under KernelBench's contract against the median of KernelBench's speedups, on answers
    KernelBench called correct in two judgements or more (its run-to-run spread shrunk by its own median); with
    ``repeatable``, only on the answers whose KernelBench speedups lie within that share of each other (largest over
    smallest, minus one): where KernelBench's own figure is one a second judge could be held to.

    Example:
        >>> rs = [{"phase": "kernelbench", "answer": "a", "status": "ok", "speedup": s} for s in (1.0, 1.2, 1.1)]
        >>> rs.append({"phase": "kernelgym", "answer": "a", "status": "ok", "kernelbench_speedup": 1.0})
        >>> against_kernelbench_median(rs)["median_abs_deviation"]
        0.0909
        >>> against_kernelbench_median(rs, repeatable=0.05)["answers"]
        0
    """
    latest = {r["answer"]: r for r in records if r["phase"] == "kernelgym" and r["status"] != "not_run"}
    mine = {a: speedup for a, r in latest.items() if (speedup := _contract_speedup(r))}
    deviations = {a: abs(mine[a] / statistics.median(s) - 1.0) for a, s in _kernelbench_speedups(records).items()
                  if len(s) > 1 and a in mine and (repeatable is None or max(s) / min(s) - 1.0 <= repeatable)}
    return {"answers": len(deviations),
            "median_abs_deviation": round(statistics.median(deviations.values()), 4) if deviations else None,
            "over_5_percent": sorted(a for a, d in deviations.items() if d > 0.05)}


def _statuses(records: Iterable[dict[str, Any]]) -> list[str]:
    """Every kernelgym status, then any other status the records hold (``harness_error``)."""
    seen = {r["status"] for r in records} | {contract_verdict(r) for r in records}
    return [s.value for s in Status] + sorted(seen - {s.value for s in Status})


def agreement_table(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]], contract: bool) -> dict[str, dict[str, int]]:
    """KernelBench's class x kernelgym's status (``contract``: its verdict under KernelBench's contract): counts.

    Example:
        >>> pairs = [({"status": "illegal", "kernelbench_verdict": "ok"}, {"status": "ok"})]
        >>> agreement_table(pairs, False)["correct"], agreement_table(pairs, True)["correct"]
        ({'illegal': 1}, {'ok': 1})
    """
    table: dict[str, dict[str, int]] = {c: {} for c in KB_CLASSES}
    for kg, kb in pairs:
        row = table[kernelbench_class(kb["status"]) or "not compiled"]
        status = contract_verdict(kg) if contract else kg["status"]
        row[status] = row.get(status, 0) + 1
    return table


def verdict_agreement(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """How often kernelgym's KernelBench-contract verdict (ok or not) is KernelBench's (correct or not); each disagreement."""
    disagreements = [
        {"answer": kg["answer"], "kernelgym": kg["status"], "kernelgym_contract": contract_verdict(kg),
         "kernelbench": kb["status"], "differs_by": kg.get("kernelbench_differs_by", ""),
         "first_feedback_line": kg.get("feedback_first_line") or _first_line(kg.get("feedback", ""))}
        for kg, kb in pairs if (contract_verdict(kg) == "ok") != (kb["status"] == "ok")
    ]
    n = len(pairs)
    return {"answers": n, "agree": n - len(disagreements),
            "share": round((n - len(disagreements)) / n, 4) if n else None, "disagreements": disagreements}


def speedup_agreement(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """On answers both call correct: kernelgym's speedup under KernelBench's contract over KernelBench's.

    Example:
        >>> pairs = [({"answer": "a", "status": "ok", "kernelbench_speedup": 2.1}, {"status": "ok", "speedup": 2.0}),
        ...          ({"answer": "b", "status": "ok", "kernelbench_speedup": 0.97}, {"status": "ok", "speedup": 1.0})]
        >>> speedup_agreement(pairs)["median_abs_deviation"]
        0.04
    """
    ratios = {}
    for kg, kb in pairs:
        mine = _contract_speedup(kg)
        if kb["status"] == "ok" and mine and kb.get("speedup"):
            ratios[kg["answer"]] = mine / kb["speedup"]
    deviations = [abs(r - 1.0) for r in ratios.values()]
    return {"answers": len(ratios), "ratios": {a: round(r, 4) for a, r in ratios.items()},
            "median_abs_deviation": round(statistics.median(deviations), 4) if deviations else None,
            "over_15_percent": sorted(a for a, r in ratios.items() if abs(r - 1.0) > 0.15)}


def throughput(totals: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Answers per minute of each judge over the calls that ran both phases (each judge's phase wall in those calls,
    kernelgym's from its verifier's start to its last verdict, KernelBench's prebuild included)."""
    calls = {t["call"] for t in totals if t["phase"] == "kernelgym"} & {t["call"] for t in totals if t["phase"] == "kernelbench"}
    out: dict[str, Any] = {"calls": len(calls)}
    for phase in PHASES:
        mine = [t for t in totals if t["phase"] == phase and t["call"] in calls and "wall_s" in t]
        judged, wall = sum(t.get("judged", 0) for t in mine), sum(t["wall_s"] for t in mine)
        out[phase] = {"answers": judged, "wall_s": round(wall, 3),
                      "answers_per_min": round(judged / wall * 60.0, 3) if wall else None}
        if phase == "kernelgym":
            out[phase]["cache_hits"] = sum(t.get("cache_hits", 0) for t in mine)
    kg, kb = out["kernelgym"]["answers_per_min"], out["kernelbench"]["answers_per_min"]
    out["ratio"] = round(kg / kb, 3) if kg and kb else None
    return out


def own_time(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Each kernelgym verdict's judging time over its builds plus its calls plus 20 s (builds: the build stage; calls:
    the check and time stages), the largest ratio and those over :data:`OWN_TIME_LIMIT`: ``stage`` ratios take the
    sum of its stages, ``wall`` ratios its wall from submit to verdict (which includes waiting behind the batch).

    Example:
        >>> r = {"phase": "kernelgym", "answer": "a", "status": "ok", "seconds": 60.0,
        ...      "stage_seconds": {"extract": 0.0, "inspect": 0.0, "build": 10.0, "check": 5.0, "time": 5.0}}
        >>> own_time([r])["largest_stage_ratio"], own_time([r])["largest_wall_ratio"]
        (['a', 0.5], ['a', 1.5])
    """
    stage, wall = {}, {}
    for r in records:
        s = r.get("stage_seconds")
        if r["phase"] != "kernelgym" or r["status"] == "not_run" or not s:
            continue
        bound = s.get("build", 0.0) + s.get("check", 0.0) + s.get("time", 0.0) + SLACK_S
        stage[r["answer"]] = round(sum(s.values()) / bound, 3)
        wall[r["answer"]] = round(r["seconds"] / bound, 3)

    def largest(ratios: dict[str, float]) -> list[Any] | None:
        return list(max(ratios.items(), key=lambda item: item[1])) if ratios else None

    return {"answers": len(stage), "largest_stage_ratio": largest(stage), "largest_wall_ratio": largest(wall),
            "stage_over_limit": sorted(a for a, v in stage.items() if v > OWN_TIME_LIMIT),
            "wall_over_limit": sorted(a for a, v in wall.items() if v > OWN_TIME_LIMIT)}


def summarize(records: Sequence[dict[str, Any]], totals: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Everything the report shows, from answer records (later ones win per phase and answer) and totals lines.

    Example:
        >>> recs = [{"phase": "kernelgym", "answer": "a", "status": "illegal", "kernelbench_verdict": "ok"},
        ...         {"phase": "kernelbench", "answer": "a", "status": "ok"}]
        >>> summarize(recs)["verdict_agreement"]["share"]
        1.0
    """
    latest = {(r["phase"], r["answer"]): r for r in records}
    kg = [r for (p, _), r in latest.items() if p == "kernelgym"]
    kb = [r for (p, _), r in latest.items() if p == "kernelbench"]
    pairs = both_judged(latest.values())
    counts: dict[str, dict[str, int]] = {"strict": {}, "kernelbench_contract": {}, "kernelbench": {}}
    for r in kg:
        counts["strict"][r["status"]] = counts["strict"].get(r["status"], 0) + 1
        if r["status"] != "not_run":
            verdict = contract_verdict(r)
            counts["kernelbench_contract"][verdict] = counts["kernelbench_contract"].get(verdict, 0) + 1
    for r in kb:
        counts["kernelbench"][r["status"]] = counts["kernelbench"].get(r["status"], 0) + 1
    return {
        "answers": {"kernelgym": len(kg), "kernelbench": len(kb), "both_judged": len(pairs),
                    "both_in_one_call": sum(a.get("call") == b.get("call") for a, b in pairs)},
        "counts": counts,
        "agreement_strict": agreement_table(pairs, contract=False),
        "agreement_contract": agreement_table(pairs, contract=True),
        "verdict_agreement": verdict_agreement(pairs),
        "speedup_agreement": speedup_agreement(pairs),
        "kernelbench_spread": kernelbench_spread(records),
        "against_kernelbench_median": against_kernelbench_median(records),
        "against_repeatable_kernelbench": against_kernelbench_median(records, repeatable=REPEATABLE),
        "throughput": throughput(totals),
        "timeouts_on_kernelbench_correct": sorted(a["answer"] for a, b in pairs if b["status"] == "ok" and "timeout" in
                                                  (a["status"], contract_verdict(a))),
        "own_time": own_time(kg),
    }


def _table(table: dict[str, dict[str, int]], columns: Sequence[str]) -> list[str]:
    lines = ["| KernelBench \\ kernelgym | " + " | ".join(columns) + " | total |", "| --- |" + " --- |" * (len(columns) + 1)]
    for kb_class, row in table.items():
        lines.append(f"| {kb_class} | " + " | ".join(str(row.get(c, 0)) for c in columns) + f" | {sum(row.values())} |")
    return lines


def render_markdown(summary: dict[str, Any], records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The summary as a markdown report: machine, verdicts, agreement, throughput, judging times, one row per answer."""
    n = summary["answers"]
    lines = [f"# Real answers judged by kernelgym and by KernelBench's evaluator, {meta.get('date', '')}", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items() if key != "date"]
    lines += [f"- answers: kernelgym {n['kernelgym']}, KernelBench {n['kernelbench']}, both {n['both_judged']} "
              f"({n['both_in_one_call']} of them in one call)", "", "## Verdicts", "",
              "| status | kernelgym strict | kernelgym, KernelBench's contract | KernelBench |", "| --- | --- | --- | --- |"]
    counts = summary["counts"]
    for status in sorted(set().union(*counts.values())):
        lines.append(f"| {status} | " + " | ".join(str(counts[k].get(status, "-")) for k in counts) + " |")
    latest = list({(r["phase"], r["answer"]): r for r in records}.values())
    columns = _statuses([r for r in latest if r["phase"] == "kernelgym" and r["status"] != "not_run"])
    for title, key in (("strict status", "agreement_strict"), ("verdict under KernelBench's contract", "agreement_contract")):
        lines += ["", f"## Agreement, kernelgym's {title} (answers both judged)", ""] + _table(summary[key], columns)
    agree = summary["verdict_agreement"]
    lines += ["", f"kernelgym's verdict under KernelBench's contract (ok or not) agrees with KernelBench's (correct or not) on "
                  f"{agree['agree']} of {agree['answers']} answers ({agree['share']}).", ""]
    if agree["disagreements"]:
        lines += ["| answer | kernelgym strict | kernelgym, KernelBench's contract | KernelBench | differs by | "
                  "kernelgym's first feedback line |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {d['answer']} | {d['kernelgym']} | {d['kernelgym_contract']} | {d['kernelbench']} | "
                  f"{d['differs_by'] or '-'} | {d['first_feedback_line'].replace('|', '/')} |" for d in agree["disagreements"]]
    speed = summary["speedup_agreement"]
    lines += ["", "## Speedups (answers both call correct)", "",
              f"- answers: {speed['answers']}; median |speedup_kg / speedup_kb - 1|: {speed['median_abs_deviation']}",
              f"- beyond 15%: {', '.join(speed['over_15_percent']) or 'none'}"]
    spread = summary["kernelbench_spread"]
    lines += [f"- KernelBench's evaluator against itself (answers it called correct in two judgements or more): "
              f"{spread['answers']} answers, median |last / first - 1|: {spread['median_abs_deviation']}, "
              f"beyond 5%: {spread['over_5_percent']}"]
    median = summary["against_kernelbench_median"]
    lines += [f"- kernelgym against the median of KernelBench's judgements (answers it called correct twice or more): "
              f"{median['answers']} answers, median |speedup_kg / median speedup_kb - 1|: {median['median_abs_deviation']}"]
    steady = summary["against_repeatable_kernelbench"]
    lines += [f"- the same, on the answers whose KernelBench speedups lie within {REPEATABLE:.0%} of each other: "
              f"{steady['answers']} answers, median {steady['median_abs_deviation']}, beyond 5%: "
              f"{', '.join(steady['over_5_percent']) or 'none'}"]
    t = summary["throughput"]
    lines += ["", f"## Throughput, cold (the {t['calls']} calls that ran both judges)", "",
              "| judge | answers | wall s | answers/min |", "| --- | --- | --- | --- |"]
    lines += [f"| {p} | {t[p]['answers']} | {t[p]['wall_s']} | {t[p]['answers_per_min']} |" for p in PHASES]
    lines += ["", f"kernelgym / KernelBench: {_number(t['ratio'])}x (kernelgym build-cache hits: {t['kernelgym']['cache_hits']})",
              "", "## Timeouts on answers KernelBench judged correct", "",
              ", ".join(summary["timeouts_on_kernelbench_correct"]) or "none"]
    own = summary["own_time"]
    lines += ["", "## Each answer's judging time over its builds plus its calls plus 20 s", "",
              f"- answers: {own['answers']}; largest ratio, sum of stages: {own['largest_stage_ratio']}; "
              f"wall from submit to verdict (includes waiting behind the batch): {own['largest_wall_ratio']}",
              f"- over {OWN_TIME_LIMIT}x, stages: {', '.join(own['stage_over_limit']) or 'none'}; "
              f"wall: {len(own['wall_over_limit'])} answers"]
    lines += ["", "## Per answer", "", "| answer | kernelgym | contract | speedup | KernelBench | speedup | stages s | wall s | "
              "load_inline / in function / in try | first feedback line |", "| --- |" + " --- |" * 9]
    by_answer: dict[str, dict[str, dict[str, Any]]] = {}
    for r in latest:
        by_answer.setdefault(r["answer"], {})[r["phase"]] = r
    for answer in sorted(by_answer):
        kg, kb = by_answer[answer].get("kernelgym", {}), by_answer[answer].get("kernelbench", {})
        facts = "/".join(str(kg.get(k, "-")) for k in ("load_inline", "in_function", "in_try"))
        stages = sum((kg.get("stage_seconds") or {}).values())
        lines.append(f"| {answer} | {kg.get('status', '-')} | {contract_verdict(kg) if kg else '-'} | "
                     f"{_number(kg.get('kernelbench_speedup') or kg.get('speedup'))} | {kb.get('status', '-')} | "
                     f"{_number(kb.get('speedup'))} | {stages:.1f} | {_number(kg.get('seconds'), 1)} | {facts} | "
                     f"{(kg.get('feedback_first_line') or '').replace('|', '/')[:120]} |")
    return "\n".join(lines) + "\n"


def _number(value: float | None, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if value else "-"


read_results = kbs.read_results
"""The answer records, ``totals`` lines and call metadata of results files (:func:`kernelbench_scale.read_results`)."""


def write_summary(out: Path, inputs: Sequence[str | Path], commit: str = "") -> None:
    """Write ``summary.json`` and ``summary.md`` into ``out`` from the results files ``inputs``."""
    records, totals, metas = read_results(inputs)
    summary = summarize(records, totals)
    meta = {**kbs.runs_meta(metas, commit, RUN_META), "inputs": [str(p) for p in inputs]}
    (out / "summary.json").write_text(json.dumps({"meta": meta, **summary}, indent=2, sort_keys=True, default=str))
    (out / "summary.md").write_text(render_markdown(summary, records, meta))


# -- command line ---------------------------------------------------------------------------------------------


def _shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise argparse.ArgumentTypeError(f"--shard takes i/n with 1 <= i <= n (e.g. 1/4), not {text!r}")
    return int(index), int(count)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags of a run, or of ``report`` (the same as ``kernelbench_scale.py report``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return kbs.parse_args(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", required=True, help="CUDA-L1's answers, a JSON-lines file")
    parser.add_argument("--kernelbench", required=True, help="KernelBench tree (the folder holding level1/, level2/, level3/)")
    parser.add_argument("--evaluator", default="", help="KernelBench's evaluator folder (needed by the kernelbench phase)")
    parser.add_argument("--out", default="", help="folder for results.jsonl (appended to), summary.json, summary.md")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, from {', '.join(PHASES)}")
    parser.add_argument("--backend", default="cuda", help="kernelgym's backend (default: cuda)")
    parser.add_argument("--rules", default="kernelbench", choices=("native", "kernelbench"), help="kernelgym's rule preset")
    parser.add_argument("--reference", default="task-file", choices=("task-file", "answers"),
                        help="the reference program: KernelBench's task file, or each row's own ref_code")
    parser.add_argument("--kb-sample", type=int, default=40, help="answers KernelBench's evaluator judges (a seeded draw)")
    parser.add_argument("--seed", type=int, default=0, help="seed of that draw")
    parser.add_argument("--levels", default="", help="only these levels, comma-separated (default: all)")
    parser.add_argument("--shard", type=_shard, default=(1, 1), help="this call's share: every n-th answer from the i-th (i/n)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many answers in this call")
    parser.add_argument("--resume", action="store_true", help="skip answers results.jsonl already holds a verdict of")
    parser.add_argument("--deadline-s", type=float, default=0.0,
                        help="after this many seconds wait for no verdict and start no answer: the rest is not_run (0: none)")
    parser.add_argument("--warm-up", type=int, default=0,
                        help="judge this call's first N answers before the clock starts, unrecorded (workers started)")
    parser.add_argument("--cache-dir", default="", help="kernelgym's build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    parser.add_argument("--prepare", action="store_true", help="run `kernelgym prepare` on that cache first (timed apart)")
    parser.add_argument("--kb-devices", type=int, default=1,
                        help="GPUs KernelBench's evaluator judges on at once (its num_gpu_devices: one answer per GPU per batch)")
    parser.add_argument("--kb-repeat", type=int, default=1,
                        help="judge every answer this many times with KernelBench's evaluator (its spread across runs)")
    parser.add_argument("--kb-build-workers", type=int, default=min(20, os.cpu_count() or 1),
                        help="KernelBench prebuild processes (its default: 20, capped at the cores)")
    parser.add_argument("--kb-gpu-arch", default="Hopper", help="KernelBench's gpu_arch names, comma-separated")
    parser.add_argument("--work-dir", default="", help="KernelBench build folders (default: a temp dir)")
    parser.add_argument("--commit", default="", help="commit to record when this tree is not a git checkout")
    parser.add_argument("--dry-run", action="store_true", help="list the selected answers and the sample; judge nothing")
    args = parser.parse_args(argv)
    args.command = "run"
    kbs.parse_phases(parser, args, PHASES, evaluator_needed=not args.dry_run)
    if not args.dry_run and not args.out:
        parser.error("--out is needed unless --dry-run")
    args.levels = [int(level) for level in args.levels.split(",") if level]
    return args


def report(args: argparse.Namespace) -> int:
    """Merge earlier runs' results files (later lines win per phase and answer) and write the summary."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_summary(out, args.inputs, args.commit)
    kbs.log(f"wrote {out / 'summary.md'}")
    return 0


def dry_run(corpus: Corpus, selected: Sequence[kbs.Answer], sample: Sequence[str]) -> None:
    """Print what a run would judge: the corpus, the selection (``*``: in KernelBench's sample), the sample."""
    facts = [answer_facts(a.program) for a in corpus.answers]
    builds = [f for f in facts if f["load_inline"]]
    print(f"{corpus.rows} rows: {len(corpus.answers)} answers with a task file, {corpus.without_code} without code, "
          f"unmatched: {', '.join(corpus.unmatched) or 'none'}; {corpus.same_reference} rows' ref_code is the task file")
    print(f"load_inline: {len(builds)} answers, {sum(bool(f['in_function']) for f in builds)} inside a function, "
          f"{sum(bool(f['in_try']) for f in builds)} inside try:, {sum(f['pybind11_module'] for f in builds)} with PYBIND11_MODULE")
    chosen = set(sample) & {a.key for a in selected}
    print(f"selected: {len(selected)} answers, {len(chosen)} of them in KernelBench's sample of {len(sample)}")
    for answer in selected:
        f = answer_facts(answer.program)
        print(f"{'*' if answer.key in chosen else ' '} {answer.key:<70} load_inline {f['load_inline']} in_function "
              f"{f['in_function']} in_try {f['in_try']} CUDA-L1 {corpus.scores.get(answer.key)}")
    print("sample: " + ", ".join(sample))


def main(argv: Sequence[str] | None = None) -> int:
    """Judge this call's answers with each phase in turn, appending to results.jsonl, then rewrite the summary."""
    args = parse_args(argv)
    if args.command == "report":
        return report(args)
    started = time.time()
    deadline = started + args.deadline_s if args.deadline_s > 0 else float("inf")
    corpus = read_answers(args.answers, load_kernelbench_dir(args.kernelbench), args.reference)
    sample = draw_sample(corpus.answers, args.kb_sample, args.seed)
    out = Path(args.out) if args.out else None
    results = out / "results.jsonl" if out else None
    finished: set[tuple[str, str]] = set()
    if args.resume and results is not None and results.is_file():
        finished = {(r["phase"], r["answer"]) for r in read_results([results])[0] if r["status"] != "not_run"}
    selected = select(corpus.answers, args.levels, args.shard, args.limit, finished, args.phases, sample)
    if args.dry_run or out is None:
        dry_run(corpus, selected, sample)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    call = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S}-shard{args.shard[0]}of{args.shard[1]}"
    recorder = kbs.CallRecorder(out, call)
    meta = {**kbs.machine_meta(args.commit), "rules": args.rules, "backend": args.backend, "reference": args.reference,
            "answers_file": str(Path(args.answers).resolve()), "kernelbench": str(Path(args.kernelbench).resolve())}
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "answers", "kernelbench", "evaluator", "out")}
    if args.prepare:
        from kernelgym.backends.cache import default_cache_dir
        from kernelgym.executor.prepare import prepare

        began = time.perf_counter()
        failed = prepare(args.backend, Path(args.cache_dir) if args.cache_dir else default_cache_dir(), kbs.log)
        meta.update(prepare_s=round(time.perf_counter() - began, 1), prepare_failed=failed)
    recorder.note("call", meta=meta, flags=flags, selected=len(selected))
    kbs.log(f"{call}: {len(selected)} answers, phases {', '.join(args.phases)}")
    for phase in args.phases:
        judged = [a for a in selected if (phase, a.key) not in finished and (phase == "kernelgym" or a.key in sample)]
        if not judged:
            kbs.log(f"{phase}: nothing to judge in this call")
            continue
        try:
            if phase == "kernelgym":
                totals = run_kernelgym(judged, args, recorder, deadline)
            else:
                work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="real-answers-"))
                totals = kbs.run_kernelbench(judged, args, work, recorder, deadline)
                keys = {a.key for a in judged}
                totals["judged"] = sum(r["status"] != "not_run" for r in recorder.records
                                       if r["phase"] == "kernelbench" and r["answer"] in keys)
        except Exception:  # a broken phase is reported; the next phase still runs
            kbs.log(f"{phase}: phase failed:\n{traceback.format_exc()}")
            totals = {"error": traceback.format_exc()[-1500:]}
        recorder.note("totals", phase=phase, answers=len(judged), **totals)
        kbs.log(f"{phase}: done, {totals}")
        write_summary(out, [results], args.commit)
    kbs.log(f"all done in {time.time() - started:.1f} s; summary in {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
