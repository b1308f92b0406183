"""``kernelgym serve``: a long-lived judge holding warm workers per backend, behind a small JSON API over HTTP.

Holds:
    RequestError: a request the service cannot take (HTTP 400), with a one-line reason.
    ServiceBusy: the queue is full (HTTP 429) or the service is stopping (HTTP 503); says when to try again.
    JudgeRequest: one answer to judge, parsed from its JSON body.
    parse_request: a :class:`JudgeRequest` from a JSON body (task by suite and id, or as source text).
    config_from_dict: a :class:`VerifierConfig` from JSON overrides (nested ``reward``, ``timeouts`` too).
    JudgeService: the judge itself: one executor per backend, a bounded queue, results by id, counts.
    make_app: the aiohttp application serving a :class:`JudgeService` (the API in ``docs/serve.md``).
    RunningServer, start_in_thread: a server on a background thread (tests, notebooks).
    serve_forever: run the server in this thread until interrupted.

The service fronts ``kernelgym.Verifier`` objects that share one executor per
backend (``local`` by default, ``ray`` for a cluster), so every request may
bring its own rules preset, weights contract and budgets while the workers stay
warm. ``kernelgym.executor.remote.RemoteExecutor`` is its client. The server
library, aiohttp, is the ``serve`` extra, imported only when a server starts.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import lru_cache
from typing import Any

from kernelgym.backends import get_backend
from kernelgym.errors import KernelGymError, require_extra
from kernelgym.executor import Verifier, make_executor
from kernelgym.executor.registry import Executor, PoolSettings
from kernelgym.tasks import TaskSuite, default_backend, load_suite
from kernelgym.tasks.task import Task
from kernelgym.verifier.config import VerifierConfig
from kernelgym.verifier.feedback import conclude
from kernelgym.verifier.result import EvalResult, Status

__all__ = [
    "JudgeRequest", "JudgeService", "RequestError", "RunningServer", "ServiceBusy", "config_from_dict", "make_app",
    "parse_request", "serve_forever", "start_in_thread",
]

_MAX_BODY_BYTES = 64 * 2**20
_MAX_WAIT_SECONDS = 300.0


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


def config_from_dict(overrides: Mapping[str, Any], base: VerifierConfig | None = None) -> VerifierConfig:
    """``base`` (default settings if ``None``) with ``overrides`` applied; nested settings may be partial dicts.

    Raises:
        RequestError: an unknown setting, or a value the config refuses.

    Example:
        >>> config = config_from_dict({"rules": "kernelbench", "timeouts": {"build": 60}})
        >>> config.rules, config.timeouts.build, config.timeouts.check
        ('kernelbench', 60, 120.0)
    """
    base = base or VerifierConfig()
    known = {f.name for f in fields(VerifierConfig)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise RequestError(f"unknown config setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {}
    try:
        for name, value in overrides.items():
            current = getattr(base, name)
            values[name] = replace(current, **value) if is_dataclass(current) and isinstance(value, Mapping) else value
        return replace(base, **values)
    except (TypeError, ValueError, KernelGymError) as exc:
        raise RequestError(f"bad config: {exc}") from None


@lru_cache(maxsize=16)
def _suite(name: str) -> TaskSuite:
    return load_suite(name)


def _task(body: Mapping[str, Any]) -> Task:
    if "task" in body:
        spec = body["task"]
        if isinstance(spec, str):
            spec = {"source": spec}
        if not isinstance(spec, Mapping) or not isinstance(spec.get("source"), str):
            raise RequestError('"task" must be the task source text or an object with its "source"')
        allowed = {f.name for f in fields(Task)} - {"solutions"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise RequestError(f"unknown task field(s): {', '.join(unknown)}")
        values = {"id": "task", "name": "task", "level": 0, "problem_id": 0, **spec}
        values["variants"] = tuple(values.get("variants") or ())
        try:
            return Task(**values)
        except TypeError as exc:
            raise RequestError(f"bad task: {exc}") from None
    if "suite" in body and "task_id" in body:
        try:
            return _suite(str(body["suite"]))[str(body["task_id"])]
        except KernelGymError as exc:
            raise RequestError(str(exc)) from None
    raise RequestError('name the task with "suite" and "task_id", or give its source as "task"')


def parse_request(body: Any, default_backend_name: str) -> JudgeRequest:
    """A :class:`JudgeRequest` from a JSON body (see ``docs/serve.md``).

    Fields: ``suite`` + ``task_id``, or ``task`` (source text, or an object with ``source`` and optional
    ``id``, ``level``, ...); ``answer``; optional ``backend`` (default: the suite's, else the server's first),
    ``rules``, ``weights`` and ``config`` (any :class:`VerifierConfig` setting, budgets as ``timeouts``).

    Raises:
        RequestError: the body is not such an object.

    Example:
        >>> parse_request({"suite": "cpu", "task_id": "level1/1_ReLU", "answer": "x", "rules": "kernelbench"}, "cpp").config.rules
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
    task = _task(body)
    overrides = body.get("config") or {}
    if not isinstance(overrides, Mapping):
        raise RequestError('"config" must be an object of judge settings')
    overrides = {**overrides, **{k: body[k] for k in ("rules", "weights") if k in body}}
    backend = body.get("backend") or (default_backend(str(body["suite"])) if "suite" in body else default_backend_name)
    return JudgeRequest(task, body["answer"], str(backend), config_from_dict(overrides))


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
        **executor_options: passed to the executor (e.g. ``ray_address``).

    Raises:
        BackendUnavailableError: a backend cannot run on this machine (``local`` executor).

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
                 keep_results: int = 10_000, **executor_options: Any) -> None:
        if not backends:
            raise KernelGymError("give the service at least one backend to judge")
        if queue_size < 0:
            raise KernelGymError("the queue size must be at least 0")
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
                self._threads[request.backend].submit(self._judge, request, future)
                ids.append(answer_id)
            self._forget_old()
        return ids

    def _forget_old(self) -> None:
        while len(self._results) > self.keep_results:
            oldest, future = next(iter(self._results.items()))
            if not future.done():
                break
            del self._results[oldest]

    def _judge(self, request: JudgeRequest, future: Future[EvalResult]) -> None:
        counts = self._counts[request.backend]
        with self._lock:
            counts.queued -= 1
            counts.in_flight += 1
        start = time.perf_counter()
        try:
            result = self._verifier(request.backend, request.config).evaluate(request.task, request.answer)
        except Exception as exc:  # a failure of the service is the judge's, reported as such, never a lost answer
            result = conclude(request.task.id, request.backend, Status.JUDGE_ERROR,
                              details=[f"The judge service failed: {type(exc).__name__}: {exc}"], rules=request.config.rules)
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
        by_status: dict[str, int] = {}
        for b in per_backend.values():
            for status, count in b["by_status"].items():
                by_status[status] = by_status.get(status, 0) + count
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
        """Refuse new answers, finish those taken, and stop every worker."""
        with self._lock:
            self._stopping = True
        for threads in self._threads.values():
            threads.shutdown(wait=True)
        for executor in self._executors.values():
            executor.close()


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
        future = asyncio.wrap_future(service.future(answer_id))
        try:
            result = await asyncio.wait_for(asyncio.shield(future), timeout=wait)
        except asyncio.TimeoutError:
            return 202, {"id": answer_id, "state": "pending"}
        return 200, {"id": answer_id, "state": "done", "result": result.to_dict()}

    async def evaluate(request: Any) -> Any:
        parsed = parse_request(await body(request), service.backends[0])
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
        parsed = [parse_request(item, service.backends[0]) for item in items]
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

    async def health(_request: Any) -> Any:
        return web.json_response(service.health())

    async def metrics(_request: Any) -> Any:
        return web.json_response(service.metrics())

    app = web.Application(middlewares=[guard], client_max_size=_MAX_BODY_BYTES)
    app.add_routes([
        web.post("/v1/evaluate", evaluate), web.post("/v1/batch", batch), web.get("/v1/results/{id}", results),
        web.get("/v1/health", health), web.get("/v1/metrics", metrics),
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


def start_in_thread(service: JudgeService, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> RunningServer:
    """Serve ``service`` from a background thread (``port=0``: a free port); returns once it listens."""
    web = _load_web()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(service, token))
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, host, port)
    loop.run_until_complete(site.start())
    bound = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, name="kernelgym-serve-http", daemon=True)
    thread.start()
    return RunningServer(loop, runner, thread, f"http://{host}:{bound}")


def serve_forever(service: JudgeService, host: str, port: int, token: str | None = None) -> None:
    """Serve ``service`` on ``host:port`` until interrupted (Ctrl-C or SIGTERM)."""
    web = _load_web()
    web.run_app(make_app(service, token), host=host, port=port, print=None, handle_signals=True)
