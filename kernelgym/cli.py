"""The kernelgym command line: ``eval``, ``tasks``, ``bench``, ``train``, ``prepare``, ``cache`` and ``serve``.

Holds:
    main: the entry point (``kernelgym = kernelgym.cli:main``).
    EXIT_CODES: what each exit status means (printed by ``kernelgym --help``).

``eval`` judges one answer against one task, or a folder / JSONL file of many
answers in one batch (``kernelgym.bench.generations``); ``tasks`` lists a suite;
``bench`` runs an agent over a suite (``kernelgym.bench``); ``train``
launches verl GRPO training (``kernelgym.training.launcher``); ``prepare`` does the
one-time builds ahead (``kernelgym.executor.prepare``); ``cache`` shows or
trims the build cache (``kernelgym.backends.cache``); ``serve`` keeps a warm judge
behind an HTTP API (``kernelgym.serve``). A mistake the user can
fix ends in one line, ``kernelgym: error: ...``, and exit status 2. SIGTERM and
SIGHUP end a command as Ctrl-C does: its workers, and every build they started, are
stopped before it exits.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from kernelgym.errors import KernelGymError
from kernelgym.executor.arguments import add_executor_arguments, executor_kwargs
from kernelgym.verifier.config import WEIGHTS
from kernelgym.verifier.presets import PRESETS

__all__ = ["EXIT_CODES", "main"]

EXIT_CODES = (
    (0, "success; for `eval` of one answer: the answer is ok"),
    (1, "`eval` of one answer: it was judged and is not ok (its status says why)"),
    (2, "a usage or input error (one line on stderr says what to do)"),
    (3, "`eval` of one answer: the judge itself failed (status judge_error); says nothing about the answer, try again"),
    (130, "interrupted (Ctrl-C, SIGTERM, SIGHUP); `bench` and `eval` of many answers continue with --resume"),
    (141, "the program reading the output stopped early (e.g. `| head`)"),
)

_DESCRIPTION = """\
kernelgym judges kernel programs the way a strict reviewer would: a ModelNew that
replaces a PyTorch reference Model with native kernels (C++, CUDA, Triton, MUSA)
is parsed, checked for fallbacks and hacks, built, compared with the reference on
random inputs, and timed. Run `kernelgym COMMAND --help` for the options of one command."""


_EVAL_DESCRIPTION = """\
Judge one answer against one task: ANSWER is a file (an LLM response or bare
code) or '-' for stdin, and --task names the task.

Judge many answers in one batch: ANSWER is then
  - a folder in KernelBench's generations layout,
    level_<L>_problem_<P>_sample_<S>_kernel.py (other files are ignored),
  - a folder of answers named after their tasks (1_ReLU.py, level1/1_ReLU.py), or
  - a .jsonl file of {"task_id": ..., "answer": ...} records ("sample" optional).
