"""``kernelgym serve``: a long-lived judge holding warm workers per backend, behind a small JSON API over HTTP.

Holds:
    RequestError: a request the service cannot take (HTTP 400), with a one-line reason.
    ServiceBusy: the queue is full (HTTP 429) or the service is stopping (HTTP 503); says when to try again.
    JudgeRequest: one answer to judge, parsed from its JSON body.
    ServedTasks: the tasks a server judges: its suites' (by suite and id, or by their exact source), and sent ones, sandboxed.
    parse_request: a :class:`JudgeRequest` from a JSON body (task by suite and id, or as source text), settings bounded.
    check_exposure: refuse to listen beyond loopback without a bearer token.
    JudgeService: the judge itself: one executor per backend, a bounded queue, results by id, counts.
    make_app: the aiohttp application serving a :class:`JudgeService` (the API in ``docs/serve.md``).
    RunningServer, start_in_thread: a server on a background thread (tests, notebooks).
    serve_forever: run the server in this thread until interrupted.

The service fronts ``kernelgym.Verifier`` objects that share one executor per
backend (``local`` by default, ``ray`` for a cluster), so every request may
bring its own rules preset, weights contract and budgets while the workers stay
warm. ``kernelgym.executor.remote.RemoteExecutor`` is its client. The server
library, aiohttp, is the ``serve`` extra, imported only when a server starts.
Every request is untrusted: a task it sends that the server does not hold runs only sandboxed
(:class:`ServedTasks`), and settings are bounded (``kernelgym.verifier.config.check_bounds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import itertools
import signal
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

from kernelgym.backends import get_backend
from kernelgym.errors import KernelGymError, require_extra
from kernelgym.executor import Verifier, make_executor
from kernelgym.executor.registry import Executor, PoolSettings
from kernelgym.executor.remote import TOKEN_ENV
from kernelgym.openrlhf import reward_bodies, reward_reply
from kernelgym.tasks import TaskSuite, bundled_suites, default_backend, load_suite
from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig, check_bounds, config_from_dict
from kernelgym.verifier.feedback import conclude
from kernelgym.verifier.result import EvalResult, Status

__all__ = [
    "JudgeRequest", "JudgeService", "RequestError", "RunningServer", "ServedTasks", "ServiceBusy", "check_exposure",
    "make_app", "parse_request", "serve_forever", "start_in_thread",
]

_MAX_BODY_BYTES = 64 * 2**20
_MAX_WAIT_SECONDS = 300.0
_SHUTDOWN_SECONDS = 5.0
_LABELS = {"id": str, "name": str, "level": int, "problem_id": int}


class RequestError(KernelGymError, ValueError):
    """A request the service cannot take; the message is one line saying what is wrong."""


class ServiceBusy(Exception):
    """The service cannot take the answers now.

    Attributes:
        retry_after: seconds after which a client may try again.
        stopping: the service is shutting down (HTTP 503) rather than full (HTTP 429).
    """

    def __init__(self, message: str, retry_after: int, stopping: bool = False) -> None:
        super().__init__(message)
        self.retry_after, self.stopping = retry_after, stopping


@dataclass(frozen=True)
class JudgeRequest:
    """One answer to judge.

    Attributes:
        task: the task answered.
        answer: the answer text (an LLM response or bare code).
        backend: the backend to judge it on.
        config: the judge's settings for this answer.
    """

    task: Task
    answer: str
    backend: str
    config: VerifierConfig


@lru_cache(maxsize=16)
def _suite(name: str) -> TaskSuite:
    return load_suite(name)


class ServedTasks:
    """The tasks a server judges: those of the bundled suites and of ``suites`` (``load_suite`` specs), and any task
    a request sends as source.

    A request names a served task by suite and id, or sends a task's source. A source byte-identical to a
    served task's is judged by the server's copy (its tolerances and shapes; the request's ``id``, ``name``,
    ``level``, ``problem_id`` only label the result), which the worker runs as its own. Any other source is
    untrusted code: it is judged ``sandboxed``, its program run only in a confined process made like the
    candidate's, which hands back plain data (:mod:`kernelgym.verifier.sandboxed_task`).

    Raises:
        TaskError: a suite cannot be loaded.

    Example:
        >>> relu = load_suite("cpu")["level1/1_ReLU"]
        >>> ServedTasks().task({"task": {"source": relu.source, "id": "mine"}}).sandboxed
        False
        >>> ServedTasks().task({"task": relu.source + "# mine", "id": "mine"}).sandboxed
        True
    """

    def __init__(self, suites: Sequence[str] = ()) -> None:
        self.specs = tuple(dict.fromkeys([*bundled_suites(), *suites]))
        self._suites: dict[str, TaskSuite] = {}
        self._by_source: dict[str, list[Task]] = {}
        for spec in self.specs:
            suite = _suite(spec)
            self._suites.setdefault(spec, suite)
            self._suites.setdefault(suite.name, suite)
            for task in suite:
                self._by_source.setdefault(task.source, []).append(task)

    def task(self, body: Mapping[str, Any]) -> Task:
        """The task a request body names: ``suite`` and ``task_id``, or ``task`` (its source, or an object with it).

        Raises:
            RequestError: no such served task, or a malformed ``task``.
        """
        if "task" not in body:
            if "suite" not in body or "task_id" not in body:
                raise RequestError('name the task with "suite" and "task_id", or give its source as "task"')
            name = str(body["suite"])
            if name not in self._suites:
                raise RequestError(f"this server judges the suites {', '.join(self.specs)}, not {name!r}: send the "
                                   'task\'s source as "task", or start the server with --suite naming that suite')
            try:
                return self._suites[name][str(body["task_id"])]
            except KernelGymError as exc:
                raise RequestError(str(exc)) from None
        spec = body["task"]
        if isinstance(spec, str):
            spec = {"source": spec}
        if not isinstance(spec, Mapping) or not isinstance(spec.get("source"), str):
            raise RequestError('"task" must be the task source text or an object with its "source"')
        unknown = sorted(set(spec) - ({f.name for f in fields(Task)} - {"solutions", "sandboxed"}))
        if unknown:
            raise RequestError(f"unknown task field(s): {', '.join(unknown)}")
        labels = {name: spec[name] for name in _LABELS if name in spec}
        for name, value in labels.items():
            if isinstance(value, bool) or not isinstance(value, _LABELS[name]):
                raise RequestError(f'task "{name}" must be {"a string" if _LABELS[name] is str else "an integer"}')
        served = self._by_source.get(spec["source"])
        if served:
            # The client's suite and id pick among served copies of one source; the server's copy is what is judged.
            chosen = next((t for t in served if (t.suite, t.id) == (spec.get("suite"), spec.get("id"))),
                          next((t for t in served if t.suite == spec.get("suite")), served[0]))
            return replace(chosen, **labels)
        values = {"id": "task", "name": "task", "level": 0, "problem_id": 0, **spec, "sandboxed": True}
        values["variants"] = tuple(values.get("variants") or ())
        try:
            return Task(**values)
        except TypeError as exc:
            raise RequestError(f"bad task: {exc}") from None


def parse_request(body: Any, default_backend_name: str, tasks: ServedTasks) -> JudgeRequest:
    """A :class:`JudgeRequest` from a JSON body (see ``docs/serve.md``).

    Fields: ``suite`` + ``task_id``, or ``task`` (source text, or an object with ``source`` and optional
    ``id``, ``level``, ...); ``answer``; optional ``backend`` (default: the suite's, else the server's first),
    ``rules``, ``weights`` and ``config`` (any :class:`VerifierConfig` setting, budgets as ``timeouts``).
    The task must be one of ``tasks``; the settings must be within :func:`~kernelgym.verifier.config.check_bounds`.

    Raises:
        RequestError: the body is not such an object, names no served task, or a setting is out of bounds.

    Example:
        >>> body = {"suite": "cpu", "task_id": "level1/1_ReLU", "answer": "x", "rules": "kernelbench"}
        >>> parse_request(body, "cpp", ServedTasks()).config.rules
        'kernelbench'
    """
    if not isinstance(body, Mapping):
        raise RequestError("the body must be a JSON object")
    known = {"suite", "task_id", "task", "answer", "backend", "rules", "weights", "config"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise RequestError(f"unknown field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if not isinstance(body.get("answer"), str):
        raise RequestError('"answer" (the answer text) is required and must be a string')
    task = tasks.task(body)
    overrides = body.get("config") or {}
    if not isinstance(overrides, Mapping):
        raise RequestError('"config" must be an object of judge settings')
    overrides = {**overrides, **{k: body[k] for k in ("rules", "weights") if k in body}}
    backend = body.get("backend") or (default_backend(str(body["suite"])) if "suite" in body else default_backend_name)
    try:
        config = config_from_dict(overrides)
        check_bounds(config)
    except ValueError as exc:
        raise RequestError(f"config: {exc}") from None
    return JudgeRequest(task, body["answer"], str(backend), config)


@dataclass
class _Counts:
    """What ``/v1/metrics`` reports; changed under the service's lock."""

    queued: int = 0
    in_flight: int = 0
    judged: int = 0
    seconds: float = 0.0
    by_status: dict[str, int] | None = None


