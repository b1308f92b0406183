"""The sandboxed worker process: ``python -m kernelgym.executor.worker``.

Holds:
    main: the worker loop. It confines itself (session, limits, Landlock,
        scrubbed environment, private directory), then judges jobs received over
        an inherited socket, sending ``("stage", name)`` as each stage starts and
        ``("result", dict, discard)`` at the end. Candidate output goes to a log
        file, never to the protocol socket.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from kernelgym.executor.sandbox import SandboxPolicy, apply_limits, die_with_parent, restrict_filesystem

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Run the worker loop; ``argv`` = [fd, work_dir, cache_dir, policy_json, backend]."""
    die_with_parent()
    fd, work_dir, cache_dir, policy_json, backend_name = int(argv[0]), Path(argv[1]), Path(argv[2]), argv[3], argv[4]
    policy = SandboxPolicy(**{**json.loads(policy_json), "writable": tuple(json.loads(policy_json)["writable"])})
    conn = Connection(socket.socket(fileno=fd).detach())
    os.chdir(work_dir)
    apply_limits(policy)

    import torch  # noqa: F401  (imported before confinement: its import writes nothing, but is slow)

    from kernelgym.backends import get_backend
    from kernelgym.verifier.judge import judge
    from kernelgym.verifier.result import Status

    backend = get_backend(backend_name)
    build_root = cache_dir / "builds"
    build_root.mkdir(parents=True, exist_ok=True)
    backend.prepare_worker(build_root)
    confinement = restrict_filesystem(policy.writable)
    conn.send(("ready", confinement))
    jobs = 0
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return 0
        if job is None:
            return 0
        jobs += 1
        job_dir = work_dir / f"job{jobs}"
        job_dir.mkdir()
        result = judge(job, build_root, job_dir, on_stage=lambda stage: conn.send(("stage", stage)))
        # A worker that ran a kernel that crashed, hung or misbehaved may be in a bad state: replace it.
        discard = result.status not in (Status.OK, Status.INCORRECT, Status.COMPILE_ERROR, Status.FORMAT_ERROR)
        conn.send(("result", result.to_dict(), discard))
        shutil.rmtree(job_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
