"""The judge's rate on small generated Triton answers, submitted as an RL loop submits them.

    # one GPU, then two (the first N GPUs the process sees: CUDA_VISIBLE_DEVICES, else all)
    python benchmarks/rl_rate.py --devices 1 --phases cold,reuse,judge-once,fresh-seed --out runs/rl-rate-1gpu
    python benchmarks/rl_rate.py --devices 2 --phases cold,reuse,judge-once,fresh-seed --out runs/rl-rate-2gpu
    # one GPU with four judges, each timing alone
    python benchmarks/rl_rate.py --devices 1 --judges-per-device 4 --phases cold,reuse,fresh-seed --out runs/rl-rate-1gpu-4judges
    python benchmarks/rl_rate.py report --inputs runs/rl-rate-1gpu/results.jsonl runs/rl-rate-2gpu/results.jsonl --out runs/rl-rate
    # a CPU machine: Triton's interpreter checks the answers (no timing), a few answers only
    python benchmarks/rl_rate.py --n 3 --phases cold,reuse --out runs/rl-rate-cpu

The answers are ``kernelgym.training.corpus.generate(n, seed, split="train")``
items (elementwise chains, reductions, normalizations, softmaxes, small
matmuls: KernelBench level-1 sizes), each its task (``item_task``) and its
honest Triton answer. Each phase is one batch: every answer submitted at once
(``Verifier.submit``), each verdict recorded as it arrives, the phase's wall
taken from the first submission to the last verdict. Phases, in the order given:

``cold``
    the n answers through a new ``Verifier``: its workers start, and a build
    cache that is empty fills with what every worker needs once per machine
    (the ATen observer, the precompiled header); the cache's state is recorded.
``reuse``
    the same n (task, text) pairs through another new ``Verifier`` on the same
    cache. ``Verifier`` keeps no verdicts: what it may reuse is the build cache,
    counted by ``EvalResult.cache_hit`` (a Triton answer builds nothing ahead;
    its kernels compile at their first launch, in the candidate's own Triton
    cache, so they compile again).
``judge-once``
    the n pairs twice, 2n requests at once from 2n threads, through the RL
    loop's ``kernelgym.training.local_grpo.JudgeOnce`` over a new ``Verifier``:
    the second request of a pair waits for the first's verdict and reuses it;
    the phase records how many were judged and how many reused.
``fresh-seed``
    n other items (``seed + 1``) on the previous phase's verifier, its workers
    warm: the steady state of an RL run, new texts every step.

Devices: ``--devices N`` gives the executor N devices (``LocalExecutor(devices=N)``):
one judge worker per device, judge ``i`` pinned to the i-th GPU that
``CUDA_VISIBLE_DEVICES`` names (every GPU when it is unset), so a call uses the
first N GPUs it sees; set ``CUDA_VISIBLE_DEVICES`` to choose which. Without
``--devices`` the executor's default holds: one judge per visible GPU, or on a
machine without a GPU up to four workers running Triton's interpreter.
``--judges-per-device K`` starts K judges per device (``LocalExecutor(judges_per_device=K)``):
they check side by side and each times alone, holding its device's lock.

Output in ``--out``: ``results.jsonl`` (appended to: a ``call`` line with the
machine, one line per answer as its verdict arrives, a ``totals`` line per
phase), ``summary.json`` and ``summary.md`` (answers per minute per phase,
device count and judges per device, the steady rate after the first verdict, stage
medians, and the rate on N devices over the rate on one with as many judges per device). ``--deadline-s`` stops submitting and
waiting after that many seconds of the call (the rest is ``not_run``).
``report --inputs a/results.jsonl b/results.jsonl --out DIR`` merges calls
(a one-GPU and a two-GPU call) into one summary.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import os
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import kernelbench_scale as kbs  # noqa: E402

__all__ = ["PHASES", "answer_record", "phase_totals", "summarize", "render_markdown", "main"]

PHASES = ("cold", "reuse", "judge-once", "fresh-seed")
TARGET_PER_MIN = 60.0
"""Answers per minute one GPU should judge."""
TARGET_SCALING = 1.8
"""How many times that two GPUs should judge."""
RUN_META = (*kbs.RUN_META, "backend")


# -- judging --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Phase:
    """What one phase judged: its records and its wall."""

    name: str
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    wall_s: float = 0.0
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


def answer_record(phase: str, item: Any, result: Any, seconds: float, at_s: float, repeat: int = 0) -> dict[str, Any]:
    """One verdict as a record: the item, its status and timings, the build cache's answer.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> item = NS(id="train-0-0", family="elementwise", signature="elementwise:relu>scale")
        >>> result = NS(status=NS(value="ok"), seconds=NS(build=0.01, check=0.5), cache_hit=False, device="cpu", feedback="")
        >>> record = answer_record("cold", item, result, 1.23456, 2.0)
        >>> record["status"], record["seconds"], record["stage_seconds"]["check"]
        ('ok', 1.235, 0.5)
    """
    stages = result.seconds
    stages = dataclasses.asdict(stages) if dataclasses.is_dataclass(stages) else dict(vars(stages))
    record = {
        "phase": phase, "answer": item.id, "family": item.family, "signature": item.signature, "repeat": repeat,
        "status": result.status.value, "seconds": round(seconds, 3), "at_s": round(at_s, 3),
        "stage_seconds": {k: round(v, 4) for k, v in stages.items()}, "cache_hit": bool(result.cache_hit),
        "device": result.device,
    }
    if result.status.value != "ok":
        record["feedback"] = kbs._record_text(result.feedback or "")
    return record


def _missing(phase: str, item: Any, status: str, why: str, repeat: int = 0) -> dict[str, Any]:
    return {"phase": phase, "answer": item.id, "family": item.family, "signature": item.signature, "repeat": repeat,
            "status": status, "seconds": 0.0, "feedback": why}


def judge_batch(verifier: Any, phase: str, items: Sequence[Any], deadline: float, on_record: Any) -> Phase:
    """Submit every item's answer to ``verifier`` (none after ``deadline``, a ``time.time()``), record each verdict
    as it arrives through ``on_record``; answers without a verdict by the deadline are ``not_run``."""
    from kernelgym.training.corpus import item_task

    done = Phase(phase)
    start = time.perf_counter()
    submitted: dict[concurrent.futures.Future, tuple[int, float]] = {}
    for index, item in enumerate(items):
        if time.time() >= deadline:
            break
        submitted[verifier.submit(item_task(item), item.answer_source)] = (index, time.perf_counter())
    seen: set[int] = set()
    for index, began, result, error in kbs.verdicts_as_they_come(submitted, deadline, phase):
        now = time.perf_counter()
        if error is None:
            record = answer_record(phase, items[index], result, now - began, now - start)
        else:  # one answer's harness failure, not its verdict
            record = {**_missing(phase, items[index], "harness_error", f"{type(error).__name__}: {error}"),
                      "seconds": round(now - began, 3), "at_s": round(now - start, 3)}
        seen.add(index)
        done.records.append(record)
        on_record(record)
    done.wall_s = time.perf_counter() - start
    for index, item in enumerate(items):
        if index not in seen:
            record = _missing(phase, item, "not_run", "deadline passed before its verdict")
            done.records.append(record)
            on_record(record)
    return done


def judge_once_batch(verifier: Any, phase: str, items: Sequence[Any], deadline: float, on_record: Any) -> Phase:
    """Each item's answer asked twice at once through the RL loop's ``JudgeOnce`` (one thread per request): the
    pair's second request waits for the first's verdict; ``extra`` holds how many were judged and reused."""
    from kernelgym.training.corpus import item_task
    from kernelgym.training.local_grpo import JudgeOnce

    verifier.executor  # noqa: B018 (made now, not by two threads at once)
    judge = JudgeOnce(verifier)
    requests = [(item, repeat) for repeat in (0, 1) for item in items]
    done = Phase(phase)
    start = time.perf_counter()

    def ask(item: Any, repeat: int) -> dict[str, Any]:
        began = time.perf_counter()
        result = judge.evaluate(item_task(item), item.answer_source)
        now = time.perf_counter()
        return answer_record(phase, item, result, now - began, now - start, repeat)

    with concurrent.futures.ThreadPoolExecutor(len(requests), thread_name_prefix="rl-rate") as pool:
        futures = {pool.submit(ask, item, repeat): (item, repeat) for item, repeat in requests if time.time() < deadline}
        remaining = None if deadline == float("inf") else max(0.0, deadline - time.time())
        try:
            for future in concurrent.futures.as_completed(futures, timeout=remaining):
                item, repeat = futures.pop(future)
                try:
                    record = future.result()
                except Exception as exc:  # noqa: BLE001 (recorded)
                    record = _missing(phase, item, "harness_error", f"{type(exc).__name__}: {exc}", repeat)
                done.records.append(record)
                on_record(record)
        except concurrent.futures.TimeoutError:
            kbs.log(f"{phase}: deadline passed with {len(futures)} verdicts outstanding")
        done.wall_s = time.perf_counter() - start
        if futures:
            verifier.close()  # the threads still waiting get a crash result and end
    answered = {(r["answer"], r["repeat"]) for r in done.records}
    for item, repeat in requests:
        if (item.id, repeat) not in answered:
            record = _missing(phase, item, "not_run", "deadline passed before its verdict", repeat)
            done.records.append(record)
            on_record(record)
    done.extra = {"judged_once": judge.judged, "reused": judge.reused}
    return done


def cache_state(cache: Path) -> str:
    """``empty`` (a first judgement fills it: minutes of one-time builds) or ``filled``."""
    return "filled" if cache.is_dir() and any((cache / "builds").glob("*")) else "empty"


def pinned_devices(devices: int | None, backend: str) -> list[str]:
    """The device ids the judges are pinned to (``[]``: no GPU, or the executor's default of every visible GPU)."""
    from kernelgym.backends import get_backend
    from kernelgym.backends.cuda import pinned_device

    if not devices:
        return []
    backend_obj = get_backend(backend)
    count = backend_obj.device_count()
    if devices > count:
        raise SystemExit(f"--devices {devices}: this process sees {count} {backend} devices")
    visible = os.environ.get(getattr(backend_obj, "visible_devices_env", "CUDA_VISIBLE_DEVICES"))
    return [pinned_device(i, visible, count) for i in range(devices)]


def phase_totals(phase: Phase, devices: int, device_ids: Sequence[str], workers: int, **extra: Any) -> dict[str, Any]:
    """A phase's ``totals`` line: answers with a verdict, wall, rates, statuses, cache hits.

    ``answers_per_min`` counts from the first submission; ``steady_per_min`` from the first verdict to the last
    (the workers' start and the first answer's whole course left out).

    Example:
        >>> recs = [{"status": "ok", "at_s": t, "cache_hit": False} for t in (10.0, 11.0, 12.0)]
        >>> totals = phase_totals(Phase("cold", recs, 12.0), 1, ["0"], 1)
        >>> totals["answers_per_min"], totals["steady_per_min"], totals["statuses"]
        (15.0, 60.0, {'ok': 3})
    """
    judged = [r for r in phase.records if r["status"] not in ("not_run", "harness_error")]
    times = sorted(r["at_s"] for r in judged)
    steady = 60.0 * (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None
    return {
        "phase": phase.name, "n": len(phase.records), "judged": len(judged), "wall_s": round(phase.wall_s, 3),
        "answers_per_min": round(60.0 * len(judged) / phase.wall_s, 2) if phase.wall_s > 0 else None,
        "steady_per_min": round(steady, 2) if steady else None, "first_verdict_s": times[0] if times else None,
        "statuses": dict(Counter(r["status"] for r in phase.records)), "cache_hits": sum(r.get("cache_hit", False) for r in judged),
        "devices": devices, "device_ids": list(device_ids), "workers": workers, **phase.extra, **extra,
    }


# -- summary --------------------------------------------------------------------------------------------------


def _median(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(statistics.median(values), 3) if values else None


def summarize(records: Sequence[dict[str, Any]], totals: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rates per phase, device count and judges per device (calls of the same kind pooled: verdicts over walls), stage
    medians, and the rate on N devices over the rate on one with as many judges per device, per phase. Lines without
    ``judges_per_device`` (older calls) had one.

    Example:
        >>> totals = [{"phase": "cold", "devices": d, "judged": 60, "wall_s": w, "workers": d, "statuses": {"ok": 60}}
        ...           for d, w in ((1, 60.0), (2, 30.0))]
        >>> s = summarize([], totals)
        >>> [(r["devices"], r["answers_per_min"]) for r in s["rows"]], s["scaling"]
        ([(1, 60.0), (2, 120.0)], [{'phase': 'cold', 'devices': 2, 'judges_per_device': 1, 'ratio': 2.0, 'meets': True}])
    """
    totals = [t for t in totals if "judged" in t]  # a phase that failed has an error instead
    order = {phase: index for index, phase in enumerate(PHASES)}
    rows = []
    kinds = {(t["phase"], t["devices"], t.get("judges_per_device", 1)) for t in totals}
    for phase, devices, judges in sorted(kinds, key=lambda k: (order.get(k[0], 99), k[1], k[2])):
        group = [t for t in totals if (t["phase"], t["devices"], t.get("judges_per_device", 1)) == (phase, devices, judges)]
        judged, wall = sum(t["judged"] for t in group), sum(t["wall_s"] for t in group)
        mine = [r for r in records if r["phase"] == phase and r.get("devices") == devices
                and r.get("judges_per_device", 1) == judges and r["status"] != "not_run"]
        statuses: Counter[str] = Counter()
        for t in group:
            statuses.update(t["statuses"])
        rate = round(60.0 * judged / wall, 2) if wall else None
        rows.append({
            "phase": phase, "devices": devices, "judges_per_device": judges, "workers": group[-1]["workers"], "calls": len(group),
            "judged": judged,
            "wall_s": round(wall, 3), "answers_per_min": rate, "steady_per_min": _median(t["steady_per_min"] for t in group if t.get("steady_per_min")),
            "first_verdict_s": _median(t["first_verdict_s"] for t in group if t.get("first_verdict_s") is not None),
            "statuses": dict(statuses), "cache_hits": sum(t.get("cache_hits", 0) for t in group),
            "reused": sum(t.get("reused", 0) for t in group) if phase == "judge-once" else None,
            "cache_state": " / ".join(dict.fromkeys(str(t.get("cache_state", "")) for t in group)),
            "median_answer_s": _median(r["seconds"] for r in mine),
            "median_stage_s": {stage: _median(r["stage_seconds"][stage] for r in mine if "stage_seconds" in r)
                               for stage in ("build", "check", "time")},
            "meets_target": rate >= TARGET_PER_MIN if rate is not None and devices == 1 else None,
        })
    by_key = {(r["phase"], r["devices"], r["judges_per_device"]): r for r in rows}
    scaling = []
    for row in rows:
        one = by_key.get((row["phase"], 1, row["judges_per_device"]))
        if row["devices"] > 1 and one and one["answers_per_min"] and row["answers_per_min"]:
            ratio = round(row["answers_per_min"] / one["answers_per_min"], 3)
            scaling.append({"phase": row["phase"], "devices": row["devices"], "judges_per_device": row["judges_per_device"],
                            "ratio": ratio, "meets": ratio >= TARGET_SCALING if row["devices"] == 2 else None})
    return {"rows": rows, "scaling": scaling}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items() if v is not None) or "-"
    return str(value)


def render_markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    """``summary.md``: the machine, the table phase x devices x judges per device x answers per minute, the scaling ratios."""
    lines = ["# Judge rate on small generated Triton answers", "",
             ", ".join(f"{k}: {v}" for k, v in meta.items() if k != "inputs"), "",
             f"Targets: {TARGET_PER_MIN:.0f} answers per minute on one GPU, {TARGET_SCALING}x that on two. "
             "Devices 0: no GPU pinned (the executor's default workers; on a CPU machine Triton's interpreter).", "",
             "| phase | devices | judges/device | workers | calls | judged | wall s | answers/min | steady/min | first verdict s | "
             "median answer s | median stage s | statuses | cache hits | reused | cache | meets 60/min |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | --- |"]
    for row in summary["rows"]:
        lines.append("| " + " | ".join(_cell(row[k]) for k in (
            "phase", "devices", "judges_per_device", "workers", "calls", "judged", "wall_s", "answers_per_min", "steady_per_min", "first_verdict_s",
            "median_answer_s", "median_stage_s", "statuses", "cache_hits", "reused", "cache_state", "meets_target")) + " |")
    if summary["scaling"]:
        lines += ["", "| phase | devices | judges/device | rate / one device's | meets 1.8x |", "| --- | ---: | ---: | ---: | --- |"]
        lines += [f"| {s['phase']} | {s['devices']} | {s['judges_per_device']} | {s['ratio']:.2f}x | {_cell(s['meets'])} |"
                  for s in summary["scaling"]]
    return "\n".join(lines) + "\n"


def write_summary(out: Path, inputs: Sequence[str | Path], commit: str = "") -> dict[str, Any]:
    """Write ``summary.json`` and ``summary.md`` into ``out`` from the results files ``inputs``; returns the summary."""
    records, totals, metas = kbs.read_results(inputs)
    summary = summarize(records, totals)
    meta = {**kbs.runs_meta(metas, commit, RUN_META), "inputs": [str(p) for p in inputs]}
    (out / "summary.json").write_text(json.dumps({"meta": meta, **summary}, indent=2, sort_keys=True, default=str))
    (out / "summary.md").write_text(render_markdown(summary, meta))
    return summary


# -- command line ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Flags of a run, or of ``report`` (the same as ``kernelbench_scale.py report``: merge results files into one summary)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["report"]:
        return kbs.parse_args(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for results.jsonl (appended to), summary.json, summary.md")
    parser.add_argument("--n", type=int, default=60, help="answers per phase")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (fresh-seed uses seed + 1)")
    parser.add_argument("--phases", default="cold,reuse", help=f"comma-separated, from {', '.join(PHASES)}")
    parser.add_argument("--backend", default="triton", help="kernelgym's backend (default: triton)")
    parser.add_argument("--rules", default="native", choices=("native", "kernelbench"), help="kernelgym's rule preset")
    parser.add_argument("--devices", type=int, default=None,
                        help="judge on the first N GPUs this process sees (CUDA_VISIBLE_DEVICES), one judge each "
                             "(default: every visible GPU; none on a CPU machine)")
    parser.add_argument("--judges-per-device", type=int, default=1, metavar="K",
                        help="judges per device, checking side by side and each timing alone (default: 1)")
    parser.add_argument("--workers", type=int, default=None, help="judge workers (default: --judges-per-device per device)")
    parser.add_argument("--runs", type=int, default=None,
                        help="timed calls per program (default: the backend's, fitted to the timing budget; an RL loop may time fewer)")
    parser.add_argument("--cache-dir", default="", help="kernelgym's build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    parser.add_argument("--deadline-s", type=float, default=0.0,
                        help="after this many seconds of the call submit nothing and wait for no verdict (0: none)")
    parser.add_argument("--commit", default="", help="commit to record when this tree is not a git checkout")
    args = parser.parse_args(argv)
    args.command = "run"
    args.phases = [p for p in args.phases.split(",") if p]
    unknown = [p for p in args.phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {unknown}; choose among {', '.join(PHASES)}")
    return args


def run_phase(phase: str, verifier: Any, args: argparse.Namespace, deadline: float, on_record: Any) -> Phase:
    """Judge one phase's answers on ``verifier``."""
    from kernelgym.training.corpus import generate

    items = generate(args.n, seed=args.seed + (phase == "fresh-seed"), split="train")
    batch = judge_once_batch if phase == "judge-once" else judge_batch
    return batch(verifier, phase, items, deadline, on_record)


def main(argv: Sequence[str] | None = None) -> int:
    """Run each phase in turn on its verifier, appending to results.jsonl, then rewrite the summary."""
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.command == "report":
        write_summary(out, args.inputs, args.commit)
        kbs.log(f"wrote {out / 'summary.md'}")
        return 0
    from kernelgym import Verifier
    from kernelgym.backends.cache import default_cache_dir
    from kernelgym.verifier import VerifierConfig

    started = time.time()
    deadline = started + args.deadline_s if args.deadline_s > 0 else float("inf")
    cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    device_ids = pinned_devices(args.devices, args.backend)
    devices = len(device_ids)
    judges = args.judges_per_device
    call = f"{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S}-{devices}dev" + (f"-{judges}judges" if judges > 1 else "")
    meta = {**kbs.machine_meta(args.commit), "rules": args.rules, "backend": args.backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "out")}

    recorder = kbs.CallRecorder(out, call)
    note = recorder.note

    def on_record(record: dict[str, Any]) -> None:
        recorder.add({**record, "devices": devices, "judges_per_device": judges})

    note("call", meta=meta, flags=flags, devices=devices, device_ids=device_ids, judges_per_device=judges)
    kbs.log(f"{call}: {args.n} answers per phase, phases {', '.join(args.phases)}, devices {device_ids or 'default'}, "
            f"{judges} judges per device, cache {cache}")
    verifier = None
    try:
        for phase in args.phases:
            warm = phase == "fresh-seed" and verifier is not None
            state = cache_state(cache)
            if not warm:
                if verifier is not None:
                    verifier.close()
                options = {"devices": args.devices} if args.devices else {}
                verifier = Verifier(backend=args.backend, config=VerifierConfig(rules=args.rules, runs=args.runs), num_workers=args.workers,
                                    cache_dir=cache, judges_per_device=judges, **options)
            try:
                done = run_phase(phase, verifier, args, deadline, on_record)
                totals = phase_totals(done, devices, device_ids, getattr(verifier.executor, "num_workers", None), cache_state=state,
                                      verifier="warm" if warm else "new", judges_per_device=judges)
            except Exception:  # a broken phase is reported; the next phase still runs
                kbs.log(f"{phase}: phase failed:\n{traceback.format_exc()}")
                totals = {"phase": phase, "error": traceback.format_exc()[-1500:]}
            note("totals", **totals)
            kbs.log(f"{phase}: {json.dumps(totals, default=str)}")
            write_summary(out, [recorder.path], args.commit)
    finally:
        if verifier is not None:
            verifier.close()
    kbs.log(f"all done in {time.time() - started:.1f} s; summary in {out / 'summary.md'}")
    print((out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
