"""Answers that attack the build store, judged in one shared cache between honest answers, as a batch would."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kernelgym.backends.store import ExtensionStore, judge_dir
from kernelgym.tasks import load_suite
from kernelgym.verifier import Status

ROOT = Path(__file__).resolve().parents[1]


def _files(cache_dir: Path) -> dict[str, str]:
    """The hash of every file of the store and of the judge's directory (build locks and scratch builds aside)."""
    found = {}
    for folder in (cache_dir / "builds", judge_dir(cache_dir)):
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.endswith(".lock") and "scratch" not in path.parts:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.mark.extended
@pytest.mark.slow
def test_attacks_on_the_store_change_no_file_of_it_and_the_next_honest_answer_is_ok(cpu_verifier, cache_dir: Path) -> None:
    task = load_suite("cpu")["level1/1_ReLU"]
    honest = (ROOT / "legit" / "cpp" / "openmp_relu_views.py").read_text()
    assert cpu_verifier.evaluate(task, honest).status is Status.OK
    attacks = [("p34_store_write_logging.py", Status.INCORRECT), ("p34_ctypes_own_library.py", Status.ILLEGAL)]
    for name, expected in attacks * 2:  # the second time, the attack's own published library is there to attack
        before = _files(cache_dir)
        result = cpu_verifier.evaluate(task, (ROOT / "hacks" / "cpp" / name).read_text())
        assert result.status is expected, result.feedback
        after = _files(cache_dir)
        assert {path: digest for path, digest in after.items() if path in before} == before, name
        again = cpu_verifier.evaluate(task, honest)
        assert again.status is Status.OK, again.feedback
    store = ExtensionStore(cache_dir / "builds")
    assert all(store.verified(library) is not None for library in (cache_dir / "builds").glob("*/kg_*.so"))
