"""Attacks on the candidate's confinement, each judged in one shared cache with an honest answer right after it.

The samples (``tests/hacks/cpp/p34_*``) use raw system calls that no static rule or
symbol check sees; each computes the right outputs only if its attack worked, so
``incorrect`` says it was refused. The honest answer after each must still be
``ok``: the judge survived and nothing the attack left behind changed it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.verifier import Status, VerifierConfig
from tests.hacks.samples import built_ahead  # noqa: F401 (read by answers_built_ahead, tests/conftest.py)

pytestmark = pytest.mark.slow

HACKS = Path(__file__).resolve().parent / "cpp"
HONEST = Path(__file__).resolve().parents[2] / "kernelgym" / "tasks" / "suites" / "cpu" / "solutions" / "cpp" / "level1" / "1_ReLU.py"
ATTACKS = ("p35_raw_setpriority", "p35_raw_affinity", "p35_planted_buffer_symlink", "p35_truncate_shared_buffer", "p35_flock_judge_lock")


@pytest.fixture(scope="module")
def verifier(cache_dir: Path):
    made = Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=VerifierConfig(runs=3, warmup=1))
    yield made
    made.close()


@pytest.mark.parametrize("sample", [pytest.param(a, marks=() if a in ("p35_raw_setpriority", "p35_flock_judge_lock") else pytest.mark.extended)
                                    for a in ATTACKS])
def test_the_attack_is_refused_and_the_next_honest_answer_is_ok(verifier: Verifier, sample: str) -> None:
    from kernelgym.tasks import load_suite

    task = load_suite("cpu")["level1/1_ReLU"]
    attack = verifier.evaluate(task, (HACKS / f"{sample}.py").read_text())
    assert attack.status is Status.INCORRECT and "[wrong-output]" in attack.feedback, attack.feedback
    honest = verifier.evaluate(task, HONEST.read_text())
    assert honest.status is Status.OK, honest.feedback
