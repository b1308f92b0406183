"""The agent benchmark: run an agent over a suite, write run folders that resume, KernelBench metrics, plots.

Holds (re-exported from its modules):
    BenchConfig, BenchSummary (``config``): a run's settings and its summary.
    run_bench (``runner``): run (or resume) a benchmark, one agent call and one verifier batch per turn.
    BenchPlan, plan_bench (``runner``): the tasks a run would judge and those it skips (``--dry-run``).
    ATTEMPTS_FILE, SUMMARY_FILE, RUN_FILE, PLOT_FILES, read_attempts (``runs``): the run folder.
    write_plots (``plots``): the figures of a run (needs ``kernelgym[plots]``).
    add_bench_arguments, bench_main (``cli``): the ``kernelgym bench`` command line.
The metrics (pass@k, fast_p, speedups, hack rate) are in ``kernelgym.bench.metrics``.
"""

from __future__ import annotations

from kernelgym.bench.cli import add_bench_arguments, bench_main
from kernelgym.bench.config import BenchConfig, BenchSummary
from kernelgym.bench.plots import write_plots
from kernelgym.bench.runner import BenchPlan, plan_bench, run_bench
from kernelgym.bench.runs import ATTEMPTS_FILE, PLOT_FILES, RUN_FILE, SUMMARY_FILE, read_attempts

__all__ = [
    "ATTEMPTS_FILE",
    "PLOT_FILES",
    "RUN_FILE",
    "SUMMARY_FILE",
    "BenchConfig",
    "BenchPlan",
    "BenchSummary",
    "add_bench_arguments",
    "bench_main",
    "plan_bench",
    "read_attempts",
    "run_bench",
    "write_plots",
]
