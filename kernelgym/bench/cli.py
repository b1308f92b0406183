"""The ``kernelgym bench`` command line.

Holds:
    add_bench_arguments: add the ``kernelgym bench`` options to a parser.
    bench_main: run ``kernelgym bench`` from parsed options; print the summary.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from kernelgym.agents.base import BaseAgent, make_agent
from kernelgym.bench.config import BenchConfig
from kernelgym.bench.runner import plan_bench, run_bench
from kernelgym.errors import KernelGymError
from kernelgym.executor.arguments import add_executor_arguments, executor_name
from kernelgym.verifier.config import WEIGHTS, VerifierConfig
from kernelgym.verifier.presets import PRESETS

__all__ = ["add_bench_arguments", "bench_main"]


def _option_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.replace("-", "_"), json.loads(raw)
    except json.JSONDecodeError:
        return key.replace("-", "_"), raw


def add_bench_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``kernelgym bench`` options to ``parser`` (run it with :func:`bench_main`).

    Example:
        >>> parser = add_bench_arguments(argparse.ArgumentParser(prog="kernelgym bench"))
        >>> args = parser.parse_args(["--suite", "cpu", "--agent", "solutions", "-k", "2", "--limit", "3"])
        >>> args.k, args.limit, args.turns
        (2, 3, 1)
    """
    run = parser.add_argument_group("run")
    run.add_argument("--suite", default="cpu", help="cpu | gpu | kernelbench:<dir-or-parquet>[:level] (default: cpu)")
    run.add_argument("--agent", default="solutions",
                     help="solutions | random | openai | hf | kernel-lm | module:Class | file.py:Class (default: solutions)")
    run.add_argument("-k", "--k", type=int, default=1, help="samples per task (default: 1)")
    run.add_argument("--turns", type=int, default=1, help="attempts per episode (default: 1)")
    run.add_argument("--out", default=None, help="run folder (default: runs/bench/<suite>-<agent>)")
    run.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    run.add_argument("--level", type=int, default=None, help="only the tasks of this level")
    run.add_argument("--tasks", default="", help="only these task ids, comma-separated")
    run.add_argument("--resume", action="store_true", help="continue the run in --out without redoing finished attempts")
    run.add_argument("--overwrite", action="store_true", help="delete the run in --out and start again")
    run.add_argument("--seed", type=int, default=0, help="run seed (default: 0)")
    run.add_argument("--batch-size", type=int, default=32, help="episodes advanced together (default: 32)")
    run.add_argument("--success-speedup", type=float, default=1.0,
                     help="end an episode at a correct answer this fast; 0: at any correct answer (default: 1.0)")
    run.add_argument("--no-plots", action="store_true", help="do not write the figures")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--dry-run", action="store_true",
                     help="list the tasks the run would ask the agent for and those it would skip, and why; "
                     "judge nothing, write nothing")

    judge = parser.add_argument_group("judge")
    judge.add_argument("--backend", default=None, help="cpp | cuda | triton | musa (default: cpp for cpu, else cuda)")
    add_executor_arguments(judge)
    defaults = VerifierConfig()
    judge.add_argument("--trials", type=int, default=defaults.trials, help=f"correctness trials (default: {defaults.trials})")
    judge.add_argument("--warmup", type=int, default=defaults.warmup, help=f"untimed calls (default: {defaults.warmup})")
    judge.add_argument("--runs", type=int, default=defaults.runs,
                       help="timed calls (default: the backend's: 20 on a CPU, up to 100 on a GPU); a quarter of them "
                       "run under the guards' watch and are not credited, so a verdict reports the others (15 of 20)")
    judge.add_argument("--no-timing", action="store_true", help="skip timing (speedup metrics become 0)")
    judge.add_argument("--compile-baseline", action="store_true", help="also time torch.compile (faster vs compile)")
    judge.add_argument("--rules", choices=sorted(PRESETS), default=defaults.rules,
                       help="rule preset: native (no PyTorch/ATen compute in ModelNew) or kernelbench (PyTorch ops "
                       f"allowed as KernelBench allows them; every hack defense on) (default: {defaults.rules})")
    judge.add_argument("--weights", choices=WEIGHTS, default=defaults.weights,
                       help="weights contract: redrawn (one trial redraws the weights: answers must compute from their "
                       "parameters), fixed (the reference's weights copied in at construction, never changed) or seeded "
                       f"(KernelBench's: ModelNew's own weights from the reference's seed) (default: {defaults.weights})")
    judge.add_argument("--faster-threshold", type=float, default=defaults.faster_threshold,
                       help=f"speedup above which an answer is faster (default: {defaults.faster_threshold})")

    agent = parser.add_argument_group("agent options (only those given are passed to the agent)")
    agent.add_argument("--base-url", default=None, help="openai: API root, e.g. http://127.0.0.1:8000/v1")
    agent.add_argument("--model", default=None,
                       help="openai: model name; hf: model directory; kernel-lm: checkpoint directory")
    agent.add_argument("--api-key-env", default=None, help="openai: environment variable holding the API key")
    agent.add_argument("--temperature", type=float, default=None, help="openai/hf: sampling temperature")
    agent.add_argument("--top-p", type=float, default=None, help="openai/hf: nucleus sampling mass")
    agent.add_argument("--max-tokens", type=int, default=None, help="openai/hf: most tokens per answer")
    agent.add_argument("--concurrency", type=int, default=None, help="openai: requests in flight")
    agent.add_argument("--agent-option", action="append", type=_option_value, default=[], metavar="KEY=VALUE",
                       help="any other agent option (VALUE parsed as JSON when it can be); repeatable")
    return parser