class JudgeService:
    """The judge behind ``kernelgym serve``: warm executors per backend, a bounded queue, results by id.

    Args:
        backends: the backends judged (each gets its own executor and workers).
        executor: ``local`` (sandboxed workers on this machine) or ``ray`` (a Ray cluster).
        num_workers: judge workers per backend (``None``: the executor's default).
        cache_dir: the build cache of local workers.
        queue_size: answers that may wait beyond those being judged; more are refused (:class:`ServiceBusy`).
        max_in_flight: answers handed to each backend's executor at once (``None``: twice its workers,
            so builds run ahead of the judges).
        keep_results: finished results kept for ``/v1/results/<id>`` (oldest dropped first).
        suites: suites whose tasks requests may name, beside the bundled ones (see :class:`ServedTasks`).
        **executor_options: passed to the executor (e.g. ``ray_address``).

    Raises:
        BackendUnavailableError: a backend cannot run on this machine (``local`` executor).
        TaskError: a suite cannot be loaded.

    Example:
        >>> service = JudgeService(["cpp"], num_workers=1)
        >>> task = load_suite("cpu")["level1/1_ReLU"]
        >>> answer_id = service.submit([JudgeRequest(task, "no code", "cpp", VerifierConfig())])[0]
        >>> service.result(answer_id, wait=30).status.value
        'format_error'
        >>> service.close()
    """

    def __init__(self, backends: Sequence[str] = ("cpp",), executor: str = "local", num_workers: int | None = None,
                 cache_dir: str | None = None, queue_size: int = 64, max_in_flight: int | None = None,
                 keep_results: int = 10_000, suites: Sequence[str] = (), **executor_options: Any) -> None:
        if not backends:
            raise KernelGymError("give the service at least one backend to judge")
        if queue_size < 0:
            raise KernelGymError("the queue size must be at least 0")
        self.tasks = ServedTasks(suites)
        self.backends = tuple(dict.fromkeys(backends))
        self.executor_name = executor
        self.queue_size = queue_size
        self.keep_results = keep_results
        self.started = time.time()
        self._executors: dict[str, Executor] = {}
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._slots: dict[str, int] = {}
        for backend in self.backends:
            if executor == "local":
                get_backend(backend).require_available()
            made = make_executor(executor, PoolSettings(backend=backend, num_workers=num_workers, cache_dir=cache_dir),
                                 **executor_options)
            self._executors[backend] = made
            self._slots[backend] = max_in_flight or 2 * (getattr(made, "num_workers", None) or num_workers or 1)
            self._threads[backend] = ThreadPoolExecutor(self._slots[backend], thread_name_prefix=f"kernelgym-serve-{backend}")
        self._verifiers: dict[tuple[str, VerifierConfig], Verifier] = {}
        self._results: OrderedDict[str, Future[EvalResult]] = OrderedDict()
        self._counts = {backend: _Counts(by_status={}) for backend in self.backends}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stopping = False

    def _verifier(self, backend: str, config: VerifierConfig) -> Verifier:
        # One Verifier per (backend, settings), all over the backend's one warm executor.
        key = (backend, config)
        with self._lock:
            if key not in self._verifiers:
                self._verifiers[key] = Verifier(backend=backend, executor=self._executors[backend], config=config)
            return self._verifiers[key]

    def _retry_after(self, backend: str) -> int:
        counts = self._counts[backend]
        mean = counts.seconds / counts.judged if counts.judged else 5.0
        return max(1, round(mean * (counts.queued + counts.in_flight) / self._slots[backend]))

    def submit(self, requests: Sequence[JudgeRequest]) -> list[str]:
        """Queue ``requests`` (all or none); their ids, for :meth:`result`.

        Raises:
            RequestError: a request names a backend this service does not judge.
            ServiceBusy: they do not all fit in the queue, or the service is stopping.
        """
        for request in requests:
            if request.backend not in self._executors:
                raise RequestError(f"this server judges only {', '.join(self.backends)}, not {request.backend!r}; "
                                   "start it with --backend " + ",".join((*self.backends, request.backend)))
        with self._lock:
            if self._stopping:
                raise ServiceBusy("the judge is shutting down", retry_after=5, stopping=True)
            wanted: dict[str, int] = {}
            for request in requests:
                wanted[request.backend] = wanted.get(request.backend, 0) + 1
            for backend, count in wanted.items():
                c = self._counts[backend]
                room = self._slots[backend] + self.queue_size - c.queued - c.in_flight
                if count > room:
                    raise ServiceBusy(f"the {backend} queue is full ({c.queued} waiting, {c.in_flight} being judged; "
                                      f"room for {max(room, 0)})", retry_after=self._retry_after(backend))
            ids = []
            for request in requests:
                answer_id = f"{next(self._ids)}-{time.monotonic_ns() % 10**9:09d}"
                future: Future[EvalResult] = Future()
                self._results[answer_id] = future
                self._counts[request.backend].queued += 1
                queued = self._threads[request.backend].submit(self._judge, request, future)
                queued.add_done_callback(lambda job, r=request, f=future: self._dropped(job, r, f))
                ids.append(answer_id)
            self._forget_old()
        return ids

    def _forget_old(self) -> None:
        while len(self._results) > self.keep_results:
            oldest, future = next(iter(self._results.items()))
            if not future.done():
                break
            del self._results[oldest]

    @staticmethod
    def _failed(r: JudgeRequest, sentence: str) -> EvalResult:
        return conclude(r.task.id, r.backend, Status.JUDGE_ERROR, details=[sentence], rules=r.config.rules, weights=r.config.weights)

    def _dropped(self, job: Future[None], request: JudgeRequest, future: Future[EvalResult]) -> None:
        # An answer still queued when the service stopped: never judged, so the judge's failure, not the answer's.
        if job.cancelled():
            with self._lock:
                self._counts[request.backend].queued -= 1
            future.set_result(self._failed(request, "The judge service stopped before judging this answer; send it again."))

    def _judge(self, request: JudgeRequest, future: Future[EvalResult]) -> None:
        counts = self._counts[request.backend]
        with self._lock:
            counts.queued -= 1
            counts.in_flight += 1
        start = time.perf_counter()
        try:
            result = self._verifier(request.backend, request.config).evaluate(request.task, request.answer)
        except Exception as exc:  # a failure of the service is the judge's, reported as such, never a lost answer
            result = self._failed(request, f"The judge service failed: {type(exc).__name__}: {exc}")
        if self._stopping:  # its worker may have been killed under it: a crash that is the judge's, not the answer's
            result = self._failed(request, "The judge service stopped while judging this answer; send it again.")
        with self._lock:
            counts.in_flight -= 1
            counts.judged += 1
            counts.seconds += time.perf_counter() - start
            assert counts.by_status is not None
            counts.by_status[result.status.value] = counts.by_status.get(result.status.value, 0) + 1
        future.set_result(result)

    def future(self, answer_id: str) -> Future[EvalResult]:
        """The future of an answer's result.

        Raises:
            KeyError: no answer has that id (never submitted, or its result was dropped).
        """
        with self._lock:
            return self._results[answer_id]

    def result(self, answer_id: str, wait: float = 0.0) -> EvalResult | None:
        """The answer's result, waiting up to ``wait`` seconds; ``None`` while it is being judged.

        Raises:
            KeyError: no answer has that id.
        """
        future = self.future(answer_id)
        try:
            return future.result(timeout=wait)
        except FutureTimeout:
            return None

    def health(self) -> dict[str, Any]:
        """Whether the service takes answers, and what it judges."""
        return {"status": "stopping" if self._stopping else "ok", "backends": list(self.backends),
                "executor": self.executor_name, "uptime_seconds": round(time.time() - self.started, 3)}

    def metrics(self) -> dict[str, Any]:
        """Queue length, answers in flight, answers judged by status and their mean seconds, overall and per backend."""
        with self._lock:
            per_backend = {}
            for backend, c in self._counts.items():
                per_backend[backend] = {
                    "queued": c.queued, "in_flight": c.in_flight, "capacity": self._slots[backend] + self.queue_size,
                    "judged": c.judged, "by_status": dict(c.by_status or {}),
                    "mean_seconds": round(c.seconds / c.judged, 6) if c.judged else None,
                }
        judged = sum(b["judged"] for b in per_backend.values())
        seconds = sum(c.seconds for c in self._counts.values())
        by_status = dict(sum((Counter(b["by_status"]) for b in per_backend.values()), Counter()))
        return {
            "queued": sum(b["queued"] for b in per_backend.values()),
            "in_flight": sum(b["in_flight"] for b in per_backend.values()),
            "judged": judged, "by_status": by_status, "mean_seconds": round(seconds / judged, 6) if judged else None,
            "judge_errors": by_status.get(Status.JUDGE_ERROR.value, 0), "backends": per_backend,
        }

    def warm_up(self) -> None:
        """Judge one bundled honest answer per backend, so the workers and their one-time builds are ready."""
        for backend in self.backends:
            task = next((t for name in ("cpu", "gpu") for t in _suite(name) if backend in t.solutions), None)
            if task is not None:
                self._verifier(backend, VerifierConfig()).evaluate(task, task.solutions[backend])

    def close(self) -> None:
        """Refuse new answers and stop every worker now; answers not judged yet end as ``judge_error`` (send them again)."""
        with self._lock:
            self._stopping = True
        for threads in self._threads.values():
            threads.shutdown(wait=False, cancel_futures=True)
        for executor in self._executors.values():
            executor.close()  # busy workers included: a stop never waits on an answer's budgets
        for threads in self._threads.values():
            threads.shutdown(wait=True)


