"""Judge the bundled ``kernelbench`` answers at KernelBench scale: kernelgym cold and warm, then KernelBench's own pipeline.

    # on one H100/H200, KernelBench copied into an ignored folder of the repo (.kb = /work/shared/kernelbench)
    python benchmarks/kernelbench_scale.py --kernelbench .kb --evaluator .kb/evaluator --out "$OUT"
    python benchmarks/kernelbench_scale.py --kernelbench .kb --evaluator .kb/evaluator --out /tmp/q --only small --limit 4
    python benchmarks/kernelbench_scale.py report --inputs a/results.jsonl b/results.jsonl --out runs/kb

The answers are the honest CUDA and Triton programs under
``kernelgym/tasks/suites/kernelbench/solutions/``, matched by task id to the
task files of the KernelBench tree given with ``--kernelbench``. Phases, in
order (``--phases`` picks some):

``cold``
    kernelgym with a fresh build cache: one ``Verifier(backend=...)`` per
    backend (CUDA first, then Triton, never both at once on the GPU), all of
    that backend's answers in one batch (``submit`` futures where the verifier
    has them, else ``evaluate_many``).
``warm``
    the same again with the same cache (builds are hits).
``kernelbench``
    KernelBench's pipeline as ``eval_from_generations.py`` runs it with
    ``build_cache=True`` on one GPU: a process pool prebuilds every CUDA answer
    into its own build folder (Triton answers have nothing to prebuild), then
    each answer is evaluated alone in a fresh process by KernelBench's
    ``eval_kernel_against_ref`` with its defaults (5 correctness trials, 100
    timed trials, CUDA events, fp32, 180 s per answer). The evaluator folder is
    imported as a package; third-party modules it imports only for LLM queries
    or its result container (``dotenv``, ``openai``, ``litellm``, ``pydantic``)
    are replaced by stand-ins when missing, and the summary says which.

With ``--executor ray`` one local Ray instance is started for the whole run
(its start-up is the summary's ``ray_start_s``) and every batch's pool joins
it, as on a cluster where Ray is already up.

Every finished answer appends one JSON line to ``<out>/results.jsonl`` at
once; ``<out>/summary.json`` and ``<out>/summary.md`` are rewritten after each
phase. One failing answer never stops the run; an answer still unjudged when
``--deadline-s`` has passed is recorded as ``not_run``. ``report`` rebuilds
the summary from the JSON lines of several runs (a run split over calls).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import dataclasses
import datetime
import importlib
import importlib.util
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kernelgym.agents.identity_agent import identity_answer  # noqa: E402
from kernelgym.envs.prompt import sanitize  # noqa: E402
from kernelgym.tasks import Task, load_kernelbench_dir  # noqa: E402

LARGE = (
    "level1/19_ReLU",
    "level1/23_Softmax",
    "level1/47_Sum_reduction_over_a_dimension",
    "level1/51_Argmax_over_a_dimension",
)
"""The four largest-input level-1 tasks (6.4 to 8.6 GB of input each)."""

PHASES = ("cold", "warm", "kernelbench")
SELECTORS = ("level1", "level2", "cuda", "triton", "large", "small")
BACKEND_ORDER = ("cuda", "triton")

# What KernelBench's eval_from_generations.py uses by default (EvalConfig).
KB_CORRECT_TRIALS = 5
KB_PERF_TRIALS = 100
KB_TIMEOUT_S = 180.0
KB_TIMING = "cuda_event"


@dataclasses.dataclass(frozen=True)
class Answer:
    """One bundled answer: a task and the program written for one backend."""

    task: Task
    backend: str
    text: str
    label: str = ""

    @property
    def program(self) -> str:
        """The program KernelBench's pipeline is given: the answer's code without a markdown fence around it
        (KernelBench extracts code when it generates, before evaluating; a fenced text is a syntax error there).
        A text kernelgym cannot read as a program is given as it is.

        Example:
            >>> text = "```python\\nclass ModelNew(nn.Module):\\n    pass\\n```"
            >>> Answer(Task("level1/1_T", "T", 1, 1, ""), "cuda", text).program.startswith("class ModelNew")
            True
        """
        from kernelgym.verifier.extract import FormatError, extract_program

        try:
            return extract_program(self.text)
        except FormatError:
            return self.text

    @property
    def key(self) -> str:
        """``<label or backend>:<task id>``, unique within a run (``identity:...`` for the reference as its own answer)."""
        return f"{self.label or self.backend}:{self.task.id}"


def log(message: str) -> None:
    """Print a progress line at once (the GPU machine's output is read as it comes)."""
    print(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def select_answers(tasks: Iterable[Task], only: Sequence[str], ids: Sequence[str], limit: int | None,
                   skip: Sequence[str] = ()) -> list[Answer]:
    """The answers of ``tasks`` that pass every selector in ``only`` and the id list, CUDA before Triton, less
    those whose key (``triton:level1/19_ReLU``) or task id is in ``skip``.

    Example:
        >>> task = Task("level1/19_ReLU", "ReLU", 1, 19, "", solutions={"cuda": "a", "triton": "b"})
        >>> [a.key for a in select_answers([task], ["triton"], [], None)]
        ['triton:level1/19_ReLU']
        >>> [a.key for a in select_answers([task], [], [], None, skip=["triton:level1/19_ReLU"])]
        ['cuda:level1/19_ReLU']
    """
    unknown = sorted(set(only) - set(SELECTORS))
    if unknown:
        raise SystemExit(f"--only: unknown selector(s) {', '.join(unknown)}; choose from {', '.join(SELECTORS)}")
    answers = []
    for backend in BACKEND_ORDER:
        for task in tasks:
            if backend not in task.solutions or (ids and task.id not in ids and task.id.split("/")[-1] not in ids):
                continue
            tags = {f"level{task.level}", backend, "large" if task.id in LARGE else "small"}
            key = f"{backend}:{task.id}"
            if all(selector in tags for selector in only) and not {key, task.id} & set(skip):
                answers.append(Answer(task, backend, task.solutions[backend]))
    return answers[:limit] if limit is not None else answers


def identity_answers(tasks: Iterable[Task], levels: Sequence[int], per_level: int) -> list[Answer]:
    """The reference itself as ``ModelNew`` for ``per_level`` tasks of each level, spread evenly over the level's
    tasks in id order and never a large-input one (judged as CUDA answers: under the ``kernelbench`` preset they
    are legal, and both judges should find them 1.00x).

    Example:
        >>> tasks = [Task(f"level1/{i}_T", "T", 1, i, "class Model: pass") for i in range(1, 11)]
        >>> [a.task.id for a in identity_answers(tasks, (1,), 3)]
        ['level1/1_T', 'level1/4_T', 'level1/7_T']
    """
    picked: list[Answer] = []
    for level in levels:
        pool = sorted((t for t in tasks if t.level == level and t.id not in LARGE), key=lambda t: t.problem_id)
        step = max(1, len(pool) // per_level) if per_level else 1
        chosen = pool[::step][:per_level]
        picked += [Answer(t, "cuda", identity_answer(t.source), label="identity") for t in chosen]
    return picked


def _phase_else_cold(records: Sequence[dict[str, Any]], phase: str, keep: Callable[[dict[str, Any]], bool]) -> dict[str, dict[str, Any]]:
    """Per answer, its record of ``phase`` where that phase judged it, else its cold record (a run cut before its
    warm phase); only records ``keep`` accepts.

    Example:
        >>> recs = [{"phase": "cold", "answer": "a", "status": "ok"}, {"phase": "warm", "answer": "a", "status": "not_run"},
        ...         {"phase": "cold", "answer": "b", "status": "ok"}, {"phase": "warm", "answer": "b", "status": "ok"}]
        >>> {a: r["phase"] for a, r in _phase_else_cold(recs, "warm", lambda r: True).items()}
        {'a': 'cold', 'b': 'warm'}
    """
    chosen = {r["answer"]: r for r in records if r["phase"] == "cold" and keep(r)}
    chosen.update({r["answer"]: r for r in records if r["phase"] == phase and r["status"] != "not_run" and keep(r)})
    return chosen


def calibration(records: Sequence[dict[str, Any]], phase: str = "warm") -> dict[str, Any]:
    """The identity answers' speedups in ``phase`` (else cold), per level: median, range, those off by more than 15%.

    Example:
        >>> recs = [{"phase": "warm", "answer": "identity:level1/1_T", "task": "level1/1_T", "status": "ok", "speedup": 0.98},
        ...         {"phase": "warm", "answer": "identity:level1/4_T", "task": "level1/4_T", "status": "ok", "speedup": 1.2}]
        >>> calibration(recs)["levels"]["level1"]["outside_15_percent"]
        ['identity:level1/4_T']
    """
    levels: dict[str, dict[str, Any]] = {}
    rows = list(_phase_else_cold(records, phase, lambda r: r["answer"].startswith("identity:")).values())
    for level in sorted({r["task"].split("/")[0] for r in rows}):
        mine = [r for r in rows if r["task"].startswith(level + "/")]
        speeds = {r["answer"]: r["speedup"] for r in mine if r["status"] == "ok" and r.get("speedup")}
        values = sorted(speeds.values())
        levels[level] = {
            "answers": len(mine), "ok": len(speeds),
            "median": round(statistics.median(values), 4) if values else None,
            "min": round(values[0], 4) if values else None, "max": round(values[-1], 4) if values else None,
            "outside_15_percent": sorted(a for a, v in speeds.items() if abs(v - 1.0) > 0.15),
            "not_ok": sorted(r["answer"] for r in mine if r["answer"] not in speeds),
        }
    return {"phase": phase, "levels": levels}


def agreement(records: Sequence[dict[str, Any]], phase: str = "warm") -> dict[str, Any]:
    """Per answer judged ok by both, kernelgym's speedup (``phase``, else cold) over KernelBench's; the median |ratio - 1|.

    Example:
        >>> recs = [{"phase": "warm", "answer": "a", "status": "ok", "speedup": 1.1},
        ...         {"phase": "kernelbench", "answer": "a", "status": "ok", "speedup": 1.0}]
        >>> agreement(recs)["median_abs_deviation"]
        0.1
    """
    mine = _phase_else_cold(records, phase, lambda r: r["status"] == "ok" and bool(r.get("speedup")))
    theirs = {r["answer"]: r for r in records if r["phase"] == "kernelbench" and r["status"] == "ok" and r.get("speedup")}
    ratios = {a: mine[a]["speedup"] / theirs[a]["speedup"] for a in sorted(set(mine) & set(theirs))}
    deviations = [abs(r - 1.0) for r in ratios.values()]
    return {"phase": phase, "answers": len(ratios), "ratios": {a: round(r, 4) for a, r in ratios.items()},
            "median_abs_deviation": round(statistics.median(deviations), 4) if deviations else None,
            "over_15_percent": sorted(a for a, r in ratios.items() if abs(r - 1.0) > 0.15)}


class Recorder:
    """Appends one JSON line per judged answer and keeps the records for the summary."""

    def __init__(self, out: Path) -> None:
        self.path = out / "results.jsonl"
        self.records: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        """Keep ``record`` and append it to ``results.jsonl`` now (flushed)."""
        self.records.append(record)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            handle.flush()
        speed = f" speedup {record['speedup']:.3f}x" if record.get("speedup") else ""
        log(f"{record['phase']:<11} {record['answer']:<58} {record['status']:<14} {record['seconds']:8.1f} s{speed}")


class CallRecorder(Recorder):
    """The recorder, each record tagged with the call that made it, plus the call's own lines."""

    def __init__(self, out: Path, call: str) -> None:
        super().__init__(out)
        self.call = call

    def add(self, record: dict[str, Any]) -> None:
        """Record one answer's verdict (tagged with this call)."""
        super().add({**record, "call": self.call})

    def note(self, kind: str, **fields: Any) -> None:
        """Append a ``call`` or ``totals`` line (not an answer's record)."""
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"record": kind, "call": self.call, **fields}, sort_keys=True, default=str) + "\n")


