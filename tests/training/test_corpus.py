"""The kernel-writing corpus: deterministic, its held-out compositions never in training, its answers judged ``ok``.

One answer per family is judged by the real verifier on the ``triton`` backend (Triton's
interpreter on a machine without a GPU), with a broken answer beside them that must not pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgym.training.corpus import (
    KERNELBENCH_LEVEL1,
    CorpusItem,
    generate,
    is_held_out,
    judge_items,
    kernelbench_task_ids,
    read_jsonl,
    signature,
    write_jsonl,
    write_suite,
)
from kernelgym.training.corpus_families import FAMILIES, UNARY_OPS

KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR", Path(__file__).resolve().parents[3] / "shared" / "kernelbench"))


def test_generation_is_deterministic_and_seeded() -> None:
    assert generate(15, seed=4) == generate(15, seed=4)
    assert generate(15, seed=4) != generate(15, seed=5)
    assert {item.family for item in generate(10, seed=0)} == set(FAMILIES)


def test_items_vary_in_composition_shape_and_style() -> None:
    items = generate(60, seed=0, families=["elementwise"])
    assert len({item.signature for item in items}) > 30
    assert len({item.task_source.split("batch_size = ")[1].split("\n")[0] for item in items}) > 1
    assert len({item.answer_source.split("def ")[1].split("(")[0] for item in items}) > 1  # kernel names


def test_held_out_compositions_never_appear_in_training() -> None:
    train = {item.signature for item in generate(300, seed=0)} | {item.signature for item in generate(300, seed=1)}
    held_out = {item.signature for item in generate(100, seed=0, split="held_out")}
    assert not train & held_out
    assert len(held_out) >= 20
    assert all(is_held_out(signature("elementwise", (name,))) for name in UNARY_OPS)
    assert all(map(is_held_out, ("softmax:softmax", "normalization:layernorm", "reduction:sum", "matmul:linear_nobias")))


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="KernelBench's files are not here ($KERNELBENCH_DIR)")
def test_named_kernelbench_tasks_exist() -> None:
    from kernelgym.tasks import load_suite

    assert set(KERNELBENCH_LEVEL1) == set(FAMILIES)
    ids = kernelbench_task_ids()
    assert len(ids) >= 20 and set(ids) <= set(load_suite(f"kernelbench:{KERNELBENCH}:1").ids())


def test_jsonl_round_trip(tmp_path: Path) -> None:
    items = generate(6, seed=2)
    assert read_jsonl(write_jsonl(items, tmp_path / "c" / "train.jsonl")) == items


@pytest.mark.slow
def test_one_answer_per_family_is_judged_ok_and_a_broken_one_is_not(cache_dir: Path) -> None:
    pytest.importorskip("triton")
    from kernelgym import Verifier
    from kernelgym.verifier import VerifierConfig

    items = generate(len(FAMILIES), seed=7)
    good = next(item for item in items if item.family == "softmax")
    broken = CorpusItem("broken", good.family, good.ops, good.task_source,
                        good.answer_source.replace("tl.exp(z)", "tl.exp(z * 0.5)"))
    assert broken.answer_source != good.answer_source
    with Verifier("triton", config=VerifierConfig(timing=False), num_workers=2, cache_dir=cache_dir) as verifier:
        kept, statuses = judge_items([*items, broken], verifier)
    assert kept == items, statuses
    assert statuses["ok"] == len(items) and statuses["incorrect"] == 1


def test_items_written_as_a_suite_load_with_their_answers(tmp_path: Path) -> None:
    from kernelgym.tasks import load_suite

    items = generate(5, seed=3)
    ids = write_suite(items, tmp_path / "suite")
    suite = load_suite(f"kernelbench:{tmp_path / 'suite'}")
    assert suite.ids() == ids
    assert [suite[i].source for i in ids] == [item.task_source for item in items]
    assert [suite[i].solution("triton") for i in ids] == [item.answer_source for item in items]


@pytest.mark.slow
@pytest.mark.extended
def test_every_kernel_expression_of_every_op_is_judged_ok(cache_dir: Path) -> None:
    """Elementwise items drawn until each op's every kernel expression appears in some answer, all judged ok."""
    pytest.importorskip("triton")
    import random
    import re

    from kernelgym import Verifier
    from kernelgym.training.corpus_families import elementwise
    from kernelgym.verifier import VerifierConfig

    def pattern(template: str) -> str:
        """The line ``v = <expression>`` with any constant, as a regular expression."""
        return "v = " + re.escape(template.format(x="v", a="CONSTANT", b="CONSTANT")).replace("CONSTANT", r"-?[0-9.e-]+") + "\n"

    missing = {pattern(t) for op in UNARY_OPS.values() for t in (op.triton, *op.alternatives)}
    items = []
    for seed in range(500):
        drawn = elementwise(random.Random(seed))
        covered = {p for p in missing if re.search(p, drawn.answer_source)}
        if covered:
            missing -= covered
            items.append(CorpusItem(f"cover-{seed}", "elementwise", drawn.ops, drawn.task_source, drawn.answer_source))
        if not missing:
            break
    assert not missing
    with Verifier("triton", config=VerifierConfig(timing=False), num_workers=2, cache_dir=cache_dir) as verifier:
        kept, statuses = judge_items(items, verifier)
    assert kept == items, statuses
