"""The ``kernelgym`` command: ``eval``, ``tasks``, ``bench``, ``train``.

Holds:
    main: the entry point (``kernelgym = kernelgym.cli:main``).

``eval`` judges one candidate file against one task; ``tasks`` lists a suite;
``bench`` runs an agent over a suite (``kernelgym.bench``); ``train``
launches verl GRPO training on a GPU cluster (``kernelgym.training.launcher``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kernelgym.errors import KernelGymError
from kernelgym.executor.arguments import add_executor_arguments, executor_kwargs

__all__ = ["main"]


def _load_task(spec: str, suite: str):  # noqa: ANN202 (Task; imported lazily)
    from kernelgym.tasks import load_suite, load_task_file

    if spec.endswith(".py") or Path(spec).is_file():
        return load_task_file(spec)
    return load_suite(suite)[spec]


def _print_table(result_dict: dict[str, object]) -> None:
    rows = [
        ("status", result_dict["status"]),
        ("legal / compiled / correct", f"{result_dict['legal']} / {result_dict['compiled']} / {result_dict['correct']}"),
        ("speedup vs eager", result_dict["speedup_eager"]),
        ("speedup vs torch.compile", result_dict["speedup_compile"]),
        ("runtime ms (reference ms)", f"{result_dict['runtime_ms']} ({result_dict['ref_eager_ms']})"),
        ("score", result_dict["score"]),
        ("build cache hit", result_dict["cache_hit"]),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print()
    print(result_dict["feedback"])


def _eval(args: argparse.Namespace) -> int:
    from kernelgym.executor import Verifier
    from kernelgym.verifier import VerifierConfig

    task = _load_task(args.task, args.suite)
    text = Path(args.candidate).read_text(errors="replace") if args.candidate != "-" else sys.stdin.read()
    config = VerifierConfig(runs=args.runs, compile_baseline=args.compile_baseline, timing=not args.no_timing)
    with Verifier(backend=args.backend, config=config, **executor_kwargs(args)) as verifier:
        result = verifier.evaluate(task, text)
    if args.json:
        print(result.to_json())
    else:
        _print_table(result.to_dict())
    return 0 if result.ok else 1


def _tasks(args: argparse.Namespace) -> int:
    from kernelgym.tasks import load_suite

    suite = load_suite(args.suite)
    for task in suite:
        solutions = ",".join(sorted(task.solutions)) or "-"
        print(f"{task.id:<45} level {task.level}  variants {len(task.variants)}  solutions {solutions}")
    print(f"{len(suite)} tasks in suite {suite.name!r}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelgym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="judge one candidate program against one task")
    ev.add_argument("candidate", help="file with the candidate (an LLM response or bare code); '-' reads stdin")
    ev.add_argument("--task", required=True, help="a task file (KernelBench format) or a task id of --suite")
    ev.add_argument("--suite", default="cpu", help="suite for task ids: cpu, gpu, kernelbench:<dir-or-parquet>[:level]")
    ev.add_argument("--backend", default="cpp", help="cpp, cuda, triton or musa")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--runs", type=int, default=None, help="timed runs (default: the backend's, 20 on a CPU, 100 on a GPU)")
    ev.add_argument("--compile-baseline", action="store_true", help="also time torch.compile(Model)")
    ev.add_argument("--no-timing", action="store_true", help="skip the timing stage")
    add_executor_arguments(ev)
    ev.set_defaults(func=_eval)

    ts = sub.add_parser("tasks", help="list the tasks of a suite")
    ts.add_argument("--suite", default="cpu")
    ts.set_defaults(func=_tasks)

    try:
        from kernelgym.bench import add_bench_arguments, bench_main
    except ImportError:
        pass
    else:
        bench = sub.add_parser("bench", help="benchmark an agent on a suite (KernelBench metrics)")
        add_bench_arguments(bench)
        bench.set_defaults(func=bench_main)

    try:
        from kernelgym.training.launcher import add_train_arguments, train_main
    except ImportError:
        pass
    else:
        train = sub.add_parser("train", help="launch verl GRPO training (GPU cluster; needs kernelgym[verl])")
        add_train_arguments(train)
        train.set_defaults(func=train_main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KernelGymError as exc:
        print(f"kernelgym: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelgym: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