def _load_web() -> Any:
    return require_extra("aiohttp.web", "serve")


def make_app(service: JudgeService, token: str | None = None) -> Any:
    """The aiohttp application serving ``service``; every route but ``/v1/health`` needs ``token`` when one is set.

    Raises:
        MissingExtraError: aiohttp is not installed (``pip install 'kernelgym[serve]'``).
    """
    web = _load_web()

    def error(status: int, message: str, **headers: str) -> Any:
        return web.json_response({"error": message}, status=status, headers=headers)

    @web.middleware
    async def guard(request: Any, handler: Any) -> Any:
        if token and request.path != "/v1/health":
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return error(401, "missing or wrong bearer token (header: Authorization: Bearer <token>)",
                             **{"WWW-Authenticate": "Bearer"})
        try:
            return await handler(request)
        except RequestError as exc:
            return error(400, str(exc))
        except ServiceBusy as exc:
            return error(503 if exc.stopping else 429, str(exc), **{"Retry-After": str(exc.retry_after)})

    async def body(request: Any) -> Any:
        try:
            return await request.json()
        except ValueError:
            raise RequestError("the body is not valid JSON") from None

    def wait_seconds(request: Any, default: float) -> float:
        text = request.query.get("wait", "")
        if text.lower() in ("false", "0", "no"):
            return 0.0
        if text.lower() in ("", "true", "yes"):
            return default
        try:
            return min(max(float(text), 0.0), _MAX_WAIT_SECONDS)
        except ValueError:
            raise RequestError(f"wait must be true, false or seconds, not {text!r}") from None

    async def outcome(answer_id: str, wait: float | None) -> tuple[int, dict[str, Any]]:
        future = service.future(answer_id)
        if not future.done() and (wait is None or wait > 0):
            # The thread's future is read directly: a wrapped one learns of the verdict only a loop turn later.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout=wait)
        if not future.done():
            return 202, {"id": answer_id, "state": "pending"}
        return 200, {"id": answer_id, "state": "done", "result": future.result().to_dict()}

    async def evaluate(request: Any) -> Any:
        parsed = parse_request(await body(request), service.backends[0], service.tasks)
        wait = wait_seconds(request, default=-1.0)
        answer_id = service.submit([parsed])[0]
        if wait == 0.0:
            return web.json_response({"id": answer_id, "state": "pending"}, status=202)
        status, data = await outcome(answer_id, None if wait < 0 else wait)
        return web.json_response(data, status=status)

    async def batch(request: Any) -> Any:
        data = await body(request)
        items = data.get("requests") if isinstance(data, Mapping) else data
        if not isinstance(items, list) or not items:
            raise RequestError('the body must be {"requests": [...]} with at least one request')
        parsed = [parse_request(item, service.backends[0], service.tasks) for item in items]
        ids = service.submit(parsed)
        if wait_seconds(request, default=-1.0) == 0.0:
            return web.json_response({"ids": ids, "state": "pending"}, status=202)
        done = [await outcome(answer_id, None) for answer_id in ids]
        return web.json_response({"ids": ids, "results": [d["result"] for _, d in done]})

    async def results(request: Any) -> Any:
        answer_id = request.match_info["id"]
        try:
            status, data = await outcome(answer_id, wait_seconds(request, default=0.0))
        except KeyError:
            return error(404, f"no answer has id {answer_id!r} (never submitted, or its result was dropped)")
        return web.json_response(data, status=status)

    async def get_reward(request: Any) -> Any:  # OpenRLHF's remote reward model (kernelgym.openrlhf)
        try:
            items = reward_bodies(await body(request), service.tasks.specs)
        except KernelGymError as exc:
            raise RequestError(str(exc)) from None
        parsed = [parse_request(item, service.backends[0], service.tasks) for item in items]
        done = [await outcome(answer_id, None) for answer_id in service.submit(parsed)]
        data, status = reward_reply([EvalResult.from_dict(d["result"]) for _, d in done])
        return web.json_response(data, status=status)

    async def health(_request: Any) -> Any:
        return web.json_response(service.health())

    async def metrics(_request: Any) -> Any:
        return web.json_response(service.metrics())

    app = web.Application(middlewares=[guard], client_max_size=_MAX_BODY_BYTES)
    app.add_routes([
        web.post("/v1/evaluate", evaluate), web.post("/v1/batch", batch), web.get("/v1/results/{id}", results),
        web.get("/v1/health", health), web.get("/v1/metrics", metrics), web.post("/get_reward", get_reward),
    ])
    return app


