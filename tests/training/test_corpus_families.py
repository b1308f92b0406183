"""The corpus's families: both task forms of an item are the same program, and every program imports what it uses.

An item's task is written compactly or as KernelBench's level-1 files are laid out; the two
renderings of one draw must build the same ``Model`` (parameters included) and the same inputs,
so the item's answer is right for either. Imports are checked with :mod:`symtable`, not by
running the program's top level: an answer reads ``torch`` only inside ``forward``, which the
top level never runs, and a missing ``import torch`` is exactly the break to catch.
"""

from __future__ import annotations

import builtins
import random
import symtable
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelgym.tasks import load_suite
from kernelgym.tasks.variants import derive_variants
from kernelgym.training.corpus import CorpusItem, generate, judge_items, write_suite
from kernelgym.training.corpus_families import FAMILIES, TASK_FORMS

KERNELBENCH_FORM_MARK = "super(Model, self).__init__()"


def _unbound_names(source: str) -> set[str]:
    """The global names ``source`` reads in any scope that it never binds at module level and Python does not provide."""
    top = symtable.symtable(source, "<program>", "exec")
    bound = {symbol.get_name() for symbol in top.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    read, tables = set(), [top]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        read |= {s.get_name() for s in table.get_symbols() if s.is_referenced() and (table is top or s.is_global())}
    return read - bound - set(dir(builtins))


def _run_task(source: str, seed: int) -> tuple[list[Any], list[Any], dict[str, torch.Tensor], torch.Tensor]:
    """The task's init inputs, inputs, parameters and output, each drawn after seeding as a judge seeds."""
    namespace: dict[str, Any] = {"__name__": "corpus_task"}
    exec(compile(source, "<task>", "exec"), namespace)
    torch.manual_seed(seed)
    init_inputs = namespace["get_init_inputs"]()
    model = namespace["Model"](*init_inputs)
    torch.manual_seed(seed)
    inputs = namespace["get_inputs"]()
    with torch.no_grad():
        return init_inputs, inputs, model.state_dict(), model(*inputs)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_both_task_forms_of_an_item_are_the_same_program(family: str) -> None:
    for seed in range(4):
        compact, kernelbench = (FAMILIES[family](random.Random(seed), task_form=form) for form in TASK_FORMS)
        assert (compact.ops, compact.answer_source) == (kernelbench.ops, kernelbench.answer_source)
        assert KERNELBENCH_FORM_MARK in kernelbench.task_source and KERNELBENCH_FORM_MARK not in compact.task_source
        assert derive_variants(compact.task_source) == derive_variants(kernelbench.task_source)
        (init_a, inputs_a, params_a, out_a), (init_b, inputs_b, params_b, out_b) = (
            _run_task(drawn.task_source, seed) for drawn in (compact, kernelbench))
        assert init_a == init_b
        assert all(torch.equal(a, b) for a, b in zip(inputs_a, inputs_b, strict=True))
        assert params_a.keys() == params_b.keys() and all(torch.equal(params_a[k], params_b[k]) for k in params_a)
        assert torch.equal(out_a, out_b)


def test_kernelbench_form_reads_like_a_kernelbench_level1_file(tmp_path: Path) -> None:
    drawn = [draw(random.Random(1), task_form="kernelbench") for draw in FAMILIES.values()]
    for item in drawn:
        source = item.task_source
        assert source.startswith("import torch\nimport torch.nn as nn\n")
        assert "class Model(nn.Module):\n    \"\"\"\n" in source
        assert "def forward(self, x: torch.Tensor) -> torch.Tensor:" in source
        assert "        Args:\n" in source and "        Returns:\n" in source
        assert source.index("batch_size = ") > source.index("class Model") and "    x = torch.randn(batch_size, " in source
    without_init_inputs = FAMILIES["softmax"](random.Random(1), task_form="kernelbench").task_source
    assert "return []  # No special initialization inputs needed" in without_init_inputs
    with_init_inputs = FAMILIES["matmul"](random.Random(1), task_form="kernelbench").task_source
    assert "return [in_features, out_features]" in with_init_inputs and "in_features (int): " in with_init_inputs
    items = [CorpusItem(f"kb-{i}", family, d.ops, d.task_source, d.answer_source)
             for i, (family, d) in enumerate(zip(FAMILIES, drawn, strict=True))]
    ids = write_suite(items, tmp_path / "suite")
    suite = load_suite(f"kernelbench:{tmp_path / 'suite'}")  # the judge's reader: parses and finds Model and both functions
    assert [suite[i].source for i in ids] == [item.task_source for item in items]


def test_a_batch_mixes_both_task_forms_about_evenly() -> None:
    items = generate(200, seed=0)
    share = sum(KERNELBENCH_FORM_MARK in item.task_source for item in items) / len(items)
    assert 0.35 <= share <= 0.65, share
    for family in FAMILIES:
        forms = {KERNELBENCH_FORM_MARK in item.task_source for item in items if item.family == family}
        assert forms == {True, False}, family


def test_every_program_of_a_batch_imports_what_it_uses() -> None:
    items = generate(60, seed=0) + generate(20, seed=0, split="held_out")
    for item in items:
        for source in (item.task_source, item.answer_source):
            compile(source, item.id, "exec")
            assert not _unbound_names(source), (item.id, _unbound_names(source), source)
    assert _unbound_names("import torch.nn as nn\n\ndef f(x):\n    return torch.relu(x)\n") == {"torch"}


def test_an_unknown_task_form_is_refused() -> None:
    with pytest.raises(ValueError, match="task form must be one of"):
        FAMILIES["elementwise"](random.Random(0), task_form="verbose")


@pytest.mark.slow
def test_kernelbench_form_tasks_judge_their_answers_ok(cache_dir: Path) -> None:
    pytest.importorskip("triton")
    from kernelgym import Verifier
    from kernelgym.verifier import VerifierConfig

    items = []
    for family, draw in FAMILIES.items():
        drawn = draw(random.Random(7), task_form="kernelbench")
        items.append(CorpusItem(f"kernelbench-form-{family}", family, drawn.ops, drawn.task_source, drawn.answer_source))
    with Verifier("triton", config=VerifierConfig(timing=False), num_workers=2, cache_dir=cache_dir) as verifier:
        kept, statuses = judge_items(items, verifier)
    assert kept == items, statuses
