"""The command-line options that choose an executor, shared by every ``kernelgym`` command that judges.

Holds:
    add_executor_arguments: add ``--executor``, ``--ray-address``, ``--server``, ``--workers``, ``--judges-per-device``,
        ``--cache-dir``.
    executor_kwargs: the Verifier keyword arguments those options stand for.
    executor_name: the executor those options choose.
"""

from __future__ import annotations

import argparse
from typing import Any

from kernelgym.executor.registry import executor_names

__all__ = ["add_executor_arguments", "executor_kwargs", "executor_name"]


def add_executor_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add the executor options to ``parser`` (or to an argument group).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_executor_arguments(parser)
        >>> executor_kwargs(parser.parse_args(["--workers", "2"]))
        {'executor': 'local', 'num_workers': 2, 'cache_dir': None}
    """
    parser.add_argument("--executor", choices=executor_names(), default="local",
                        help="where candidates are judged (default: local)")
    parser.add_argument("--ray-address", default=None,
                        help="Ray cluster address for --executor ray (default: $RAY_ADDRESS or a local Ray)")
    parser.add_argument("--server", default=None, metavar="URL",
                        help="judge on a `kernelgym serve` server (implies --executor remote; its token from "
                        "$KERNELGYM_SERVE_TOKEN)")
    parser.add_argument("--workers", type=int, default=None, help="parallel judge workers (default: the executor's)")
    parser.add_argument("--judges-per-device", type=int, default=None, metavar="K",
                        help="local executor: K judges per GPU, checking side by side and each timing alone (default: 1)")
    parser.add_argument("--cache-dir", default=None, help="build cache (default: $KERNELGYM_CACHE or ~/.cache/kernelgym)")


def executor_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Verifier keyword arguments (``executor``, ``num_workers``, ``cache_dir``, ``ray_address``, ``url``,
    ``judges_per_device``) for parsed options.

    ``ray_address`` is passed only to the Ray executor, and only when given; ``judges_per_device`` only when given
    (the local executor's option); ``--server`` chooses the remote executor and gives it its ``url``.
    """
    kwargs: dict[str, Any] = {"executor": executor_name(args), "num_workers": args.workers, "cache_dir": args.cache_dir}
    if args.executor == "ray" and args.ray_address:
        kwargs["ray_address"] = args.ray_address
    if args.judges_per_device is not None:
        kwargs["judges_per_device"] = args.judges_per_device
    if args.server:
        kwargs["url"] = args.server
    return kwargs


def executor_name(args: argparse.Namespace) -> str:
    """The executor parsed options choose: ``remote`` when ``--server`` is given, else ``--executor``."""
    return "remote" if args.server else args.executor