They are judged in parallel with a progress bar; --out gets attempts.jsonl,
summary.json (the metrics of `kernelgym bench`) and plots, and --resume skips
the answers already judged."""


def _exit_code_text() -> str:
    return "exit status:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: ``kernelgym: error: ...``."""

    def error(self, message: str) -> NoReturn:
        """Print the mistake and where to read the options; exit 2."""
        self.exit(2, f"kernelgym: error: {message}; see `{self.prog} --help`\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _load_task(spec: str, suite: str):  # noqa: ANN202 (Task; imported lazily)
    from kernelgym.tasks import load_suite, load_task_file

    if spec.endswith(".py") or Path(spec).is_file():
        return load_task_file(spec)
    return load_suite(suite)[spec]


def _read_answer(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    answer = Path(path)
    if not answer.exists():
        raise KernelGymError(f"answer file {path!r} does not exist; give the file that holds the answer, or '-' for stdin")
    try:
        return answer.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise KernelGymError(f"cannot read answer file {path!r}: {exc.strerror or exc}") from None


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}" if abs(value) < 1 else f"{value:.{digits}f}"


def _print_table(result: dict[str, object]) -> None:
    runtime, reference = result["runtime_ms"], result["ref_eager_ms"]
    rows = [("status", result["status"])]
    if result["status"] == "judge_error":
        # the feedback of a judge error is a fixed sentence for the model; the person at the terminal needs the cause
        rows.append(("judge's reason", " ".join(str(result["judge_reason"]).split()) or "none given"))
    rows += [
        ("legal / compiled / correct", f"{result['legal']} / {result['compiled']} / {result['correct']}"),
        ("speedup vs eager", _number(result["speedup_eager"])),
        ("speedup vs torch.compile", _number(result["speedup_compile"])),
        ("runtime ms (reference ms)", f"{_number(runtime)} ({_number(reference)})"),
        ("score", _number(result["score"])),
        ("build cache hit", result["cache_hit"]),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print()
    print(result["feedback"])


def _eval(args: argparse.Namespace) -> int:
    from kernelgym.tasks import default_backend

    answers = Path(args.answer)
    if args.answer != "-" and (answers.is_dir() or answers.suffix == ".jsonl"):
        return _eval_many(args)
    if args.task is None:
        raise KernelGymError(
            "--task is required to judge one answer (a task id of --suite or a task file); "
            "to judge many answers, give a folder or a .jsonl file instead"
        )
    task = _load_task(args.task, args.suite)
    text = _read_answer(args.answer)
    from kernelgym.executor import Verifier
    from kernelgym.verifier import VerifierConfig

    config = VerifierConfig(runs=args.runs, compile_baseline=args.compile_baseline, timing=not args.no_timing, rules=args.rules,
                            weights=args.weights)
    backend = args.backend or default_backend(args.suite)
    with Verifier(backend=backend, config=config, **executor_kwargs(args)) as verifier:
        result = verifier.evaluate(task, text)
    if args.json:
        print(result.to_json())
    else:
        _print_table(result.to_dict())
    return 0 if result.ok else 3 if result.judge_error else 1


def _eval_many(args: argparse.Namespace) -> int:
    import json
    import re

    from kernelgym.bench import BenchConfig
    from kernelgym.bench.cli import run_options
    from kernelgym.bench.generations import judge_answers
    from kernelgym.verifier import VerifierConfig

    if args.task is not None:
        raise KernelGymError(
            f"{args.answer} is judged as many answers, each naming its own task (by file name or task_id); "
            "drop --task, or give one answer file"
        )
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(args.answer).resolve().name) or "answers"
    config = BenchConfig(
        suite=args.suite,
        out_dir=args.out or str(Path("runs") / "eval" / name),
        verifier=VerifierConfig(runs=args.runs, compile_baseline=args.compile_baseline, timing=not args.no_timing,
                                rules=args.rules, weights=args.weights),
        progress=not args.quiet,
        **run_options(args),
    )
    summary = judge_answers(args.answer, config)
    if args.json:
        print(json.dumps(summary.to_dict()))
    else:
        print(summary.report())
        print(f"wrote {', '.join(summary.files)} to {summary.out_dir}")
    return 0


def _tasks(args: argparse.Namespace) -> int:
    from kernelgym.tasks import load_suite

    suite = load_suite(args.suite)
    for task in suite:
        solutions = ",".join(sorted(task.solutions)) or "-"
        print(f"{task.id:<45} level {task.level}  variants {len(task.variants)}  solutions {solutions}")
    print(f"{len(suite)} tasks in suite {suite.name!r}")
    return 0


def _cache(args: argparse.Namespace) -> int:
    from kernelgym.backends.cache import BuildCache

    cache = BuildCache(args.cache_dir, max_bytes=None if args.max_gb is None else int(args.max_gb * 1e9))
    if args.action == "info":
        print(cache.info().report())
        return 0
    removed = cache.clean(everything=args.all, min_idle_seconds=args.min_idle_minutes * 60)
    print(removed.report())
    return 0


def _add_eval(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "eval",
        help="judge one answer against one task, or many answers in one batch",
        description=_EVAL_DESCRIPTION,
        epilog=_exit_code_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument("answer", metavar="ANSWER",
                    help="an answer file (an LLM response or bare code), '-' for stdin, a folder or a .jsonl file")
    ev.add_argument("--task", default=None,
                    help="for one answer: a task id of --suite (e.g. level1/1_ReLU) or a task file")
    ev.add_argument("--suite", default="cpu", help="suite of the task ids: cpu, gpu or kernelbench:<dir-or-parquet>[:level] (default: cpu)")
    ev.add_argument("--backend", default=None,
                    help="cpp, cuda, triton or musa (default: the suite's: cpp for cpu, cuda for the others)")
    ev.add_argument("--json", action="store_true", help="print one JSON object (the result, or the summary of many)")
    ev.add_argument("--runs", type=_positive_int, default=None,
                    help="timed calls (default: the backend's: 20 on a CPU, up to 100 on a GPU); a quarter of them run "
                    "under the guards' watch and are not credited, so a verdict reports the others (15 of 20)")
    ev.add_argument("--compile-baseline", action="store_true", help="also time torch.compile(Model)")
    ev.add_argument("--no-timing", action="store_true", help="skip the timing stage")
    ev.add_argument("--rules", choices=sorted(PRESETS), default="native",
                    help="rule preset: native (no PyTorch/ATen compute in ModelNew) or kernelbench (PyTorch ops allowed "
                    "as KernelBench allows them; every hack defense on) (default: native)")
    ev.add_argument("--weights", choices=WEIGHTS, default="redrawn",
                    help="weights contract: redrawn (one trial redraws the weights: the answer must compute from its parameters), "
                    "fixed (the reference's weights copied in at construction, never changed) or seeded (KernelBench's: "
                    "ModelNew's own weights from the reference's seed, nothing copied) (default: redrawn)")
    add_executor_arguments(ev)
    many = ev.add_argument_group("many answers")
    many.add_argument("--out", default=None, help="run folder (default: runs/eval/<name of ANSWER>)")
    many.add_argument("--resume", action="store_true", help="continue the run in --out; answers already judged are kept")
    many.add_argument("--overwrite", action="store_true", help="delete the run in --out and start again")
    many.add_argument("--batch-size", type=_positive_int, default=16, help="answers handed to the judge at once (default: 16)")
    many.add_argument("--no-plots", action="store_true", help="do not write the figures")
    many.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=_eval)


def _serve(args: argparse.Namespace) -> int:
    from kernelgym.executor.remote import TOKEN_ENV
    from kernelgym.serve import JudgeService, check_exposure, serve_forever

    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    options = {"ray_address": args.ray_address} if args.executor == "ray" and args.ray_address else {}
    if args.judges_per_device is not None:
        options["judges_per_device"] = args.judges_per_device
    token = args.token or os.environ.get(TOKEN_ENV) or None
    check_exposure(args.host, token)  # before any worker starts
    service = JudgeService(backends, executor=args.executor, num_workers=args.workers, cache_dir=args.cache_dir,
                           queue_size=args.queue_size, suites=args.suite or (), **options)
    try:
        if not args.no_warm_up:
            print(f"kernelgym serve: warming up the {', '.join(backends)} workers (one-time builds included)", file=sys.stderr)
            service.warm_up()
        auth = "bearer token required" if token else "no token: loopback only"
        print(f"kernelgym serve: judging {', '.join(backends)} on http://{args.host}:{args.port} ({auth})", file=sys.stderr)
        serve_forever(service, args.host, args.port, token)
    finally:
        service.close()
    return 0


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from kernelgym.executor.remote import TOKEN_ENV

    serve = sub.add_parser(
        "serve", help="keep a warm judge behind an HTTP API (needs kernelgym[serve])",
        description="Serve a long-lived judge over HTTP: warm workers per backend, a bounded queue, "
        "results by id, health and metrics (API: docs/serve.md). Clients: `--server URL` of `eval` and `bench`, "
        "or Verifier(executor='remote', url=...).",
    )
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all, which needs --token)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument("--backend", default="cpp", help="backends to judge, comma-separated, e.g. cuda,triton (default: cpp)")
    serve.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local workers, or the Ray pool of a cluster (default: local)")
    serve.add_argument("--ray-address", default=None, help="Ray cluster address for --executor ray (default: $RAY_ADDRESS or a local Ray)")
    serve.add_argument("--workers", type=int, default=None, help="judge workers per backend (default: the executor's)")
    serve.add_argument("--judges-per-device", type=int, default=None, metavar="K",
                       help="local executor: K judges per GPU, checking side by side and each timing alone (default: 1)")
    serve.add_argument("--cache-dir", default=None, help="build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    serve.add_argument("--queue-size", type=int, default=64,
                       help="answers that may wait beyond those being judged; more get HTTP 429 (default: 64)")
    serve.add_argument("--token", default=None,
                       help=f"bearer token clients must send (default: ${TOKEN_ENV}; required beyond loopback)")
    serve.add_argument("--suite", action="append", default=None,
                       help="a suite whose tasks clients may name, beside the bundled ones (repeat for more), e.g. "
                       "kernelbench:/data/KernelBench; a task sent as source that is none of the served ones runs "
                       "only sandboxed, like an answer")
    serve.add_argument("--no-warm-up", action="store_true", help="do not judge a bundled answer per backend at start")
    serve.set_defaults(func=_serve)


