"""The build sandbox: compile one extension in a process of its own, confined to its directory, never loading it.

Holds:
    sandboxed_compile: a :data:`~kernelgym.backends.trusted_build.Compile` for the trusted worker's
        :class:`~kernelgym.backends.trusted_build.StoreBuilder`.
    main: the sandbox's entry point (``python -m kernelgym.executor.builder``, a plan on stdin).

The sources are the candidate's, so the compiler runs apart from the trusted
worker: in a process group of its own within the worker's session (killed whole when its time
is up, or with the worker's session when the worker is stopped), with Landlock
leaving only its build directory writable, and with torch's loader told to build
without importing the result (the library's static initialisers are candidate code).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from kernelgym.backends.native import BuildError
from kernelgym.backends.trusted_build import BuildPlan, Compile
from kernelgym.executor.sandbox import die_with_parent, kill_group, own_group, restrict_filesystem

__all__ = ["main", "sandboxed_compile"]

_MAX_LOG_CHARS = 200_000
_COMPILE_FAILED = 3  # the sources did not compile; any other failure of the sandbox is the judge's


def sandboxed_compile(loader: str) -> Compile:
    """A compile step that runs ``loader``'s ``load_inline`` in a confined subprocess (see the module docstring)."""

    def compile_apart(plan: BuildPlan, directory: Path, timeout: float) -> None:
        spec = json.dumps({"plan": dataclasses.asdict(plan), "loader": loader, "dir": str(directory)})
        env = {**os.environ, "HOME": str(directory), "TMPDIR": str(directory)}
        process = subprocess.Popen([sys.executable, "-m", "kernelgym.executor.builder"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=directory, env=env,
                                   text=True, **own_group())
        try:
            log, _ = process.communicate(spec, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            process.kill()
            process.communicate()
            raise BuildError(f"the build took longer than its {timeout:.0f} s budget and was stopped") from None
        finally:
            kill_group(process.pid)  # nothing it started outlives it
        if process.returncode == _COMPILE_FAILED:
            raise BuildError("native build failed", log=log[-_MAX_LOG_CHARS:])
        if process.returncode != 0:
            raise RuntimeError(f"the build sandbox failed (exit status {process.returncode}): {log[-2000:]}")

    return compile_apart


def main() -> int:
    """Build the plan read from stdin into its directory; the compiler's log on stdout, exit status 3 if it does not compile."""
    die_with_parent()
    spec = json.loads(sys.stdin.read())
    directory = Path(spec["dir"])
    restrict_filesystem((str(directory),))
    import importlib

    from torch.utils import cpp_extension

    # Build only: torch would import the library into this process when done.
    cpp_extension._import_module_from_library = lambda *_args, **_kwargs: None
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None  # torch's own header, outside our directory
    plan = BuildPlan(**spec["plan"])
    try:
        importlib.import_module(spec["loader"]).load_inline(
            name=plan.module, build_directory=str(directory), verbose=False, **plan.arguments)
    except RuntimeError as exc:
        print(str(exc), flush=True)
        return _COMPILE_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
