"""Start-up of the judge on a fresh machine, and a warm judge behind ``kernelgym serve``.

    python benchmarks/startup.py --backend cpp --suite cpu --task level1/1_ReLU --out runs/startup
    python benchmarks/startup.py --backend cuda --suite gpu --task level1/1_ReLU --out "$OUT"

Steps, each a separate process as a user would run it, with a fresh build cache
(``--cache-dir``, default a new temporary folder), one JSON line per step in
``<out>/startup.jsonl`` written as it finishes:

``prepare``
    ``kernelgym prepare --backend B``: the one-time builds.
``first``
    ``kernelgym eval`` of the task's bundled answer right after: the first verdict
    of a machine whose one-time builds are done (the answer's own build included).
``second``
    the same command again: a new process, the build cache warm.
``worker_start``
    a judge worker started alone, three times, the cache warm: what every new process pays.
``serve_up``
    ``kernelgym serve --backend B`` started, until ``/v1/health`` answers (its warm-up
    judges a bundled answer).
``served``
    ``kernelgym eval --server URL`` of the same answer, ``--repeat`` times: each wall
    time end to end (the client process included).
``served_new``
    ``kernelgym eval --server URL`` of another task's bundled answer, not built yet: a warm
    judge's first verdict on a new answer, its own build included.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _record(out: Path, step: str, seconds: float, **extra: object) -> None:
    line = {"step": step, "seconds": round(seconds, 3), **extra}
    print(json.dumps(line), flush=True)
    with (out / "startup.jsonl").open("a") as handle:
        handle.write(json.dumps(line) + "\n")


def _run(command: list[str], env: dict[str, str], timeout: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return time.monotonic() - start, done


_WORKER_START = """
import sys, time
from pathlib import Path
from kernelgym.executor.local import WorkerHandle
from kernelgym.backends import get_backend
from kernelgym.executor.sandbox import SandboxPolicy
limit = {} if get_backend(sys.argv[1]).address_space_limit_ok else {"memory_gb": None}  # as the executor sets it
worker = WorkerHandle(sys.argv[1], Path(sys.argv[2]), SandboxPolicy(cpu=1, cpu_count=1, **limit), device_index=0 if sys.argv[1] != "cpp" else None)
start = time.monotonic()
worker.start()
print(round(time.monotonic() - start, 3))
worker.stop()
"""


def _verdict(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The status and stage seconds of ``kernelgym eval --json``'s output (its error tail otherwise)."""
    try:
        result = json.loads(done.stdout)
    except ValueError:
        return {"status": None, "error": done.stderr[-300:]}
    return {"status": result.get("status"), "stages": result.get("seconds")}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpp")
    parser.add_argument("--suite", default="cpu")
    parser.add_argument("--task", default="level1/1_ReLU")
    parser.add_argument("--cache-dir", default=None, help="build cache (default: a fresh temporary folder)")
    parser.add_argument("--repeat", type=int, default=5, help="warm evaluations through the server")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache_dir) if args.cache_dir else Path(tempfile.mkdtemp(prefix="kg-startup-"))
    env = {**os.environ, "KERNELGYM_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    kernelgym = [sys.executable, "-m", "kernelgym.cli"]
    from kernelgym.tasks import load_suite

    suite = load_suite(args.suite)
    answer = out / "answer.py"
    answer.write_text(suite[args.task].solution(args.backend))
    # Another answer, never built here: neither the task's nor the one ``serve`` warms up with (its suite's first).
    own = [task for task in suite if args.backend in task.solutions]
    new_task = next((task for task in own[1:] if task.id != args.task), None)
    _record(out, "machine", 0.0, host=platform.node(), python=platform.python_version(), cpus=os.cpu_count(),
            date=datetime.date.today().isoformat(), backend=args.backend, task=args.task, cache=str(cache))

    seconds, done = _run([*kernelgym, "prepare", "--backend", args.backend], env, 1800)
    _record(out, "prepare", seconds, exit=done.returncode, log=done.stderr.strip().splitlines()[-6:])
    evaluate = [*kernelgym, "eval", str(answer), "--task", args.task, "--suite", args.suite, "--backend", args.backend, "--json"]
    for step in ("first", "second"):
        seconds, done = _run(evaluate, env, 900)
        _record(out, step, seconds, exit=done.returncode, **_verdict(done))
    for attempt in range(3):  # a worker's start alone, the cache warm (what every new process pays)
        seconds, done = _run([sys.executable, "-c", _WORKER_START, args.backend, str(cache)], env, 300)
        _record(out, "worker_start", float(done.stdout.strip() or "nan"), exit=done.returncode, attempt=attempt + 1,
                **({"error": done.stderr[-400:]} if done.returncode else {}))

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    server = subprocess.Popen([*kernelgym, "serve", "--backend", args.backend, "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=(out / "serve.log").open("w"))
    try:
        while time.monotonic() - start < 900 and server.poll() is None:
            try:
                with urllib.request.urlopen(f"{url}/v1/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        _record(out, "serve_up", time.monotonic() - start, running=server.poll() is None)
        for k in range(args.repeat):
            seconds, done = _run([*evaluate, "--server", url], env, 300)
            _record(out, "served", seconds, exit=done.returncode, attempt=k + 1, **_verdict(done))
        if new_task is not None:
            new_answer = out / "new_answer.py"
            new_answer.write_text(new_task.solution(args.backend))
            seconds, done = _run([*kernelgym, "eval", str(new_answer), "--task", new_task.id, "--suite", args.suite,
                                  "--backend", args.backend, "--json", "--server", url], env, 900)
            _record(out, "served_new", seconds, exit=done.returncode, task=new_task.id, **_verdict(done))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
