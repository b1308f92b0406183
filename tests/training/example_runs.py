"""Running the training examples as a user would: in a subprocess from the checkout, or with an extra missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(example: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    """``python example *args`` from the checkout's root, with the checkout importable."""
    return _run([sys.executable, str(example), *args], timeout)


def run_without(module: str, example: Path) -> subprocess.CompletedProcess[str]:
    """Run ``example`` (no arguments) as if ``module`` were not installed (``import module`` fails)."""
    code = (
        f"import runpy, sys; sys.modules[{module!r}] = None; sys.argv = [{example.name!r}]; "
        f"runpy.run_path({str(example)!r}, run_name='__main__')"
    )
    return _run([sys.executable, "-c", code], 300)


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False)
