"""The judge's timing calibrated on itself: the reference as its own answer scores 1.00x.

The identity answer (the task's ``Model`` renamed ``ModelNew``, judged under the
``kernelbench`` preset, where PyTorch operators are allowed) computes exactly what
the reference computes, the same way. Any systematic gap between the two timings
is what the judge's harness costs the answer. With the Python guard on every call,
an identity answer scored 0.2x here; with the guards off the credited calls and the
reference timed in the worker beside each candidate call, 0.7-0.8x on the 2-core
machine; with the reference timed in a twin of the candidate's process, about 1.00x
(``docs/hacks.md``), single tasks still at 0.82x and 1.28x run after run until the
twin's warm-up went through the checked calls' modes as the candidate's process
does (``benchmarks/results/calibration.md``). Even then, inside the whole default
suite a single task went beyond 15% in three runs of five (1.31x, 1.19x), which
fits the two medians, taken apart, falling on either side of a change in the
shared host's pace. The reference's time is the candidate's times the median over
rounds of the two calls' ratio (``paired_ratio``), which such a change reaches
alike. The test holds the median within 5% (a guard or a harness cost that slips
back onto the credited path fails it) and every task within 15%.
"""

from __future__ import annotations

import statistics

import pytest

from kernelgym.agents.identity_agent import identity_answer
from kernelgym.verifier import Status, VerifierConfig


@pytest.mark.slow
def test_identity_answers_score_one(cache_dir, cpu_suite) -> None:
    from kernelgym import Verifier

    tasks = list(cpu_suite)
    config = VerifierConfig(rules="kernelbench", runs=300, warmup=3, check_variants=False)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        results = verifier.evaluate_many([(task, identity_answer(task.source)) for task in tasks])
    speedups = {}
    for task, result in zip(tasks, results, strict=True):
        assert result.status is Status.OK, (task.id, result.feedback)
        assert "timing-claim-rejected" not in result.flags, (task.id, result.feedback)
        assert "reference-timed-in-judge" not in result.flags, (task.id, result.feedback)
        speedups[task.id] = result.speedup_eager
    median = statistics.median(speedups.values())
    print(f"identity speedups: median {median:.3f}, range {min(speedups.values()):.3f}-{max(speedups.values()):.3f}")
    assert 0.95 <= median <= 1.05, speedups
    # Single tasks: within 15%. From bd50393 to the fix one task in a run read 0.67-1.43 on the 2-core machine: glibc
    # hands out free chunks of a size oldest first, so a process whose history left several chunks of a call's buffer
    # size cycled each call's buffers through all of them, and ran the same forward 25-45% slower than one that reused
    # one; both processes now reuse freed host memory most recently freed first (CandidateSide.cmd_reuse;
    # benchmarks/results/calibration.md, "Single tasks from bd50393").
    assert all(0.85 <= s <= 1.15 for s in speedups.values()), speedups
