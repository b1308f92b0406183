"""What ``process-state-changed`` compares: affinity, signal handlers and limits, not the number of threads."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from kernelgym.backends import get_backend
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.harness import Harness, Progress, Verdict

AFTER_LOADING = {"threads": "1", "sigcgt": "00000000000004ea", "sigign": "0000000001001000", "sigblk": "0000000000000000",
                 "affinity": [0], "RLIMIT_AS": [1 << 34, 1 << 34]}


class ReadCandidate:
    """A candidate whose process state is whatever the test last set (no process, no mapped libraries)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.state = dict(AFTER_LOADING)

    def libraries(self) -> list[str]:
        return []

    def process_state(self) -> dict[str, Any]:
        return dict(self.state)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    job = types.SimpleNamespace(config=VerifierConfig(), seeds=[7], strict_rejection=None)
    h = Harness(job, get_backend("cpp"), ReadCandidate(tmp_path), tmp_path, tmp_path, lambda *_: None, Progress())
    h.baseline = h.candidate.process_state()
    return h


def test_an_openmp_pool_that_grew_or_shrank_is_no_change(harness: Harness) -> None:
    # An 8-thread team's first call: seven pool threads, and glibc's SIGSETXID handler (signal 33) with them.
    harness.candidate.state.update(threads="8", sigcgt="00000001000004ea")
    harness.check_process("during the correctness trials")
    harness.candidate.state.update(threads="1")  # a smaller team later: the pool's surplus threads exit
    harness.check_process("while being timed")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sigcgt", "00000000000006ea"),  # a handler for SIGUSR1
        ("sigign", "0000000001001002"),  # SIGINT ignored
        ("affinity", [0, 1]),
        ("RLIMIT_AS", [1 << 40, 1 << 40]),
    ],
)
def test_handlers_affinity_and_limits_stay_strict(harness: Harness, key: str, value: Any) -> None:
    harness.candidate.state.update({key: value, "threads": "4"})
    with pytest.raises(Verdict) as verdict:
        harness.check_process("while being timed")
    assert verdict.value.status is Status.ILLEGAL
    assert [v.rule for v in verdict.value.violations] == ["process-state-changed"]
    assert key in verdict.value.violations[0].message and "threads" not in verdict.value.violations[0].message
