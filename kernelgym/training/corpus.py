"""A corpus of KernelBench-format tasks with honest Triton answers, every answer judged ``ok`` before it is kept.

Holds:
    CorpusItem: one task program, its Triton answer, its family and its op-composition signature.
    KERNELBENCH_LEVEL1: KernelBench level-1 tasks of the corpus's families, by family (held out, never generated).
    kernelbench_task_ids: the ids of those tasks in a KernelBench suite (``level1/19_ReLU``, ...).
    signature: the op-composition key of an item (``"elementwise:relu>scale"``).
    is_held_out: whether a signature belongs to the held-out split.
    generate: ``n`` items of one split, deterministic from a seed.
    item_task: an item's task as a :class:`~kernelgym.tasks.Task` for the judge.
    judge_items: judge items' answers with a verifier; the items judged ``ok`` and every verdict's status.
    write_jsonl, read_jsonl: a corpus file, one item per line.
    write_suite: items as a KernelBench-layout folder (tasks and their Triton answers), a suite for bench and training.

The families and their code live in :mod:`kernelgym.training.corpus_families`.
The held-out split is defined by signature, never by seed: a signature is held
out when it is the composition of a KernelBench level-1 task (one op alone:
``elementwise:relu``, ``softmax:softmax``, ``normalization:layernorm``,
``reduction:sum``, ``matmul:linear_nobias``) or when its hash falls in a fixed
tenth of the space, so no training item ever shares an op composition with a
held-out one, whatever seeds made them. Build a corpus (Triton's interpreter
judges on a machine without a GPU), and a held-out suite to benchmark on::

    python -m kernelgym.training.corpus --n 400 --seed 0 --split train --out corpus/train.jsonl
    python -m kernelgym.training.corpus --n 40 --split held_out --out corpus/held_out.jsonl --suite-dir corpus/held_out
    kernelgym bench --suite kernelbench:corpus/held_out --backend triton --agent kernel-lm --model checkpoints/kernel-lm
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.tasks import Task
from kernelgym.training.corpus_families import FAMILIES, NORMS, REDUCERS, SOFTMAXES, UNARY_OPS

__all__ = [
    "KERNELBENCH_LEVEL1", "CorpusItem", "generate", "is_held_out", "item_task", "judge_items", "kernelbench_task_ids", "read_jsonl",
    "signature", "write_jsonl", "write_suite",
]

SPLITS = ("train", "held_out")

KERNELBENCH_LEVEL1: dict[str, tuple[str, ...]] = {
    "elementwise": ("19_ReLU", "20_LeakyReLU", "21_Sigmoid", "22_Tanh", "25_Swish", "26_GELU_", "27_SELU_",
                    "28_HardSigmoid", "29_Softplus", "30_Softsign", "31_ELU", "32_HardTanh",
                    "5_Matrix_scalar_multiplication"),
    "softmax": ("23_Softmax", "24_LogSoftmax"),
    "normalization": ("36_RMSNorm_", "38_L1Norm_", "39_L2Norm_", "40_LayerNorm"),
    "reduction": ("47_Sum_reduction_over_a_dimension", "48_Mean_reduction_over_a_dimension",
                  "49_Max_reduction_over_a_dimension", "53_Min_reduction_over_a_dimension"),
    "matmul": ("1_Square_matrix_multiplication_", "2_Standard_matrix_multiplication_",
               "6_Matmul_with_large_K_dimension_", "7_Matmul_with_small_K_dimension_",
               "8_Matmul_with_irregular_shapes_", "9_Tall_skinny_matrix_multiplication_"),
}
"""File stems under KernelBench's ``level1/``; their single-op compositions are held out of every training corpus."""

# The single-op compositions KernelBench's level 1 asks for: never in a training corpus.
_KERNELBENCH_SIGNATURES = frozenset(
    [f"elementwise:{name}" for name in UNARY_OPS]
    + [f"softmax:{name}" for name in SOFTMAXES]
    + [f"normalization:{name}" for name in NORMS]
    + [f"reduction:{name}" for name in REDUCERS]
    + ["matmul:linear_nobias"]
)
_HELD_OUT_TENTHS = 1  # of the remaining signatures, those whose hash falls in this many tenths are held out


@dataclass(frozen=True)
class CorpusItem:
    """One corpus entry.

    Attributes:
        id: unique within a corpus (``"train-0-17"``: split, seed, index).
        family: the family that drew it (a key of ``FAMILIES``).
        ops: the op composition, in order.
        task_source: the KernelBench-format reference program.
        answer_source: an honest Triton ``ModelNew`` for it.
    """

    id: str
    family: str
    ops: tuple[str, ...]
    task_source: str
    answer_source: str

    @property
    def signature(self) -> str:
        """The op-composition key (see :func:`signature`)."""
        return signature(self.family, self.ops)


def kernelbench_task_ids(families: Sequence[str] = tuple(KERNELBENCH_LEVEL1)) -> list[str]:
    """The KernelBench level-1 task ids of ``families``, for ``kernelgym bench --tasks``.

    Example:
        >>> kernelbench_task_ids(["softmax"])
        ['level1/23_Softmax', 'level1/24_LogSoftmax']
    """
    return [f"level1/{stem}" for family in families for stem in KERNELBENCH_LEVEL1[family]]


