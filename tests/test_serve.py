"""``kernelgym serve``: the judge service over HTTP, and the remote executor that is its client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from kernelgym.errors import KernelGymError  # noqa: E402
from kernelgym.executor import Verifier  # noqa: E402
from kernelgym.serve import JudgeService, RunningServer, start_in_thread  # noqa: E402
from kernelgym.tasks import load_suite  # noqa: E402

TASK = load_suite("cpu")["level1/1_ReLU"]
FAST = {"trials": 3, "runs": 2, "warmup": 1, "timing": False}


def _call(url: str, path: str, body: Any = None, token: str | None = None) -> tuple[int, dict[str, Any], Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    request = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


@pytest.fixture(scope="module")
def server(cache_dir: Path) -> Iterator[tuple[JudgeService, RunningServer]]:
    service = JudgeService(["cpp"], num_workers=1, cache_dir=str(cache_dir), queue_size=8)
    running = start_in_thread(service, token="s3cret")
    try:
        yield service, running
    finally:
        running.stop()
        service.close()


def test_a_bundled_answer_is_judged_through_the_remote_executor(server: tuple[JudgeService, RunningServer]) -> None:
    service, running = server
    from kernelgym.verifier import VerifierConfig

    with Verifier(backend="cpp", executor="remote", url=running.url, token="s3cret", config=VerifierConfig(**FAST)) as remote:
        judged = remote.evaluate(TASK, TASK.solution("cpp"))
        rejected = remote.evaluate(TASK, "no code here")  # decided by the static stages, here
    assert judged.status.value == "ok", judged.feedback + judged.judge_reason
    assert judged.correct and judged.task_id == TASK.id and judged.seeds
    assert rejected.status.value == "format_error"
    status, health, _ = _call(running.url, "/v1/health")
    assert status == 200 and health["status"] == "ok" and health["backends"] == ["cpp"]
    status, metrics, _ = _call(running.url, "/v1/metrics", token="s3cret")
    assert status == 200 and metrics["judged"] >= 1 and metrics["by_status"]["ok"] >= 1
    assert metrics["queued"] == 0 and metrics["in_flight"] == 0 and metrics["mean_seconds"] > 0


def test_evaluate_by_suite_and_id_with_a_rules_preset_and_results_by_id(server: tuple[JudgeService, RunningServer]) -> None:
    _, running = server
    body = {"suite": "cpu", "task_id": TASK.id, "answer": TASK.solution("cpp"), "rules": "kernelbench", "config": FAST}
    status, reply, _ = _call(running.url, "/v1/evaluate?wait=false", body, token="s3cret")
    assert status == 202 and reply["state"] == "pending"
    status, done, _ = _call(running.url, f"/v1/results/{reply['id']}?wait=120", token="s3cret")
    assert status == 200 and done["result"]["status"] == "ok" and done["result"]["rules"] == "kernelbench"
    status, batch, _ = _call(running.url, "/v1/batch", {"requests": [
        {"task": {"source": TASK.source, "id": "mine"}, "answer": "garbage"}, {**body, "answer": "no code"}]}, token="s3cret")
    assert status == 200 and [r["status"] for r in batch["results"]] == ["format_error", "format_error"]
    assert batch["results"][0]["task_id"] == "mine"


def test_a_missing_or_wrong_token_is_refused(server: tuple[JudgeService, RunningServer]) -> None:
    _, running = server
    body = {"suite": "cpu", "task_id": TASK.id, "answer": "x"}
    for token in (None, "wrong"):
        status, reply, headers = _call(running.url, "/v1/evaluate", body, token=token)
        assert status == 401 and "token" in reply["error"] and headers["WWW-Authenticate"] == "Bearer"
    with Verifier(backend="cpp", executor="remote", url=running.url, token="wrong") as remote, \
            pytest.raises(KernelGymError, match="refused the token"):
        remote.evaluate(TASK, TASK.solution("cpp"))


@pytest.mark.parametrize("body", [
    {"suite": "cpu", "task_id": "level1/nope", "answer": "x"},
    {"suite": "cpu", "task_id": TASK.id},
    {"suite": "cpu", "task_id": TASK.id, "answer": "x", "rules": "lenient"},
    {"suite": "cpu", "task_id": TASK.id, "answer": "x", "config": {"trails": 3}},
    {"suite": "cpu", "task_id": TASK.id, "answer": "x", "backend": "cuda"},
    ["not", "an", "object"],
])
def test_a_bad_request_gets_400_and_one_line(server: tuple[JudgeService, RunningServer], body: Any) -> None:
    _, running = server
    status, reply, _ = _call(running.url, "/v1/evaluate", body, token="s3cret")
    assert status == 400 and reply["error"] and "\n" not in reply["error"]


def test_a_full_queue_is_refused_with_retry_after(cache_dir: Path) -> None:
    service = JudgeService(["cpp"], num_workers=1, cache_dir=str(cache_dir), queue_size=0, max_in_flight=1)
    try:
        with start_in_thread(service) as running:
            body = {"suite": "cpu", "task_id": TASK.id, "answer": TASK.solution("cpp"), "config": FAST}
            status, first, _ = _call(running.url, "/v1/evaluate?wait=false", body)
            assert status == 202
            status, reply, headers = _call(running.url, "/v1/evaluate?wait=false", body)
            assert status in (429, 503) and int(headers["Retry-After"]) >= 1 and "full" in reply["error"]
            status, metrics, _ = _call(running.url, "/v1/metrics")
            assert metrics["queued"] + metrics["in_flight"] == 1
            status, done, _ = _call(running.url, f"/v1/results/{first['id']}?wait=300")
            assert status == 200 and done["result"]["status"] == "ok"
            assert _call(running.url, "/v1/results/unknown")[0] == 404
    finally:
        service.close()


def test_an_unreachable_server_is_a_judge_error_not_the_answers() -> None:
    with Verifier(backend="cpp", executor="remote", url="http://127.0.0.1:9") as remote:
        result = remote.evaluate(TASK, TASK.solution("cpp"))
    assert result.status.value == "judge_error" and result.score == 0.0
    assert "127.0.0.1:9" in result.judge_reason and "127.0.0.1" not in result.feedback


def test_the_remote_executor_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELGYM_SERVER", raising=False)
    with pytest.raises(KernelGymError, match="KERNELGYM_SERVER"):
        Verifier(backend="cpp", executor="remote").executor  # noqa: B018 (built on first use)


def test_eval_exits_3_when_the_judge_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgym.cli import main

    answer = tmp_path / "answer.py"
    answer.write_text(TASK.solution("cpp"))
    assert main(["eval", str(answer), "--task", TASK.id, "--server", "http://127.0.0.1:9", "--json"]) == 3
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "judge_error" and "127.0.0.1:9" in printed["judge_reason"]