# -- kernelgym ------------------------------------------------------------------------------------------------


def _kernelgym_record(phase: str, answer: Answer, result: Any, seconds: float) -> dict[str, Any]:
    stages = {k: round(v, 3) for k, v in dataclasses.asdict(result.seconds).items()}
    record = {
        "phase": phase, "answer": answer.key, "task": answer.task.id, "backend": answer.backend,
        "status": result.status.value, "speedup": result.speedup_eager, "runtime_ms": result.runtime_ms,
        "ref_ms": result.ref_eager_ms, "cache_hit": result.cache_hit, "stage_seconds": stages, "flags": list(result.flags),
        "spread_ms": result.runtime_spread_ms, "timed_calls": result.timed_calls, "seconds": round(seconds, 3),
    }
    if result.status.value != "ok":
        record["feedback"] = _record_text(result.feedback or "")
    return record


def verdicts_as_they_come(submitted: dict[concurrent.futures.Future, tuple[int, float]], deadline: float,
                          label: str) -> Iterator[tuple[int, float, Any, Exception | None]]:
    """``(index, submitted at, result, error)`` of each future in ``submitted`` (future -> its answer's index and
    ``perf_counter`` at submission) as it completes, until ``deadline`` (a ``time.time()``; ``inf``: none). ``error``
    is an answer's harness failure (its result ``None``); the verdicts still missing at the deadline are logged."""
    remaining = None if deadline == float("inf") else max(0.0, deadline - time.time())
    came = 0
    try:
        for future in concurrent.futures.as_completed(submitted, timeout=remaining):
            index, began = submitted[future]
            came += 1
            try:
                result = future.result()
            except Exception as exc:  # one answer's harness failure, not its verdict
                yield index, began, None, exc
            else:
                yield index, began, result, None
    except concurrent.futures.TimeoutError:
        log(f"{label}: deadline passed with {len(submitted) - came} verdicts outstanding")