def _prepare(args: argparse.Namespace) -> int:
    from kernelgym.backends import get_backend
    from kernelgym.backends.cache import default_cache_dir
    from kernelgym.executor.prepare import prepare

    get_backend(args.backend)  # an unknown name: one line and exit status 2
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    print(f"kernelgym prepare: one-time builds of the {args.backend} backend in {cache_dir}", file=sys.stderr)
    failed = prepare(args.backend, cache_dir, lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    return 1 if failed else 0


def _add_prepare(sub: argparse._SubParsersAction) -> None:
    prepare = sub.add_parser(
        "prepare", help="do the one-time builds ahead (precompiled header, ATen observer, symbol floor)",
        description="Do a backend's one-time builds now, side by side, saying what is built and how long it takes: "
        "the precompiled torch/extension.h, the ATen observer and the toolchain floor of the symbol check. "
        "They are kept in the build cache, once per machine and toolchain; without them the first judgement "
        "builds them (minutes on a fresh machine) and later workers start in seconds. Exit status 1 when one "
        "could not be built (workers then do without it, as they would at their start).",
    )
    prepare.add_argument("--backend", default="cpp", help="cpp, cuda, triton or musa (default: cpp)")
    prepare.add_argument("--cache-dir", default=None, help="build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    prepare.set_defaults(func=_prepare)


def _add_cache(sub: argparse._SubParsersAction) -> None:
    from kernelgym.backends.cache import DEFAULT_MAX_GB, MAX_GB_ENV

    cache = sub.add_parser(
        "cache",
        help="show or trim the build cache",
        description="Show the build cache (`info`) or trim it (`clean`): clean removes the least recently used "
        f"builds until the cache fits its cap (${MAX_GB_ENV}, default {DEFAULT_MAX_GB:g} GB), or every build "
        "with --all. A build in use by a running judge is never removed.",
    )
    cache.add_argument("action", choices=("info", "clean"), help="info: sizes and entries; clean: remove builds")
    cache.add_argument("--cache-dir", default=None, help="build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")
    cache.add_argument("--max-gb", type=float, default=None, help=f"size cap in GB (default: ${MAX_GB_ENV} or {DEFAULT_MAX_GB:g})")
    cache.add_argument("--all", action="store_true", help="clean: remove every build not in use, not only the oldest")
    cache.add_argument("--min-idle-minutes", type=float, default=10.0,
                       help="clean: keep builds used less than this long ago (default: 10)")
    cache.set_defaults(func=_cache)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; ``bench`` and ``train`` get their options (and their imports: agents, environments,
    Gymnasium) only when ``command`` names them, so every other command starts without them."""
    parser = _Parser(
        prog="kernelgym", description=_DESCRIPTION, epilog=_exit_code_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    _add_eval(sub)

    ts = sub.add_parser("tasks", help="list the tasks of a suite", description="List the tasks of a suite.")
    ts.add_argument("--suite", default="cpu", help="cpu, gpu or kernelbench:<dir-or-parquet>[:level] (default: cpu)")
    ts.set_defaults(func=_tasks)

    bench = sub.add_parser(
        "bench", help="run an agent over a suite (KernelBench metrics)", epilog=_exit_code_text(),
        description="Run an agent over a suite, k samples per task, up to --turns attempts each; write "
        "attempts.jsonl, summary.json and plots into --out.", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if command == "bench":
        from kernelgym.bench import add_bench_arguments, bench_main

        add_bench_arguments(bench)
        bench.set_defaults(func=bench_main)

    train = sub.add_parser(
        "train", help="launch verl GRPO training (GPU cluster; needs kernelgym[verl])",
        description="Write the data files and the agent loop config, then run verl's GRPO trainer "
        "(--dry-run: print the command instead; needs no verl).",
    )
    if command == "train":
        from kernelgym.training.launcher import add_train_arguments, train_main

        add_train_arguments(train)
        train.set_defaults(func=train_main)
    _add_prepare(sub)
    _add_cache(sub)
    _add_serve(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KernelGymError as exc:
        print(f"kernelgym: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelgym: interrupted", file=sys.stderr)
        return 130


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see :data:`EXIT_CODES`).

    SIGTERM and SIGHUP are handled as Ctrl-C: the command unwinds, so its verifier stops its workers
    (each in its own session, builds included) instead of leaving them to finish without it.
    """
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        code = _run(_parser(argv[0] if argv else None).parse_args(argv))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (e.g. `head`) is gone: stop quietly, and keep Python from complaining again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
