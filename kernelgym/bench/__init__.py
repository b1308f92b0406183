"""The agent benchmark: run an agent over a suite, write run folders that resume, KernelBench metrics, plots.

Holds nothing itself, so that ``import kernelgym.bench`` stays light; the modules:
    runner: ``BenchConfig``, ``BenchSummary``, ``run_bench`` (the episode driver).
    runs: the run folder (``attempts.jsonl``, ``run.json``, ``summary.json``) and resuming.
    metrics: pass@k, fast_p, speedups, hack rate, per level and per turn.
    plots: the figures of a run (needs ``kernelgym[plots]``).
    cli: the ``kernelgym bench`` command line.
"""

from __future__ import annotations

__all__: list[str] = []
