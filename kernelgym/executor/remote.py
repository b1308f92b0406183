"""The remote executor: the worker stages run on a ``kernelgym serve`` judge, reached over HTTP.

Holds:
    SERVER_ENV: the environment variable naming the server's URL when none is given.
    TOKEN_ENV: the environment variable holding the server's bearer token when none is given.
    job_request: the JSON body of ``POST /v1/evaluate`` for one job.
    RemoteExecutor: submits each job to the server and rebuilds its :class:`EvalResult` from the reply.

Only the standard library's ``urllib`` is used, so a client needs no extra. Requests
refused for back-pressure (429, 503) are sent again after the server's ``Retry-After``.
A server that cannot be reached, or fails inside, gives the job a ``judge_error``:
the answer was not judged. A refused token or a rejected request raises
:class:`~kernelgym.errors.KernelGymError`, since only the caller can fix those.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from kernelgym.errors import KernelGymError
from kernelgym.executor.local import failure_result
from kernelgym.executor.registry import PoolSettings
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, Status

__all__ = ["SERVER_ENV", "TOKEN_ENV", "RemoteExecutor", "job_request"]

SERVER_ENV = "KERNELGYM_SERVER"
TOKEN_ENV = "KERNELGYM_SERVE_TOKEN"


class _Unreachable(Exception):
    """The server did not answer, or failed inside: a failure of the judge, not of the answer."""


def job_request(job: JudgeJob) -> dict[str, Any]:
    """The body of ``POST /v1/evaluate`` for ``job``: the task as source, the extracted code, the backend, the whole config.

    Example:
        >>> from kernelgym.tasks import load_suite
        >>> from kernelgym.verifier import VerifierConfig
        >>> job = JudgeJob(load_suite("cpu")["level1/1_ReLU"], "code", "cpp", VerifierConfig(), seeds=(1,))
        >>> body = job_request(job)
        >>> body["task"]["id"], body["backend"], body["config"]["rules"]
        ('level1/1_ReLU', 'cpp', 'native')
    """
    task = job.task
    return {
        "task": {
            "id": task.id, "name": task.name, "level": task.level, "problem_id": task.problem_id,
            "source": task.source, "suite": task.suite, "atol": task.atol, "rtol": task.rtol,
            "variants": [dict(v) for v in task.variants],
        },
        "answer": job.code,
        "backend": job.backend,
        "config": asdict(job.config),
    }


class RemoteExecutor:
    """Judge jobs on a ``kernelgym serve`` server; ``Verifier(executor="remote", url=...)`` builds one.

    The static stages still run in the caller's process (a format error or an illegal answer never
    leaves it); the server judges the rest with its warm workers, under the job's own config.

    Args:
        settings: the pool settings every executor takes (only ``backend`` matters: the server's workers do the rest).
        url: the server, e.g. ``http://judge:8000`` (``None``: ``$KERNELGYM_SERVER``).
        token: its bearer token (``None``: ``$KERNELGYM_SERVE_TOKEN``, or no token).
        max_in_flight: answers this client has at the server at once.
        poll_seconds: how long one ``GET /v1/results/<id>`` waits at the server for a verdict.
        connect_timeout: seconds to wait for the server to answer a request (beyond ``poll_seconds``).

    Raises:
        KernelGymError: no URL was given.
    """

    def __init__(self, settings: PoolSettings | None = None, url: str | None = None, token: str | None = None,
                 max_in_flight: int = 64, poll_seconds: float = 30.0, connect_timeout: float = 60.0) -> None:
        url = url or os.environ.get(SERVER_ENV)
        if not url:
            raise KernelGymError(f"the remote executor needs the judge server's URL: pass url=... or set ${SERVER_ENV} "
                                 "(start a server with `kernelgym serve`)")
        self.settings = settings or PoolSettings()
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.poll_seconds = poll_seconds
        self.connect_timeout = connect_timeout
        self._threads = ThreadPoolExecutor(max_in_flight, thread_name_prefix="kernelgym-remote")

    def submit(self, job: JudgeJob) -> Future[EvalResult]:
        """Start judging ``job`` at the server; the future's result is its :class:`EvalResult`."""
        return self._threads.submit(self._judge, job)

    def run_many(self, jobs: Sequence[JudgeJob]) -> list[EvalResult]:
        """Judge ``jobs`` at the server, in parallel; results in the same order."""
        return [future.result() for future in [self.submit(job) for job in jobs]]

    def close(self) -> None:
        """Wait for the answers in flight (the server's workers stay up)."""
        self._threads.shutdown(wait=True)

    def _judge(self, job: JudgeJob) -> EvalResult:
        try:
            answer_id = self._call("POST", "/v1/evaluate?wait=false", job_request(job))["id"]
            while True:
                reply = self._call("GET", f"/v1/results/{answer_id}?wait={self.poll_seconds:g}")
                if "result" in reply:
                    return EvalResult.from_dict(reply["result"])
        except _Unreachable as exc:
            return failure_result(job, Status.JUDGE_ERROR, f"The judge server at {self.url} failed: {exc}", "build")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request, sent again while the server is busy; the reply's JSON object."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        while True:
            request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.poll_seconds + self.connect_timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                error = _error_text(exc)
                if exc.code in (429, 503):  # back-pressure: the server says when to try again
                    time.sleep(float(exc.headers.get("Retry-After") or 1.0))
                    continue
                if exc.code == 401:
                    raise KernelGymError(f"the judge server at {self.url} refused the token ({error}); pass token=... "
                                         f"or set ${TOKEN_ENV} to the token the server was started with") from None
                if exc.code == 404 and path.startswith("/v1/results/"):
                    raise _Unreachable(f"it no longer knows the answer (restarted?): {error}") from None
                if exc.code < 500:
                    raise KernelGymError(f"the judge server at {self.url} rejected the request: {error}") from None
                raise _Unreachable(f"HTTP {exc.code}: {error}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise _Unreachable(f"no answer: {getattr(exc, 'reason', None) or exc}") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The server's one-line ``error``, or the HTTP reason when the body has none."""
    try:
        return str(json.loads(exc.read())["error"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {exc.code} {exc.reason}"