_AGENT_FLAGS = ("base_url", "model", "api_key_env", "temperature", "top_p", "max_tokens", "concurrency")


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`BenchConfig` fields that every judging command's options set alike (run folder, backend, executor)."""
    return {
        "resume": args.resume, "overwrite": args.overwrite, "backend": args.backend, "executor": executor_name(args),
        "ray_address": args.ray_address, "server": args.server, "num_workers": args.workers,
        "judges_per_device": args.judges_per_device, "cache_dir": args.cache_dir,
        "batch_size": args.batch_size, "plots": not args.no_plots,
    }


def _config_from_args(args: argparse.Namespace) -> BenchConfig:
    options = {name: getattr(args, name) for name in _AGENT_FLAGS if getattr(args, name) is not None}
    options.update(dict(args.agent_option))
    out = args.out or str(Path("runs") / "bench" / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{args.suite}-{args.agent}"))
    verifier = VerifierConfig(
        trials=args.trials,
        warmup=args.warmup,
        runs=args.runs,
        timing=not args.no_timing,
        compile_baseline=args.compile_baseline,
        faster_threshold=args.faster_threshold,
        rules=args.rules,
        weights=args.weights,
    )
    return BenchConfig(
        suite=args.suite,
        agent=args.agent,
        agent_options=options,
        k=args.k,
        turns=args.turns,
        out_dir=out,
        limit=args.limit,
        level=args.level,
        task_ids=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
        verifier=verifier,
        success_speedup=args.success_speedup,
        seed=args.seed,
        **run_options(args),
        progress=not args.quiet,
    )


def bench_main(args: argparse.Namespace) -> int:
    """Run ``kernelgym bench`` from parsed :func:`add_bench_arguments` options; print the summary.

    Returns:
        0 on success, 2 on a user error (printed to stderr), 130 when interrupted.
    """
    try:
        config = _config_from_args(args)
        if args.dry_run:
            agent = make_agent(config.agent, **config.agent_options)
            try:
                print(plan_bench(config, agent).report(agent.name, config.k))
            finally:
                if isinstance(agent, BaseAgent):
                    agent.close()
            return 0
        summary = run_bench(config)
    except (KernelGymError, ValueError) as exc:
        print(f"kernelgym: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nkernelgym: interrupted; rerun the same command with --resume to continue", file=sys.stderr)
        return 130
    print(summary.report())
    print(f"wrote {', '.join(summary.files)} to {summary.out_dir}")
    return 0