class RunningServer:
    """A server running on a background thread; :meth:`stop` ends it (the service is the caller's to close).

    Attributes:
        url: where it listens, e.g. ``http://127.0.0.1:41233``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, runner: Any, thread: threading.Thread, url: str) -> None:
        self._loop, self._runner, self._thread, self.url = loop, runner, thread, url

    def stop(self) -> None:
        """Stop listening and end the thread."""
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen on ``host`` without a token unless only this machine can connect (a loopback address).

    Raises:
        KernelGymError: ``host`` is not loopback and ``token`` is empty; the message says what to pass.
    """
    try:
        loopback = host.lower() == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        loopback = False
    if not (token or loopback):
        raise KernelGymError(f"refusing to listen on {host!r} without a bearer token (anyone who can connect could "
                             f"submit code): pass --token or set ${TOKEN_ENV}, or listen on 127.0.0.1")


def start_in_thread(service: JudgeService, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> RunningServer:
    """Serve ``service`` from a background thread (``port=0``: a free port); returns once it listens.

    Raises:
        KernelGymError: ``host`` is not loopback and there is no token (:func:`check_exposure`).
    """
    check_exposure(host, token)
    web = _load_web()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(service, token), shutdown_timeout=_SHUTDOWN_SECONDS)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, host, port)
    loop.run_until_complete(site.start())
    bound = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, name="kernelgym-serve-http", daemon=True)
    thread.start()
    return RunningServer(loop, runner, thread, f"http://{host}:{bound}")


def serve_forever(service: JudgeService, host: str, port: int, token: str | None = None) -> None:
    """Serve ``service`` on ``host:port`` until SIGINT (Ctrl-C), SIGTERM or SIGHUP; then close it at once (see
    :meth:`JudgeService.close`: waiting requests get their ``judge_error``) and stop listening.

    Raises:
        KernelGymError: ``host`` is not loopback and there is no token (:func:`check_exposure`).
    """
    check_exposure(host, token)
    asyncio.run(_serve_until_signal(service, host, port, token))


async def _serve_until_signal(service: JudgeService, host: str, port: int, token: str | None) -> None:
    web = _load_web()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(make_app(service, token), shutdown_timeout=_SHUTDOWN_SECONDS)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        await stop.wait()
    finally:
        await loop.run_in_executor(None, service.close)
        await runner.cleanup()