def _judge_batch(verifier: Any, answers: Sequence[Answer], on_result: Callable[[int, Any, float], None]) -> None:
    """Judge ``answers`` with one verifier; call ``on_result(index, result, seconds since the batch began)``."""
    start = time.perf_counter()
    if hasattr(verifier, "submit"):
        futures = {verifier.submit(a.task, a.text): i for i, a in enumerate(answers)}
        for future in concurrent.futures.as_completed(futures):
            on_result(futures[future], future.result(), time.perf_counter() - start)
        return
    for index, result in enumerate(verifier.evaluate_many([(a.task, a.text) for a in answers])):
        on_result(index, result, time.perf_counter() - start)


def start_ray() -> float:
    """Start one local Ray instance for the whole run (as on a cluster where Ray is up); returns its start-up seconds.

    Each batch's ``Verifier(executor="ray")`` then joins it instead of starting and stopping one of its own. Its CPUs
    are the ones this process may use (``taskset``), not the machine's.
    """
    import ray

    began = time.perf_counter()
    ray.init(num_cpus=len(os.sched_getaffinity(0)))
    seconds = round(time.perf_counter() - began, 3)
    log(f"ray: started in {seconds} s with {ray.cluster_resources()}")
    return seconds


def run_kernelgym(phase: str, answers: Sequence[Answer], args: argparse.Namespace, cache: Path, recorder: Recorder,
                  deadline: float) -> dict[str, Any]:
    """One kernelgym pass over ``answers`` (one batch per backend); returns the phase's totals."""
    from kernelgym import Verifier
    from kernelgym.verifier import VerifierConfig
    from kernelgym.verifier.config import StageTimeouts

    t = args.stage_timeout
    timeouts = StageTimeouts(build=t, check=t, time=t) if t else StageTimeouts()
    config = VerifierConfig(rules=args.rules, runs=args.runs or None, timeouts=timeouts)
    start = time.perf_counter()
    for backend in BACKEND_ORDER:
        batch = [a for a in answers if a.backend == backend]
        if not batch:
            continue
        if time.time() > deadline:
            for answer in batch:
                recorder.add(_not_run(phase, answer))
            continue
        log(f"{phase}: judging {len(batch)} {backend} answers with kernelgym (cache {cache})")
        seen: set[int] = set()

        def on_result(index: int, result: Any, seconds: float, batch: Sequence[Answer] = batch, seen: set[int] = seen) -> None:
            seen.add(index)
            recorder.add(_kernelgym_record(phase, batch[index], result, seconds))

        try:
            with Verifier(backend=backend, executor=args.executor, config=config, num_workers=args.num_workers,
                          cache_dir=cache) as verifier:
                _judge_batch(verifier, batch, on_result)
        except Exception as exc:  # an executor failure ends this batch only
            log(f"{phase}: {backend} batch failed: {type(exc).__name__}: {exc}")
            for index, answer in enumerate(batch):
                if index not in seen:
                    recorder.add({**_base(phase, answer), "status": "harness_error", "seconds": 0.0,
                                  "feedback": _record_text(f"{type(exc).__name__}: {exc}")})
    return {"wall_s": round(time.perf_counter() - start, 3)}


