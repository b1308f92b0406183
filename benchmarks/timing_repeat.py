"""Judge the same answers several times in a row, under each rule preset: how repeatable is the timing?

    python benchmarks/timing_repeat.py --kernelbench .kb --tasks level1/19_ReLU,level1/23_Softmax --out "$OUT"

For every preset in ``--rules`` one ``Verifier`` per backend judges every selected
bundled ``kernelbench`` answer ``--repeat`` times (the first judgement builds or
finds the build in the cache, the rest are warm). One JSON line per judgement goes
to ``<out>/repeat.jsonl`` as it comes (status, candidate and eager medians, the
candidate's interquartile range, stage seconds); ``<out>/repeat.md`` tabulates them.
A spread between repeats far above the IQR within a judgement means the timing
depends on something outside the candidate's kernels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from kernelbench_scale import BACKEND_ORDER, machine_meta, select_answers  # noqa: E402

from kernelgym.tasks import load_kernelbench_dir  # noqa: E402


def _record(rules: str, repeat: int, key: str, result: Any, seconds: float) -> dict[str, Any]:
    return {
        "rules": rules, "repeat": repeat, "answer": key, "status": result.status.value,
        "runtime_ms": result.runtime_ms, "runtime_spread_ms": result.runtime_spread_ms,
        "ref_eager_ms": result.ref_eager_ms, "speedup_eager": result.speedup_eager,
        "stage_seconds": {k: round(v, 3) for k, v in vars(result.seconds).items()} if result.seconds else {},
        "seconds": round(seconds, 3), "flags": list(result.flags),
    }


def table(records: list[dict[str, Any]]) -> list[str]:
    """Per (preset, answer): the candidate medians of every repeat, their range, the median IQR, the eager medians.

    Example:
        >>> recs = [{"rules": "native", "answer": "cuda:t", "runtime_ms": m, "runtime_spread_ms": 0.1, "ref_eager_ms": 2.0}
        ...         for m in (1.0, 3.0)]
        >>> table(recs)[-1]
        '| native | cuda:t | 1.000, 3.000 | 3.00x | 0.100 | 2.000, 2.000 |'
    """
    lines = ["| rules | answer | candidate medians, ms | max/min | median IQR, ms | eager medians, ms |",
             "| --- | --- | --- | --- | --- | --- |"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["rules"], record["answer"]), []).append(record)
    for (rules, answer), group in groups.items():
        times = [r["runtime_ms"] for r in group if r["runtime_ms"]]
        spreads = [r["runtime_spread_ms"] for r in group if r["runtime_spread_ms"] is not None]
        eager = [r["ref_eager_ms"] for r in group if r["ref_eager_ms"]]
        ratio = f"{max(times) / min(times):.2f}x" if times else "-"
        lines.append(f"| {rules} | {answer} | {', '.join(f'{t:.3f}' for t in times) or '-'} | {ratio} | "
                     f"{statistics.median(spreads):.3f} | {', '.join(f'{t:.3f}' for t in eager) or '-'} |"
                     if spreads else f"| {rules} | {answer} | - | - | - | - |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="KernelBench tree (the folder holding level1/, level2/)")
    parser.add_argument("--tasks", required=True, help="task ids, comma-separated (level1/19_ReLU or 19_ReLU)")
    parser.add_argument("--only", default="", help="selectors as in kernelbench_scale.py (e.g. cuda)")
    parser.add_argument("--rules", default="native,kernelbench", help="presets, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="")
    args = parser.parse_args(argv)

    from kernelgym import Verifier
    from kernelgym.verifier import VerifierConfig

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    answers = select_answers(load_kernelbench_dir(args.kernelbench), [s for s in args.only.split(",") if s],
                             [t for t in args.tasks.split(",") if t], None)
    if not answers:
        raise SystemExit("no bundled answer matches --tasks/--only")
    records: list[dict[str, Any]] = []
    with (out / "repeat.jsonl").open("w") as sink:
        for rules in args.rules.split(","):
            for backend in BACKEND_ORDER:
                mine = [a for a in answers if a.backend == backend]
                if not mine:
                    continue
                with Verifier(backend=backend, config=VerifierConfig(rules=rules)) as verifier:
                    for repeat in range(args.repeat):
                        for answer in mine:
                            start = time.perf_counter()
                            result = verifier.evaluate(answer.task, answer.text)
                            record = _record(rules, repeat, answer.key, result, time.perf_counter() - start)
                            records.append(record)
                            sink.write(json.dumps(record) + "\n")
                            sink.flush()
                            print(f"[{rules}] {answer.key} #{repeat}: {record['status']} {record['runtime_ms']} ms "
                                  f"(eager {record['ref_eager_ms']} ms)", flush=True)
    meta = machine_meta(args.commit)
    lines = [f"# Timing repeatability, {meta.get('date', '')}", "",
             *(f"- {k}: {v}" for k, v in meta.items()), f"- repeats: {args.repeat}", "", *table(records), ""]
    (out / "repeat.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
