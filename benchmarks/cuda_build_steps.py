"""CPU seconds of each compile step of a CUDA ``load_inline`` build, with and without each lever.

CPU time (user + system of the compiler processes) hardly depends on what
else the machine runs, so it compares levers on a shared, loaded machine where
wall times do not. Point it at a build directory that torch's ``load_inline``
wrote (it holds ``build.ninja``, ``main.cpp`` and ``cuda.cu``):

    python benchmarks/cuda_build_steps.py BUILD_DIR [--pch-dir DIR]

Steps: the binding unit (``main.cpp``) as torch compiles it, with ``-O1``, and
with a precompiled ``torch/extension.h`` (built once, reported apart); the CUDA
unit as torch compiles it, and with its ``#include <torch/extension.h>``
dropped (torch's implicit ``torch/types.h`` stays). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import re
import resource
import shlex
import subprocess
import tempfile
import time
from pathlib import Path


def cpu_seconds(command: str, cwd: Path) -> tuple[float, float]:
    """(CPU seconds of the command's processes, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, shell=True, check=True, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--pch-dir", type=Path, default=None, help="where to put the precompiled header (default: a temp dir)")
    args = parser.parse_args()
    from torch.utils import cpp_extension

    build = args.build_dir.resolve()
    ninja = (build / "build.ninja").read_text()

    def var(name: str) -> str:
        found = re.search(rf"^{name} = (.*)$", ninja, re.M)
        return found.group(1) if found else ""

    cflags, post, cuda_cflags, cuda_post, nvcc = (var(n) for n in ("cflags", "post_cflags", "cuda_cflags", "cuda_post_cflags", "nvcc"))
    pch = (args.pch_dir or Path(tempfile.mkdtemp(prefix="pch-"))).resolve()
    (pch / "torch").mkdir(parents=True, exist_ok=True)
    header = Path(cpp_extension.include_paths()[0]) / "torch" / "extension.h"
    header_flags = " ".join(shlex.quote(w) for w in shlex.split(cflags) if not w.startswith("-DTORCH_EXTENSION_NAME"))
    (pch / "torch" / "extension.h").write_text("#pragma once\n#include_next <torch/extension.h>\n")
    light = (build / "cuda.cu").read_text().replace("#include <torch/extension.h>", "")
    (build / "light.cu").write_text(light)
    steps = {
        "main.o as torch builds it": f"c++ {cflags} -c main.cpp -o step_m0.o {post}",
        "main.o with -O1": f"c++ {cflags} -O1 -c main.cpp -o step_m1.o {post}",
        "precompiled torch/extension.h (once per cache)": f"c++ -x c++-header {header} {header_flags} {post} -o {pch}/torch/extension.h.gch",
        "main.o with the precompiled header": f"c++ -I{pch} -Winvalid-pch {cflags} -c main.cpp -o step_m2.o {post}",
        "cuda.o as torch builds it": f"{nvcc} {cuda_cflags} -c cuda.cu -o step_c0.o {cuda_post}",
        "cuda.o without torch/extension.h (torch/types.h only)": f"{nvcc} {cuda_cflags} -c light.cu -o step_c1.o {cuda_post}",
    }
    print("| step | CPU s | wall s |\n| --- | ---: | ---: |")
    for name, command in steps.items():
        cpu, wall = cpu_seconds(command, build)
        print(f"| {name} | {cpu:.1f} | {wall:.1f} |", flush=True)


if __name__ == "__main__":
    main()