# -- KernelBench ----------------------------------------------------------------------------------------------


class _StandInBaseModel:
    """Stand-in for ``pydantic.BaseModel`` (KernelBench's result container): annotated defaults, copied per instance."""

    def __init__(self, **values: Any) -> None:
        for klass in reversed(type(self).__mro__):
            for name in getattr(klass, "__annotations__", {}):
                if hasattr(klass, name):
                    setattr(self, name, copy.deepcopy(getattr(klass, name)))
        for name, value in values.items():
            setattr(self, name, value)


def _stand_ins() -> dict[str, dict[str, Any]]:
    def unavailable(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("LLM clients are not available in this benchmark")

    return {
        "dotenv": {"load_dotenv": lambda *a, **k: False},
        "openai": {"OpenAI": unavailable},
        "litellm": {"completion": unavailable},
        "pydantic": {"BaseModel": _StandInBaseModel},
    }


def import_kernelbench_eval(evaluator: Path) -> tuple[types.ModuleType, list[str]]:
    """Import KernelBench's ``eval`` module from its evaluator folder (as package ``kernelbench``).

    Returns the module and the names of the third-party modules replaced by stand-ins.
    """
    replaced = []
    for name, attrs in _stand_ins().items():
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            module = types.ModuleType(name)
            for attr, value in attrs.items():
                setattr(module, attr, value)
            sys.modules[name] = module
            replaced.append(name)
    if "kernelbench" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "kernelbench", evaluator / "__init__.py", submodule_search_locations=[str(evaluator)]
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"{evaluator} is not a KernelBench evaluator folder (no __init__.py)")
        package = importlib.util.module_from_spec(spec)
        sys.modules["kernelbench"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("kernelbench.eval"), replaced


def _kb_build(evaluator: str, gpu_arch: list[str], source: str, build_dir: str) -> dict[str, Any]:
    """Pool worker: KernelBench's ``build_compile_cache`` of one answer (as its ``compile_single_sample``)."""
    start = time.perf_counter()
    try:
        kb_eval, _ = import_kernelbench_eval(Path(evaluator))
        sys.modules["kernelbench.utils"].set_gpu_arch(gpu_arch)
        ok, _stdout, error = kb_eval.build_compile_cache(custom_model_src=source, verbose=False, build_dir=build_dir)
        return {"ok": bool(ok), "error": error, "seconds": time.perf_counter() - start}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - start}


def _kb_evaluate(evaluator: str, gpu_arch: list[str], reference: str, source: str, build_dir: str, backend: str,
                 device_index: int = 0) -> dict[str, Any]:
    """Pool worker: KernelBench's ``eval_kernel_against_ref`` of one answer, as ``evaluate_single_sample`` calls it
    (on ``cuda:<device_index>``, as its local batch evaluation gives the i-th answer of a batch the i-th GPU)."""
    import torch

    kb_eval, replaced = import_kernelbench_eval(Path(evaluator))
    sys.modules["kernelbench.utils"].set_gpu_arch(gpu_arch)
    device = torch.device(f"cuda:{device_index}")
    try:
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=reference,
            custom_model_src=source,
            measure_performance=True,
            timing_method=KB_TIMING,
            verbose=False,
            num_correct_trials=KB_CORRECT_TRIALS,
            num_perf_trials=KB_PERF_TRIALS,
            build_dir=build_dir,
            device=device,
            backend=backend,
            precision=kb_eval.get_torch_dtype_from_string("fp32"),
        )
    except Exception as exc:  # evaluate_single_sample's last-level catch
        return {"compiled": False, "correctness": False, "metadata": {"error": f"{type(exc).__name__}: {exc}"},
                "runtime": -1.0, "ref_runtime": -1.0, "replaced": replaced}
    return {
        "compiled": bool(result.compiled), "correctness": bool(result.correctness),
        "metadata": {k: str(v)[:400] for k, v in dict(result.metadata).items()},
        "runtime": float(result.runtime), "ref_runtime": float(result.ref_runtime), "replaced": replaced,
    }


def _kb_status(outcome: dict[str, Any]) -> str:
    """KernelBench's verdict in kernelgym's words (its result only says compiled / correct, plus metadata)."""
    metadata = outcome["metadata"]
    if outcome["correctness"]:
        return "ok"
    if outcome["compiled"]:
        return "runtime_error" if "runtime_error" in metadata else "incorrect"
    return "error" if {"error", "other_error", "cuda_error"} & set(metadata) else "compile_error"


def kernelbench_answers(answers: Sequence[Answer], per_level: int | None) -> list[Answer]:
    """The answers KernelBench's pipeline judges: all but the identity answers past the first ``per_level`` of a level,
    identity answers first (they have nothing to prebuild and take seconds: a deadline cuts the long ones instead).

    Example:
        >>> tasks = [Task(f"level1/{i}_T", "T", 1, i, "class Model: pass", solutions={"cuda": "x"}) for i in (1, 2)]
        >>> [a.key for a in kernelbench_answers(select_answers(tasks, [], [], 1) + identity_answers(tasks, (1,), 2), 1)]
        ['identity:level1/1_T', 'cuda:level1/1_T']
    """
    answers = sorted(answers, key=lambda answer: answer.label != "identity")
    if per_level is None:
        return answers
    kept, seen = [], {}
    for answer in answers:
        if answer.label == "identity":
            seen[answer.task.level] = seen.get(answer.task.level, 0) + 1
            if seen[answer.task.level] > per_level:
                continue
        kept.append(answer)
    return kept


