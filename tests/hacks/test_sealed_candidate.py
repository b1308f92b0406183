"""Attacks on the candidate's confinement, each judged in one shared cache with an honest answer right after it.

The samples (``tests/hacks/cpp/p35_*``, ``p42_*``) use raw system calls that no static rule or
symbol check sees; each computes the right outputs only if its attack worked, so
``incorrect`` says it was refused. The honest answer after each must still be
``ok``: the judge survived and nothing the attack left behind changed it. The ``p42``
tests also check what the attack would have carried out: no secret in the result,
no datagram received, no process left.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import time
from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.backends.store import judge_dir
from kernelgym.verifier import EvalResult, Status, VerifierConfig
from tests.hacks.samples import built_ahead  # noqa: F401 (read by answers_built_ahead, tests/conftest.py)

from ..processes import left_behind

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


def _judge(verifier: Verifier, sample: str) -> EvalResult:
    """The sample's verdict (refused: ``incorrect``, wrong outputs), after which an honest answer is still ``ok``."""
    from kernelgym.tasks import load_suite

    task = load_suite("cpu")["level1/1_ReLU"]
    attack = verifier.evaluate(task, (HACKS / f"{sample}.py").read_text())
    assert attack.status is Status.INCORRECT and "[wrong-output]" in attack.feedback, attack.feedback
    honest = verifier.evaluate(task, HONEST.read_text())
    assert honest.status is Status.OK, honest.feedback
    return attack


@pytest.mark.parametrize("sample", ["p42_read_judge_files"])
def test_files_outside_the_candidates_reach_never_reach_the_result(verifier: Verifier, cache_dir: Path, sample: str) -> None:
    token = secrets.token_hex(16)
    planted = judge_dir(cache_dir) / f"planted-{token}.txt"  # the sample lists the judge's directory and reads its files
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"the judge's secret {token}")
    try:
        attack = _judge(verifier, sample)
    finally:
        planted.unlink()
    text = repr(dataclasses.asdict(attack))
    shadow = Path("/etc/shadow").read_text().splitlines()[:1] if os.access("/etc/shadow", os.R_OK) else []
    assert token not in text and not [line for line in shadow if line and line in text]


@pytest.mark.extended
@pytest.mark.parametrize("sample", ["p42_udp_datagram"])
def test_a_datagram_never_leaves_the_candidate(verifier: Verifier, sample: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        try:
            listener.bind(("127.0.0.1", 47281))  # where the sample sends
        except OSError:
            pytest.skip("the sample's port is taken on this machine")
        _judge(verifier, sample)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # a datagram sent on the loopback is queued before sendto returns
            listener.recv(100)


@pytest.mark.parametrize("sample", ["p42_detached_child"])
def test_no_process_of_the_candidate_outlives_its_job(verifier: Verifier, sample: str) -> None:
    _judge(verifier, sample)
    # Killed before the verdict was sent; a process sent SIGKILL may take a moment to exit (bounded wait).
    deadline = time.monotonic() + 30
    while left_behind("kg-p42-orphan") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_behind("kg-p42-orphan") == []
