"""Cold build time of one-kernel CUDA ``load_inline`` answers under each build lever (issue 13, item 5).

Run on a GPU host (nvcc, ninja and a CUDA build of torch; no GPU is used):

    python3 benchmarks/cuda_build_levers.py --out benchmarks/results/cuda_build_levers.md

Each answer's ``load_inline`` call is captured (the answer files are bundled,
trusted ones) and rebuilt from nothing into a fresh directory under every
configuration; the table gives the wall time of the whole build and, from
ninja's log, of the host binding object (``main.o``), the CUDA object and the
link. The levers:

- ``baseline``: the call as written.
- ``host_O1``: ``-O1`` for the binding translation unit (it holds only declarations and pybind11 glue).
- ``pch``: a precompiled ``torch/extension.h`` for the binding translation unit, built once per
  flag set (its build time is reported separately: the build cache keeps it).
- ``light_cu``: the CUDA translation unit includes ``torch/types.h`` instead of ``torch/extension.h``
  (no pybind11 or Python headers through nvcc's two front ends), via ``no_implicit_headers=True``.
- ``nvcc_threads``: ``nvcc --threads 4``.
- ``pch+light_cu``: both.

This script imports nothing from kernelgym, so it runs with a bare torch install.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = (
    ROOT / "kernelgym/tasks/suites/gpu/solutions/cuda/level1/1_ReLU.py",
    ROOT / "tests/legit/cuda/kernelbench_style_answer.py",
)
LIGHT_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


def captured_call(path: Path) -> dict[str, Any]:
    """The keyword arguments of the answer's first ``load_inline`` call (the build is skipped)."""
    from torch.utils import cpp_extension

    seen: dict[str, Any] = {}

    class Captured(Exception):
        pass

    def capture(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise Captured

    real = cpp_extension.load_inline
    cpp_extension.load_inline = lambda *args, **kwargs: capture(**dict(zip(("name", "cpp_sources", "cuda_sources"), args, strict=False)), **kwargs)
    try:
        runpy.run_path(str(path), run_name="answer")
    except Captured:
        pass
    finally:
        cpp_extension.load_inline = real
    return seen


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def ninja_steps(build_dir: Path) -> dict[str, float]:
    """Seconds per ninja target from ``.ninja_log``."""
    steps: dict[str, float] = {}
    log = build_dir / ".ninja_log"
    if log.exists():
        for line in log.read_text().splitlines()[1:]:
            start, end, _mtime, target, _hash = line.split("\t")
            steps[target] = (int(end) - int(start)) / 1e3
    return steps


def build_pch(flags_dir: Path, pch_root: Path) -> tuple[Path | None, float]:
    """Precompile torch/extension.h with the flags ninja used for main.cpp in ``flags_dir``."""
    ninja = (flags_dir / "build.ninja").read_text()
    cflags = re.search(r"^cflags = (.*)$", ninja, re.M)
    post = re.search(r"^post_cflags = (.*)$", ninja, re.M)
    if cflags is None:
        return None, 0.0
    words = [w for w in shlex.split(cflags.group(1) + " " + (post.group(1) if post else "")) if not w.startswith("-DTORCH_EXTENSION_NAME")]
    from torch.utils import cpp_extension

    header = Path(cpp_extension.include_paths()[0]) / "torch" / "extension.h"
    target = pch_root / "torch" / "extension.h.gch"
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    subprocess.run(["c++", "-x", "c++-header", str(header), *words, "-o", str(target)], check=True)
    (pch_root / "torch" / "extension.h").write_text("#pragma once\n#include_next <torch/extension.h>\n")
    return pch_root, time.perf_counter() - start


def configure(call: dict[str, Any], lever: str, pch_dir: Path | None) -> dict[str, Any]:
    kwargs = dict(call)
    kwargs["cpp_sources"] = as_list(call.get("cpp_sources"))
    kwargs["cuda_sources"] = as_list(call.get("cuda_sources"))
    kwargs["extra_cflags"] = [f for f in as_list(call.get("extra_cflags")) if f.strip()]
    kwargs["extra_cuda_cflags"] = [f for f in as_list(call.get("extra_cuda_cflags")) if f.strip()]
    kwargs["extra_ldflags"] = [f for f in as_list(call.get("extra_ldflags")) if f.strip()]
    if lever == "host_O1":
        kwargs["extra_cflags"] = [f for f in kwargs["extra_cflags"] if not f.startswith("-O")] + ["-O1"]
    if lever in ("pch", "pch+light_cu") and pch_dir is not None:
        kwargs["extra_include_paths"] = [str(pch_dir)]
    if lever in ("light_cu", "pch+light_cu"):
        kwargs["no_implicit_headers"] = True
        kwargs["cpp_sources"] = ["#include <torch/extension.h>", *kwargs["cpp_sources"]]
        kwargs["cuda_sources"] = [LIGHT_HEADERS + s.replace("#include <torch/extension.h>", "") for s in kwargs["cuda_sources"]]
    if lever == "nvcc_threads":
        kwargs["extra_cuda_cflags"] = [*kwargs["extra_cuda_cflags"], "--threads", "4"]
    return kwargs


def build(kwargs: dict[str, Any], build_dir: Path, extra_ld: list[str]) -> tuple[float, dict[str, float]]:
    from torch.utils import cpp_extension

    kwargs = {**kwargs, "extra_ldflags": [*kwargs["extra_ldflags"], *extra_ld], "name": f"lever_{build_dir.name}", "build_directory": str(build_dir), "verbose": False}
    start = time.perf_counter()
    try:
        cpp_extension.load_inline(**kwargs)
    except ImportError:
        if not extra_ld:
            raise  # built against stand-in libraries: the compile and link happened, loading cannot
    return time.perf_counter() - start, ninja_steps(build_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="markdown file to write")
    parser.add_argument("--levers", default="baseline,host_O1,pch,light_cu,nvcc_threads,pch+light_cu")
    parser.add_argument(
        "--stub-libs", type=Path, default=None,
        help="with a CPU build of torch: a folder of empty libc10_cuda.so/libtorch_cuda.so to link against "
        "(compiling is the same; the result is not loadable)",
    )
    parser.add_argument("--answers", type=Path, nargs="*", default=list(ANSWERS), help="answer files to build")
    args = parser.parse_args()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    import torch
    from torch.utils import cpp_extension

    if args.stub_libs is not None:
        cpp_extension.CUDA_HOME = cpp_extension.CUDA_HOME or os.environ.get("CUDA_HOME", "/usr/local/cuda")
    extra_ld = [f"-L{args.stub_libs.resolve()}"] if args.stub_libs is not None else []

    work = Path(tempfile.mkdtemp(prefix="levers-"))
    rows = []
    pch_seconds = {}
    for answer in (p.resolve() for p in args.answers):
        call = captured_call(answer)
        pch_dir = None
        for n, lever in enumerate(args.levers.split(",")):
            build_dir = work / f"{answer.stem}_{n}"
            build_dir.mkdir()
            if lever.startswith("pch") and pch_dir is None:
                flags_dir = work / f"{answer.stem}_flags"
                flags_dir.mkdir()
                build(configure(call, "baseline", None), flags_dir, extra_ld)
                pch_dir, pch_seconds[answer.stem] = build_pch(flags_dir, work / f"pch_{answer.stem}")
            seconds, steps = build(configure(call, lever, pch_dir), build_dir, extra_ld)
            cuda_obj = next((v for k, v in steps.items() if k.endswith(".cuda.o")), float("nan"))
            link = next((v for k, v in steps.items() if k.endswith(".so")), float("nan"))
            rows.append((answer.relative_to(ROOT), lever, seconds, steps.get("main.o", float("nan")), cuda_obj, link))
            print(rows[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    lines = [
        "# Cold CUDA build levers",
        "",
        f"- date: {datetime.date.today()}, commit: {commit or 'unknown'}",
        f"- machine: {platform.node()}, {os.cpu_count()} cores; torch {torch.__version__}; {nvcc}; "
        f"TORCH_CUDA_ARCH_LIST={os.environ['TORCH_CUDA_ARCH_LIST']}; MAX_JOBS={os.environ.get('MAX_JOBS', 'unset')}",
        f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`",
        "- precompiled header build (once per flag set, kept in the cache): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in pch_seconds.items()),
        "",
        "| answer | lever | build s | main.o s | cuda.o s | link s |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        *(f"| {a} | {lever} | {s:.1f} | {m:.1f} | {c:.1f} | {ln:.1f} |" for a, lever, s, m, c, ln in rows),
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
