"""The build sandbox: compile one extension in a process of its own, confined to its directory, never loading it.

Holds:
    SandboxedCompile: a :data:`~kernelgym.backends.trusted_build.Compile` for the trusted worker's
        :class:`~kernelgym.backends.trusted_build.StoreBuilder`.
    main: the sandbox's entry point (``python -m kernelgym.executor.builder``, a plan on stdin).

The sources are the candidate's, so the compiler runs apart from the trusted
worker: in a process group of its own within the worker's session (killed whole when its time
is up, or with the worker's session when the worker is stopped), with Landlock
leaving only its build directory writable, and with torch's loader told to build
without importing the result (the library's static initialisers are candidate code).

Each sandbox serves one build. Where builds target a device (a GPU host has CPUs to spare), the next one
is started as the worker starts and after each build, so that importing the loader (torch: 3-5 s) is done
before a plan arrives; it reads the plan, and only then moves into the build directory and confines itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kernelgym.backends.native import BuildError, BuildTimeout
from kernelgym.backends.trusted_build import BuildPlan
from kernelgym.executor.sandbox import die_with_parent, kill_group, own_group, restrict_filesystem

__all__ = ["SandboxedCompile", "main"]

_MAX_LOG_CHARS = 200_000
_COMPILE_FAILED = 3  # the sources did not compile; any other failure of the sandbox is the judge's


class SandboxedCompile:
    """A :data:`~kernelgym.backends.trusted_build.Compile` that runs ``loader``'s ``load_inline`` in a confined
    subprocess (see the module docstring).

    ``ahead``: a sandbox is started here, before the first build, and each build takes the one started ahead
    and starts the next when it is done (not beside it, where it would take a CPU from the compiler).
    Otherwise each build starts its own. :attr:`waiting` is the sandbox started ahead, if any; :meth:`close`
    stops it.
    """

    def __init__(self, loader: str, ahead: bool = False) -> None:
        self.loader, self.ahead = loader, ahead
        self.lock = threading.Lock()
        self.waiting: subprocess.Popen[str] | None = self._start() if ahead else None

    def __call__(self, plan: BuildPlan, directory: Path, timeout: float) -> None:
        # The worker's environment as it is now (its device setup names the target architecture after a sandbox started ahead).
        spec = json.dumps({"plan": dataclasses.asdict(plan), "loader": self.loader, "dir": str(directory), "env": dict(os.environ)})
        process = self._take()
        try:
            log, _ = process.communicate(spec, timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(process)
            raise BuildTimeout(f"the build took longer than its {timeout:.0f} s budget and was stopped") from None
        finally:
            kill_group(process.pid)  # nothing it started outlives it
            self._replenish()
        if process.returncode == _COMPILE_FAILED:
            raise BuildError("native build failed", log=log[-_MAX_LOG_CHARS:])
        if process.returncode != 0:
            raise RuntimeError(f"the build sandbox failed (exit status {process.returncode}): {log[-2000:]}")

    def close(self) -> None:
        """Stop the sandbox started ahead (a worker that exits takes it along anyway: it dies with its parent)."""
        with self.lock:
            process, self.waiting, self.ahead = self.waiting, None, False
        if process is not None:
            _stop(process)

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "kernelgym.executor.builder", self.loader], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **own_group())

    def _take(self) -> subprocess.Popen[str]:
        with self.lock:
            process, self.waiting = self.waiting, None
        if process is not None and process.poll() is None:
            return process
        if process is not None:  # it died waiting
            _stop(process)
        return self._start()

    def _replenish(self) -> None:
        with self.lock:
            if self.ahead and self.waiting is None:
                self.waiting = self._start()


def _stop(process: subprocess.Popen[str]) -> None:
    kill_group(process.pid)
    process.kill()
    process.communicate()


def main(argv: list[str]) -> int:
    """Build the plan read from stdin into its directory; the compiler's log on stdout, exit status 3 if it does not compile.

    ``argv`` = [loader]: imported before the plan is read (the plan must name the same one).
    """
    die_with_parent()
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"  # torch's loader asks at import whether CUDA is there: no driver set up here
    import importlib

    from torch.utils import cpp_extension

    loader = importlib.import_module(argv[0])
    # Build only: torch would import the library into this process when done.
    cpp_extension._import_module_from_library = lambda *_args, **_kwargs: None
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None  # torch's own header, outside our directory
    try:
        spec = json.loads(sys.stdin.read())
    except ValueError:  # the worker closed it without a plan
        return 1
    if spec["loader"] != argv[0]:
        print(f"the build sandbox imported {argv[0]}, the plan names {spec['loader']}", flush=True)
        return 1
    directory = Path(spec["dir"])
    os.chdir(directory)
    os.environ.clear()
    os.environ.update(spec["env"], HOME=str(directory), TMPDIR=str(directory), PYTORCH_NVML_BASED_CUDA_CHECK="1")
    tempfile.tempdir = str(directory)
    restrict_filesystem((str(directory),))
    plan = BuildPlan(**spec["plan"])
    try:
        loader.load_inline(name=plan.module, build_directory=str(directory), verbose=False, **plan.arguments)
    except RuntimeError as exc:
        print(str(exc), flush=True)
        return _COMPILE_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