def signature(family: str, ops: Sequence[str]) -> str:
    """The key of an op composition: shapes, constants and code style do not enter it.

    Example:
        >>> signature("elementwise", ("relu", "scale"))
        'elementwise:relu>scale'
    """
    return f"{family}:{'>'.join(ops)}"


def is_held_out(key: str) -> bool:
    """Whether the composition ``key`` is held out of training corpora.

    Example:
        >>> is_held_out("elementwise:relu"), is_held_out("softmax:scale>softmax")
        (True, False)
    """
    if key in _KERNELBENCH_SIGNATURES:
        return True
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10 < _HELD_OUT_TENTHS


def generate(n: int, seed: int = 0, split: str = "train", families: Sequence[str] = tuple(FAMILIES)) -> list[CorpusItem]:
    """``n`` items of ``split`` (``"train"`` or ``"held_out"``), families taken in turn; the same for the same arguments.

    Each item is drawn from its own ``random.Random`` keyed by split, seed and index,
    and drawn again (same key, next attempt) until its composition is in ``split``.

    Example:
        >>> [item.family for item in generate(3, seed=1)]
        ['elementwise', 'reduction', 'normalization']
        >>> generate(2, seed=1) == generate(2, seed=1)
        True
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; choose among {list(FAMILIES)}")
    items = []
    for index in range(n):
        family = families[index % len(families)]
        for attempt in range(10_000):
            rng = random.Random(f"{split}:{seed}:{index}:{attempt}")
            drawn = FAMILIES[family](rng)
            if is_held_out(signature(family, drawn.ops)) == (split == "held_out"):
                break
        else:  # pragma: no cover (every family has compositions on both sides)
            raise RuntimeError(f"family {family!r} drew no {split} composition")
        items.append(CorpusItem(f"{split}-{seed}-{index}", family, drawn.ops, drawn.task_source, drawn.answer_source))
    return items


def item_task(item: CorpusItem) -> Task:
    """The item's reference program as a task (suite ``corpus``)."""
    return Task(id=f"corpus/{item.id}", name=item.signature, level=0, problem_id=0, source=item.task_source,
                suite="corpus", solutions={"triton": item.answer_source})


def judge_items(items: Sequence[CorpusItem], verifier: Any) -> tuple[list[CorpusItem], Counter[str]]:
    """Judge every item's answer with ``verifier`` (anything with ``evaluate_many(pairs)``, on the ``triton`` backend).

    Returns:
        The items judged ``ok``, in order, and how many verdicts each status got.
    """
    results = verifier.evaluate_many([(item_task(item), item.answer_source) for item in items])
    statuses = Counter(result.status.value for result in results)
    return [item for item, result in zip(items, results, strict=True) if result.status.value == "ok"], statuses


def write_jsonl(items: Iterable[CorpusItem], path: str | Path) -> Path:
    """Write ``items`` to ``path``, one JSON object a line (parent folders made)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps({**dataclasses.asdict(item), "signature": item.signature}) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[CorpusItem]:
    """The items of a corpus file written by :func:`write_jsonl`."""
    items = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            items.append(CorpusItem(record["id"], record["family"], tuple(record["ops"]), record["task_source"],
                                    record["answer_source"]))
    return items


def write_suite(items: Sequence[CorpusItem], root: str | Path) -> list[str]:
    """Write ``items`` under ``root`` as a KernelBench tree (``level1/<n>_<name>.py``, answers under
    ``solutions/triton/``), which ``load_suite("kernelbench:<root>")`` reads; the task ids, in order."""
    root = Path(root)
    ids = []
    for number, item in enumerate(items, start=1):
        stem = f"{number}_{item.family}_{'_'.join(item.ops)}"
        for folder, text in ((root / "level1", item.task_source), (root / "solutions" / "triton" / "level1", item.answer_source)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{stem}.py").write_text(text, encoding="utf-8")
        ids.append(f"level1/{stem}")
    return ids


@dataclass
class CorpusOptions:
    """Options of ``python -m kernelgym.training.corpus``."""

    n: int = 200
    """items to generate before judging"""
    seed: int = 0
    """corpus seed"""
    split: str = "train"
    """train, or held_out (compositions never in a training corpus)"""
    out: str = "corpus/train.jsonl"
    """where the items judged ok go (JSON lines)"""
    workers: int = 2
    """verifier worker processes"""
    suite_dir: str = ""
    """also write the items judged ok here as a KernelBench tree ("": not)"""


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, judge on the ``triton`` backend, keep what is judged ``ok``; print the tally."""
    from kernelgym.executor import Verifier
    from kernelgym.options import parse_options
    from kernelgym.verifier import VerifierConfig

    options = parse_options(CorpusOptions, __doc__.splitlines()[0], argv)
    items = generate(options.n, options.seed, options.split)
    # Correctness is what the corpus needs; timing under the interpreter would mean nothing.
    with Verifier("triton", config=VerifierConfig(timing=False), num_workers=options.workers) as verifier:
        kept, statuses = judge_items(items, verifier)
    write_jsonl(kept, options.out)
    if options.suite_dir:
        write_suite(kept, options.suite_dir)
    print(f"kept {len(kept)} of {len(items)} ({dict(statuses)}) -> {options.out}")
    return 0 if kept else 1


if __name__ == "__main__":
    sys.exit(main())