def _evaluate_batch(ctx: Any, batch: Sequence[Answer], evaluator: str, args: argparse.Namespace,
                    dirs: dict[str, str]) -> dict[str, dict[str, Any] | None]:
    """One batch of KernelBench's evaluations, the i-th answer on the i-th GPU, each in a fresh process; each
    answer's outcome (``None``: not back within :data:`KB_TIMEOUT_S` of the batch's start)."""
    began = time.perf_counter()
    outcomes: dict[str, dict[str, Any] | None] = {}
    with ctx.Pool(len(batch)) as pool:
        jobs = {answer.key: pool.apply_async(_kb_evaluate, (evaluator, args.kb_gpu_arch, answer.task.source,
                                                             answer.program, dirs[answer.key], answer.backend, i))
                for i, answer in enumerate(batch)}
        for key, job in jobs.items():
            try:
                outcomes[key] = job.get(timeout=max(1.0, KB_TIMEOUT_S - (time.perf_counter() - began)))
            except multiprocessing.TimeoutError:
                outcomes[key] = None
            except Exception as exc:  # a crashed worker or an unpicklable result: this answer only
                outcomes[key] = {"compiled": False, "correctness": False, "runtime": -1.0, "ref_runtime": -1.0,
                                 "metadata": {"error": f"{type(exc).__name__}: {exc}"[:400]}, "replaced": []}
        pool.terminate()
    return outcomes


def _kb_record(answer: Answer, outcome: dict[str, Any] | None, seconds: float, build: dict[str, Any]) -> dict[str, Any]:
    """KernelBench's verdict on ``answer`` as a record (``outcome`` ``None``: it timed out)."""
    record = {**_base("kernelbench", answer), "seconds": round(seconds, 3),
              "stage_seconds": {"prebuild": round(build.get("seconds", 0.0), 3), "evaluate": round(seconds, 3)}}
    if outcome is None:
        record.update(status="timeout", speedup=None)
        return record
    ok = outcome["correctness"] and outcome["runtime"] > 0 and outcome["ref_runtime"] > 0
    record.update(status=_kb_status(outcome), runtime_ms=outcome["runtime"], ref_ms=outcome["ref_runtime"],
                  speedup=outcome["ref_runtime"] / outcome["runtime"] if ok else None)
    if record["status"] != "ok":
        record["feedback"] = _record_text(json.dumps(outcome["metadata"]))
    return record


def run_kernelbench(answers: Sequence[Answer], args: argparse.Namespace, work: Path, recorder: Recorder,
                    deadline: float) -> dict[str, Any]:
    """KernelBench's prebuild pool, then one fresh process per evaluation; returns the phase's totals."""
    ctx = multiprocessing.get_context("spawn")
    evaluator = str(Path(args.evaluator).resolve())
    build_root = work / "kernelbench_build"
    shutil.rmtree(build_root, ignore_errors=True)
    dirs = {a.key: str(build_root / f"{i:03d}") for i, a in enumerate(answers)}
    start = time.perf_counter()
    builds: dict[str, dict[str, Any]] = {}
    cuda = [a for a in answers if a.backend == "cuda"]
    if cuda and time.time() < deadline:
        log(f"kernelbench: prebuilding {len(cuda)} CUDA answers with {args.kb_build_workers} processes")
        with ctx.Pool(args.kb_build_workers) as pool:
            pending = {a.key: pool.apply_async(_kb_build, (evaluator, args.kb_gpu_arch, a.program, dirs[a.key])) for a in cuda}
            for key, job in pending.items():
                try:
                    builds[key] = job.get(timeout=max(1.0, min(KB_TIMEOUT_S, deadline - time.time())))
                except multiprocessing.TimeoutError:
                    builds[key] = {"ok": False, "error": "build timed out", "seconds": KB_TIMEOUT_S}
            pool.terminate()
    prebuild_s = time.perf_counter() - start
    log(f"kernelbench: prebuild took {prebuild_s:.1f} s")
    replaced: set[str] = set()
    devices = max(1, getattr(args, "kb_devices", 1))
    # KernelBench's local batch evaluation (eval_from_generations.batch_eval): batches of one answer per GPU, each in a
    # fresh process on its own device, the next batch once the whole batch has returned.
    for _ in range(max(1, getattr(args, "kb_repeat", 1))):  # its evaluator again on the same answers: its own spread
        for first in range(0, len(answers), devices):
            batch = answers[first:first + devices]
            if time.time() > deadline:
                for answer in batch:
                    recorder.add(_not_run("kernelbench", answer))
                continue
            began = time.perf_counter()
            outcomes = _evaluate_batch(ctx, batch, evaluator, args, dirs)
            seconds = time.perf_counter() - began
            for answer in batch:
                outcome = outcomes[answer.key]
                if outcome is not None:
                    replaced.update(outcome.get("replaced", []))
                recorder.add(_kb_record(answer, outcome, seconds, builds.get(answer.key, {})))
    return {"wall_s": round(time.perf_counter() - start, 3), "prebuild_s": round(prebuild_s, 3),
            "stand_ins": sorted(replaced)}


# -- records and summary --------------------------------------------------------------------------------------


def _record_text(text: str) -> str:
    """A failure's text for the record: its head (the verdict) and its tail (where a traceback says what broke)."""
    return sanitize(text, 2400)


def _base(phase: str, answer: Answer) -> dict[str, Any]:
    return {"phase": phase, "answer": answer.key, "task": answer.task.id, "backend": answer.backend}


