"""``benchmarks/real_answers.py`` without a GPU: its report on synthetic records, and its reading of CUDA-L1's answers.

The report's agreement tables, verdict agreement, speedup ratio, throughput and
timeout list are checked on a handful of hand-made records. Where KernelBench's
task files are present (``$KERNELBENCH_DIR`` or ``../shared/kernelbench``)
CUDA-L1-style rows are matched to them; ``$KERNELGYM_CUDAL1_ANSWERS`` names a
copy of CUDA-L1's own answers file to check all of it the same way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR", REPO.parent / "shared" / "kernelbench"))


sys.path.insert(0, str(REPO / "benchmarks"))  # a folder of scripts, not a package

import real_answers as ra  # noqa: E402


def _kg(answer: str, status: str, verdict: str | None = None, speedup: float | None = None, call: str = "c1",
        **extra: Any) -> dict[str, Any]:
    return {"phase": "kernelgym", "answer": answer, "task": answer.split(":")[1], "backend": "cuda", "status": status,
            "kernelbench_verdict": verdict or status, "kernelbench_speedup": speedup, "speedup": speedup,
            "seconds": 30.0, "call": call, "feedback_first_line": f"why {answer}",
            "stage_seconds": {"extract": 0.0, "inspect": 0.1, "build": 20.0, "check": 5.0, "time": 5.0}, **extra}


def _kb(answer: str, status: str, speedup: float | None = None, call: str = "c1") -> dict[str, Any]:
    return {"phase": "kernelbench", "answer": answer, "task": answer.split(":")[1], "backend": "cuda", "status": status,
            "speedup": speedup, "seconds": 40.0, "call": call}


RECORDS = [
    _kg("cudal1:level1/1_A", "ok", speedup=2.1), _kb("cudal1:level1/1_A", "ok", 2.0),
    _kg("cudal1:level1/2_B", "ok", speedup=0.97), _kb("cudal1:level1/2_B", "ok", 1.0),
    # weights transformed in __init__: strict says illegal, KernelBench's contract says ok; KernelBench agrees
    _kg("cudal1:level1/3_C", "illegal", "ok", speedup=1.5, kernelbench_differs_by="weights-cached"),
    _kb("cudal1:level1/3_C", "ok", 1.6),
    _kg("cudal1:level1/4_D", "timeout"), _kb("cudal1:level1/4_D", "ok", 1.05),
    _kg("cudal1:level1/5_E", "compile_error"), _kb("cudal1:level1/5_E", "compile_error"),
    _kg("cudal1:level1/6_F", "incorrect"), _kb("cudal1:level1/6_F", "runtime_error"),
    _kg("cudal1:level2/7_G", "ok", speedup=1.2),  # kernelgym only
    _kg("cudal1:level2/8_H", "not_run"),
]
TOTALS = [
    {"record": "totals", "call": "c1", "phase": "kernelgym", "wall_s": 60.0, "judged": 7, "cache_hits": 0},
    {"record": "totals", "call": "c1", "phase": "kernelbench", "wall_s": 240.0, "judged": 6},
]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_report_tables_agreement_speedups_and_throughput(tmp_path: Path) -> None:
    results = _write(tmp_path / "results.jsonl", [*RECORDS, *TOTALS])
    assert ra.main(["report", "--inputs", str(results), "--out", str(tmp_path / "out"), "--commit", "abc"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())

    assert summary["answers"] == {"kernelgym": 8, "kernelbench": 6, "both_judged": 6, "both_in_one_call": 6}
    assert summary["agreement_strict"] == {"correct": {"ok": 2, "illegal": 1, "timeout": 1},
                                           "incorrect": {"incorrect": 1}, "not compiled": {"compile_error": 1}}
    assert summary["agreement_contract"]["correct"] == {"ok": 3, "timeout": 1}
    agreement = summary["verdict_agreement"]
    assert (agreement["answers"], agreement["agree"]) == (6, 5)
    assert [(d["answer"], d["kernelgym_contract"], d["kernelbench"], d["first_feedback_line"])
            for d in agreement["disagreements"]] == [("cudal1:level1/4_D", "timeout", "ok", "why cudal1:level1/4_D")]
    # |2.1/2 - 1| = 0.05, |0.97/1 - 1| = 0.03, |1.5/1.6 - 1| = 0.0625: the median is 0.05
    assert summary["speedup_agreement"]["answers"] == 3
    assert summary["speedup_agreement"]["median_abs_deviation"] == pytest.approx(0.05)
    assert summary["timeouts_on_kernelbench_correct"] == ["cudal1:level1/4_D"]
    throughput = summary["throughput"]
    assert (throughput["kernelgym"]["answers_per_min"], throughput["kernelbench"]["answers_per_min"]) == (7.0, 1.5)
    assert throughput["ratio"] == pytest.approx(7.0 / 1.5, abs=1e-3)
    # stages 30.1 s over 20 + 10 + 20 s; wall 30 s over the same
    assert summary["own_time"]["largest_stage_ratio"][1] == pytest.approx(0.602)
    assert summary["meta"]["commit"] == "abc"
    markdown = (tmp_path / "out" / "summary.md").read_text()
    assert "| correct | 2 | 0 | 1 | 0 | 0 | 0 | 1 | 0 | 4 |" in markdown
    assert "on 5 of 6 answers" in markdown


def test_later_records_win_and_not_run_is_not_judged(tmp_path: Path) -> None:
    first = _write(tmp_path / "a.jsonl", [_kg("cudal1:level1/1_A", "not_run"), _kb("cudal1:level1/1_A", "ok", 1.0)])
    second = _write(tmp_path / "b.jsonl", [_kg("cudal1:level1/1_A", "ok", speedup=1.0, call="c2")])
    records, _, _ = ra.read_results([first])
    assert ra.summarize(records)["answers"]["both_judged"] == 0
    records, _, _ = ra.read_results([first, second])
    summary = ra.summarize(records)
    assert summary["answers"]["both_judged"] == 1 and summary["answers"]["both_in_one_call"] == 0
    assert summary["verdict_agreement"]["share"] == 1.0


def test_shards_partition_the_selection_and_resume_skips_what_is_done() -> None:
    tasks = [ra.Task(f"level{1 + i % 3}/{i}_T", "T", 1 + i % 3, i, "") for i in range(1, 11)]
    answers = [ra.kbs.Answer(t, "cuda", "x", label=ra.LABEL) for t in tasks]
    shards = [ra.select(answers, [], (i, 3), None) for i in (1, 2, 3)]
    keys = [a.key for shard in shards for a in shard]
    assert sorted(keys) == sorted(a.key for a in answers) and len(set(keys)) == len(keys)
    sample = ra.draw_sample(answers, 3, seed=0)
    assert sample == ra.draw_sample(answers[::-1], 3, seed=0) and len(sample) == 3
    dealt = [{a.key for a in ra.select(answers, [], (i, 3), None, sample=sample)} & set(sample) for i in (1, 2, 3)]
    assert [len(keys) for keys in dealt] == [1, 1, 1]
    done = {("kernelgym", a.key) for a in answers}
    left = ra.select(answers, [], (1, 1), None, done, ra.PHASES, sample)
    assert sorted(a.key for a in left) == sorted(sample)


def _kernelbench_tree() -> Path:
    if not (KERNELBENCH / "level1").is_dir():
        pytest.skip("KernelBench's task files are not here (set KERNELBENCH_DIR)")
    return KERNELBENCH


def _assert_named_after_task_files(corpus: Any, root: Path) -> None:
    for answer in corpus.answers:
        level, name = answer.task.id.split("/")
        assert (root / level / f"{name}.py").is_file()
        assert name.split("_")[0] == str(answer.task.problem_id)


def test_rows_map_to_kernelbench_task_files(tmp_path: Path) -> None:
    from kernelgym.tasks import load_kernelbench_dir

    root = _kernelbench_tree()
    rows = [{"level_id": 1, "task_id": 19, "ref_code": "x", "custom_code": "class ModelNew: pass", "score_default": 1.1},
            {"level_id": 2, "task_id": 3, "ref_code": "x", "custom_code": "class ModelNew: pass"},
            {"level_id": 3, "task_id": 1, "ref_code": "x", "custom_code": None},
            {"level_id": 1, "task_id": 9999, "ref_code": "x", "custom_code": "class ModelNew: pass"}]
    path = _write(tmp_path / "answers.json", rows)
    corpus = ra.read_answers(path, load_kernelbench_dir(root))
    assert [a.task.id.split("_")[0] for a in corpus.answers] == ["level1/19", "level2/3"]
    assert (corpus.rows, corpus.without_code, corpus.unmatched) == (4, 1, ("level1/9999",))
    assert corpus.scores[corpus.answers[0].key] == 1.1
    _assert_named_after_task_files(corpus, root)
    own = ra.read_answers(path, load_kernelbench_dir(root), reference="answers")
    assert own.answers[0].task.source == "x" and own.answers[0].task.id == corpus.answers[0].task.id


def test_cudal1_answers_file_maps_to_task_files() -> None:
    from kernelgym.tasks import load_kernelbench_dir

    root = _kernelbench_tree()
    path = os.environ.get("KERNELGYM_CUDAL1_ANSWERS")
    if not path:
        pytest.skip("set KERNELGYM_CUDAL1_ANSWERS to a copy of CUDA-L1's answers (JSON lines) to check it")
    corpus = ra.read_answers(path, load_kernelbench_dir(root))
    assert corpus.unmatched == () and len(corpus.answers) == corpus.rows - corpus.without_code > 0
    _assert_named_after_task_files(corpus, root)