def _not_run(phase: str, answer: Answer) -> dict[str, Any]:
    return {**_base(phase, answer), "status": "not_run", "seconds": 0.0, "feedback": "deadline passed before it started"}


def summarize(records: Sequence[dict[str, Any]], phases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per phase: answers, statuses, wall, answers per minute, median seconds per answer, and the large tasks.

    Example:
        >>> recs = [{"phase": "warm", "answer": "cuda:level1/19_ReLU", "task": "level1/19_ReLU", "backend": "cuda",
        ...          "status": "ok", "seconds": 4.0, "speedup": 1.0}]
        >>> summarize(recs, {"warm": {"wall_s": 60.0}})["phases"]["warm"]["answers_per_min"]
        1.0
    """
    out: dict[str, Any] = {"phases": {}}
    for phase in PHASES:
        rows = [r for r in records if r["phase"] == phase]
        if not rows:
            continue
        judged = [r for r in rows if r["status"] != "not_run"]
        wall = phases.get(phase, {}).get("wall_s") or sum(r["seconds"] for r in judged)
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        seconds = [_answer_seconds(r) for r in judged]
        out["phases"][phase] = {
            **phases.get(phase, {}),
            "answers": len(rows), "judged": len(judged), "ok": statuses.get("ok", 0), "statuses": statuses,
            "wall_s": round(wall, 3),
            "answers_per_min": round(len(judged) / wall * 60.0, 3) if wall else None,
            "median_answer_s": round(statistics.median(seconds), 3) if seconds else None,
            # kernelgym's seconds run from its first batch's start (CUDA's, then Triton's own clock)
            "first_verdict_s": round(min(r["seconds"] for r in judged if r["backend"] == judged[0]["backend"]), 3)
            if judged and phase != "kernelbench" else None,
            "large": {r["answer"]: {"status": r["status"], "seconds": round(_answer_seconds(r), 3)}
                      for r in rows if r["task"] in LARGE},
        }
    phase = "warm" if "warm" in out["phases"] else "cold"
    if phase in out["phases"] and "kernelbench" in out["phases"]:
        out["agreement"] = agreement(records, phase)
    if any(r["answer"].startswith("identity:") for r in records if r["phase"] == phase):
        out["calibration"] = calibration(records, phase)
    cold, kb = out["phases"].get("cold"), out["phases"].get("kernelbench")
    if cold and kb and cold["answers_per_min"] and kb["answers_per_min"]:
        out["cold_vs_kernelbench_throughput"] = round(cold["answers_per_min"] / kb["answers_per_min"], 3)
    warm = out["phases"].get("warm")
    if warm and kb and warm["answers_per_min"] and kb["answers_per_min"]:
        out["warm_vs_kernelbench_throughput"] = round(warm["answers_per_min"] / kb["answers_per_min"], 3)
    return out


def _answer_seconds(record: dict[str, Any]) -> float:
    """Seconds one answer cost: its stage seconds for kernelgym (batch completion times overlap; a timeout has none,
    so its completion time stands in), its wall for KernelBench."""
    stages = record.get("stage_seconds") or {}
    if record["phase"] != "kernelbench" and stages and record["status"] != "timeout":
        return float(sum(stages.values()))
    return float(record["seconds"])


def render_markdown(summary: dict[str, Any], records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The summary as a markdown report: machine, totals per phase, and one row per answer."""
    lines = [f"# KernelBench-scale judging, {meta.get('date', '')}", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items() if key != "date"]
    lines += ["", "## Totals", "", "| phase | answers | ok | wall s | first verdict s | answers/min | median s/answer | statuses |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for phase, p in summary["phases"].items():
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(p["statuses"].items()))
        lines.append(f"| {phase} | {p['answers']} | {p['ok']} | {p['wall_s']} | {p.get('first_verdict_s') or '-'} | {p['answers_per_min']} | "
                     f"{p['median_answer_s']} | {statuses} |")
    if "cold_vs_kernelbench_throughput" in summary:
        lines += ["", f"Cold kernelgym throughput / KernelBench pipeline throughput: "
                      f"{summary['cold_vs_kernelbench_throughput']}x"]
    if "warm_vs_kernelbench_throughput" in summary:
        lines += [f"Warm kernelgym throughput / KernelBench pipeline throughput: {summary['warm_vs_kernelbench_throughput']}x"]
    if summary.get("calibration"):
        lines += ["", f"## Identity answers ({summary['calibration']['phase']}): the reference as its own answer", "",
                  "| level | answers | ok | median | range | off by >15% | not ok |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for level, c in summary["calibration"]["levels"].items():
            lines.append(f"| {level} | {c['answers']} | {c['ok']} | {c['median']} | {c['min']}-{c['max']} | "
                         f"{', '.join(c['outside_15_percent']) or 'none'} | {', '.join(c['not_ok']) or 'none'} |")
    if summary.get("agreement"):
        agree = summary["agreement"]
        lines += ["", f"## Speedup agreement ({agree['phase']} kernelgym / KernelBench, answers ok in both)", "",
                  f"- answers: {agree['answers']}; median |ratio - 1|: {agree['median_abs_deviation']}",
                  f"- beyond 15%: {', '.join(agree['over_15_percent']) or 'none'}"]
    lines += ["", "## Large-input tasks", "", "| phase | answer | status | seconds |", "| --- | --- | --- | --- |"]
    for phase, p in summary["phases"].items():
        for answer, row in p["large"].items():
            lines.append(f"| {phase} | {answer} | {row['status']} | {row['seconds']} |")
    by_answer: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_answer.setdefault(r["answer"], {})[r["phase"]] = r
    present = [p for p in PHASES if p in summary["phases"]]
    header = " | ".join(f"{p} status | {p} s | {p} speedup" for p in present)
    lines += ["", "## Per answer", "", f"| answer | {header} |", "| --- |" + " --- |" * (3 * len(present))]
    for answer in sorted(by_answer):
        cells = []
        for phase in present:
            r = by_answer[answer].get(phase)
            if r is None:
                cells += ["-", "-", "-"]
                continue
            speed = f"{r['speedup']:.3f}" if r.get("speedup") else "-"
            cells += [r["status"], f"{_answer_seconds(r):.1f}", speed]
        lines.append(f"| {answer} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary(out: Path, records: Sequence[dict[str, Any]], phases: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """Write ``summary.json`` and ``summary.md`` into ``out``."""
    summary = summarize(records, phases)
    (out / "summary.json").write_text(json.dumps({"meta": meta, **summary}, indent=2, sort_keys=True, default=str))
    (out / "summary.md").write_text(render_markdown(summary, records, meta))


def machine_meta(commit: str) -> dict[str, Any]:
    """Machine, software, date and commit, read without touching the GPU from this process."""
    def run(command: list[str]) -> str:
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=REPO).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    gpu = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    import torch

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit or run(["git", "rev-parse", "--short", "HEAD"]) or "unknown",
        "gpu": gpu or "none seen",
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# -- command line ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags of a run, or of ``report`` (rebuild the summary from results.jsonl files)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        parser = argparse.ArgumentParser(description="Rebuild summary.json/summary.md from results.jsonl files.")
        parser.add_argument("--inputs", nargs="+", required=True, help="results.jsonl files of one or more runs")
        parser.add_argument("--out", required=True, help="folder for summary.json and summary.md")
        parser.add_argument("--commit", default="", help="commit to record (default: git HEAD here)")
        args = parser.parse_args(argv[1:])
        args.command = "report"
        return args
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="KernelBench tree (the folder holding level1/, level2/)")
    parser.add_argument("--evaluator", default="", help="KernelBench's evaluator folder (needed by the kernelbench phase)")
    parser.add_argument("--out", required=True, help="folder for results.jsonl, summary.json, summary.md")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, from {', '.join(PHASES)}")
    parser.add_argument("--only", default="", help=f"comma-separated selectors that must all hold: {', '.join(SELECTORS)}")
    parser.add_argument("--tasks", default="", help="only these task ids (level1/19_ReLU or 19_ReLU), comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="at most this many answers")
    parser.add_argument("--skip", default="", help="leave out these answers (cuda:level1/19_ReLU) or task ids, comma-separated")
    parser.add_argument("--identity", type=int, default=0,
                        help="also judge the reference itself as the answer for this many tasks of each --identity-levels "
                             "level, spread over the level (use --rules kernelbench)")
    parser.add_argument("--identity-levels", default="1,2", help="levels of the identity answers, comma-separated (default: 1,2)")
    parser.add_argument("--kb-identity", type=int, default=None,
                        help="KernelBench's pipeline judges only the first N identity answers of each level (default: all)")
    parser.add_argument("--deadline-s", type=float, default=0.0, help="start no answer after this many seconds (0: none)")
    parser.add_argument("--num-workers", type=int, default=None, help="kernelgym workers (default: the executor's)")
    parser.add_argument("--executor", default="local", choices=("local", "ray"),
                        help="kernelgym's executor (ray: a local Ray cluster of this machine, `pip install 'kernelgym[ray]'`)")
    parser.add_argument("--rules", default="native", choices=("native", "kernelbench"),
                        help="kernelgym's rule preset (kernelbench: PyTorch operators allowed in ModelNew)")
    parser.add_argument("--runs", type=int, default=0,
                        help="kernelgym's timed calls of each program (0: the verifier's default; 100: KernelBench's count)")
    parser.add_argument("--stage-timeout", type=float, default=0.0, help="kernelgym budget of every stage, s (0: the verifier's)")
    parser.add_argument("--kb-devices", type=int, default=1,
                        help="GPUs KernelBench's evaluator judges on at once (its num_gpu_devices: one answer per GPU per batch)")
    parser.add_argument("--kb-repeat", type=int, default=1,
                        help="judge every answer this many times with KernelBench's evaluator (its spread across runs)")
    parser.add_argument("--kb-build-workers", type=int, default=min(20, os.cpu_count() or 1),
                        help="KernelBench prebuild processes (its default: 20, capped at the cores)")
    parser.add_argument("--kb-gpu-arch", default="Hopper", help="KernelBench's gpu_arch names, comma-separated")
    parser.add_argument("--work-dir", default="", help="build caches and KernelBench build folders (default: a temp dir)")
    parser.add_argument("--cache-dir", default="",
                        help="kernelgym's build cache, holding only what `kernelgym prepare` built; the cold phase keeps it "
                             "(cold then means: no answer's build is cached). Default: a fresh cache in the work dir")
    parser.add_argument("--commit", default="", help="commit to record when this tree is not a git checkout")
    args = parser.parse_args(argv)
    args.command = "run"
    parse_phases(parser, args, PHASES)
    args.only = [s for s in args.only.split(",") if s]
    args.tasks = [t for t in args.tasks.split(",") if t]
    args.skip = [t for t in args.skip.split(",") if t]
    args.identity_levels = [int(level) for level in args.identity_levels.split(",") if level]
    return args


def parse_phases(parser: argparse.ArgumentParser, args: argparse.Namespace, phases: Sequence[str],
                 evaluator_needed: bool = True) -> None:
    """Split ``--phases`` and ``--kb-gpu-arch`` into lists; refuse a phase not in ``phases``, and (``evaluator_needed``)
    the kernelbench phase without KernelBench's evaluator folder."""
    args.phases = [p for p in args.phases.split(",") if p]
    bad = sorted(set(args.phases) - set(phases))
    if bad:
        parser.error(f"unknown phase(s) {', '.join(bad)}")
    if evaluator_needed and "kernelbench" in args.phases and not (args.evaluator and (Path(args.evaluator) / "eval.py").is_file()):
        parser.error("the kernelbench phase needs --evaluator pointing at KernelBench's evaluator folder (with eval.py)")
    args.kb_gpu_arch = [a for a in args.kb_gpu_arch.split(",") if a]


RUN_META = ("date", "commit", "gpu", "cpus", "torch", "python", "platform", "rules")
"""What a merged summary takes from the runs' own summaries: where and with what they ran."""


def read_results(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The answer records, the ``totals`` lines and the calls' machine metadata of one or more results files (the
    JSON lines ``real_answers.py`` and ``rl_rate.py`` append: ``record`` says ``call`` or ``totals``, else an answer)."""
    records, totals, metas = [], [], []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("record") == "totals":
                totals.append(row)
            elif row.get("record") == "call":
                metas.append(row.get("meta", {}))
            else:
                records.append(row)
    return records, totals, metas


def runs_meta(metas: Sequence[dict[str, Any]], commit: str, keys: Sequence[str] = RUN_META) -> dict[str, Any]:
    """The machine and software of the merged runs, not of the machine making the report.

    Each field of ``keys`` is the value the runs share, or their values joined with `` | ``; ``commit`` (when given)
    wins. Without any run's summary the report's own machine is recorded, and says so.

    Example:
        >>> runs_meta([{"gpu": "H100", "commit": "a"}, {"gpu": "H100", "commit": "b"}], "")
        {'commit': 'a | b', 'gpu': 'H100'}
    """
    if not metas:
        return {**machine_meta(commit), "machine_of": "the report (the runs' summary.json files were missing)"}
    meta: dict[str, Any] = {}
    for key in keys:
        values = list(dict.fromkeys(str(m[key]) for m in metas if key in m))
        if values:
            meta[key] = values[0] if len(values) == 1 else " | ".join(values)
    if commit:
        meta["commit"] = commit
    return meta


def report(args: argparse.Namespace) -> int:
    """Merge the JSON lines of earlier runs (later lines win per phase and answer) and write the summary."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    phases: dict[str, dict[str, Any]] = {}
    metas: list[dict[str, Any]] = []
    for path in args.inputs:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                merged[(record["phase"], record["answer"])] = record
        summary = Path(path).with_name("summary.json")
        if summary.is_file():
            content = json.loads(summary.read_text())
            metas.append(content.get("meta", {}))
            for phase, totals in content.get("phases", {}).items():  # the runs' walls add up (one machine, one after the other)
                merged_totals = phases.setdefault(phase, {})
                for key in ("wall_s", "prebuild_s"):
                    if key in totals:
                        merged_totals[key] = round(merged_totals.get(key, 0.0) + totals[key], 3)
                if "stand_ins" in totals:
                    merged_totals["stand_ins"] = totals["stand_ins"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {**runs_meta(metas, args.commit), "merged_from": list(args.inputs)}
    write_summary(out, list(merged.values()), phases, meta)
    log(f"wrote {out / 'summary.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected phases over the selected answers; write results as they come."""
    args = parse_args(argv)
    if args.command == "report":
        return report(args)
    started = time.time()
    deadline = started + args.deadline_s if args.deadline_s > 0 else float("inf")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.jsonl").unlink(missing_ok=True)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="kb-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    suite = load_kernelbench_dir(args.kernelbench)
    answers = select_answers(suite, args.only, args.tasks, args.limit, args.skip)
    if args.identity:
        answers += identity_answers(suite, args.identity_levels, args.identity)
    if not answers:
        raise SystemExit("no answer is left after --only/--tasks/--limit")
    meta = {**machine_meta(args.commit), "kernelbench": str(Path(args.kernelbench).resolve()),
            "answers": len(answers), "phases_run": args.phases, "rules": args.rules, "executor": args.executor,
            "cache": "prepared (kernelgym prepare)" if args.cache_dir else "fresh"}
    log(f"{len(answers)} answers ({sum(a.backend == 'cuda' for a in answers)} CUDA), phases {', '.join(args.phases)}; "
        f"work dir {work}")
    recorder = Recorder(out)
    totals: dict[str, dict[str, Any]] = {}
    if args.executor == "ray" and {"cold", "warm"} & set(args.phases):
        meta["ray_start_s"] = start_ray()
    cache = Path(args.cache_dir) if args.cache_dir else work / "kernelgym_cache"
    for phase in args.phases:
        try:
            if phase == "cold":
                if not args.cache_dir:
                    shutil.rmtree(cache, ignore_errors=True)
                totals[phase] = run_kernelgym(phase, answers, args, cache, recorder, deadline)
            elif phase == "warm":
                totals[phase] = run_kernelgym(phase, answers, args, cache, recorder, deadline)
            else:
                totals[phase] = run_kernelbench(kernelbench_answers(answers, args.kb_identity), args, work, recorder, deadline)
        except Exception:  # a broken phase is reported; the next phase still runs
            log(f"{phase}: phase failed:\n{traceback.format_exc()}")
            totals[phase] = {"error": traceback.format_exc()[-1500:]}
        log(f"{phase}: done, {totals[phase]}")
        write_summary(out, recorder.records, totals, {**meta, "elapsed_s": round(time.time() - started, 1)})
    if "ray_start_s" in meta:
        import ray

        ray.shutdown()
    log(f"all done in {time.time() - started:.1f} s; summary in {out / 'summary.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
