"""``kernelgym serve``: the judge service over HTTP, and the remote executor that is its client."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from kernelgym.errors import KernelGymError  # noqa: E402
from kernelgym.executor import Verifier  # noqa: E402
from kernelgym.serve import JudgeService, RunningServer, ServedTasks, start_in_thread  # noqa: E402
from kernelgym.tasks import load_suite  # noqa: E402

TASK = load_suite("cpu")["level1/1_ReLU"]
FAST = {"trials": 3, "runs": 2, "warmup": 1, "timing": False}
REPO = Path(__file__).resolve().parents[1]


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


def _hostile_source(marker: Path) -> str:
    """A task whose program writes ``marker`` at import (refused where it runs: in a sandbox, as an answer would be)."""
    return f"import pathlib\npathlib.Path({str(marker)!r}).write_text('written by the task')\n" + TASK.source


def test_a_task_source_not_served_runs_only_sandboxed(server: tuple[JudgeService, RunningServer], tmp_path: Path) -> None:
    _, running = server
    marker = tmp_path / "written-by-the-task"
    hostile = {"task": {"source": _hostile_source(marker), "id": "mine"}, "answer": TASK.solution("cpp"), "config": FAST}
    for path, body in (("/v1/evaluate", hostile), ("/v1/batch", {"requests": [hostile]})):
        status, reply, _ = _call(running.url, path, body, token="s3cret")
        result = reply["result"] if "result" in reply else reply["results"][0]
        assert status == 200 and result["status"] == "judge_error" and result["task_id"] == "mine"
        assert "PermissionError" in result["judge_reason"] and "\n" not in result["judge_reason"]
    assert not marker.exists()


def test_a_sent_task_is_judged_by_the_servers_copy_of_it() -> None:
    loose = ServedTasks().task({"task": {"source": TASK.source, "id": "mine", "atol": 1e30, "rtol": 1e30, "variants": []}})
    assert (loose.id, loose.atol, loose.rtol, loose.variants) == ("mine", TASK.atol, TASK.rtol, TASK.variants)
    assert loose.source == TASK.source and loose.suite == "cpu" and not loose.sandboxed
    edited = ServedTasks().task({"task": {"source": TASK.source + "\n# edited\n", "id": "edited"}})
    assert edited.id == "edited" and edited.sandboxed  # any other source: judged, its program run sandboxed only
    with pytest.raises(KernelGymError, match="--suite"):
        ServedTasks().task({"suite": str(REPO / "kernelgym/tasks/suites/cpu"), "task_id": TASK.id})


def test_a_client_sending_a_task_file_the_server_does_not_serve_gets_it_judged_sandboxed(
        server: tuple[JudgeService, RunningServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgym.cli import main

    _, running = server
    monkeypatch.setenv("KERNELGYM_SERVE_TOKEN", "s3cret")
    task_file, answer = tmp_path / "my_task.py", tmp_path / "answer.py"
    task_file.write_text(_hostile_source(tmp_path / "written-by-the-task"))
    answer.write_text(TASK.solution("cpp"))
    assert main(["eval", str(answer), "--task", str(task_file), "--server", running.url, "--no-timing", "--json"]) == 3
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"] == "judge_error" and printed["judge_reason"].startswith("The task's program failed")
    assert not (tmp_path / "written-by-the-task").exists()
    own_copy = tmp_path / "1_ReLU.py"  # the served task's program with a line of its own: judged, sandboxed
    own_copy.write_text(TASK.source + "\n# mine\n")
    assert main(["eval", str(answer), "--task", str(own_copy), "--server", running.url, "--no-timing"]) == 0


@pytest.mark.parametrize(("config", "field"), [
    ({"atol": 1e30}, "atol"),
    ({"rtol": 1.0}, "rtol"),
    ({"low_precision_tol": 0.5}, "low_precision_tol"),
    ({"runs": 100_000_000}, "runs"),
    ({"trials": 10**6}, "trials"),
    ({"warmup": 10**6}, "warmup"),
    ({"timeouts": {"build": 1e5}}, "timeouts.build"),
    ({"timeouts": {"check": 1e5, "time": 1e5}}, "timeouts.check"),
    ({"timeouts": {"ceiling": 1e5}}, "timeouts.ceiling"),
    ({"memory_limit_gb": 1e6}, "memory_limit_gb"),
    ({"check_variants": False}, "check_variants"),
    ({"roofline_bandwidth_gbs": 1e9}, "roofline_bandwidth_gbs"),
    ({"seed": 0}, "seed"),  # the answer would know its trial inputs
    ({"runs": "100"}, "runs"),
])
def test_a_setting_out_of_bounds_gets_400_naming_it(server: tuple[JudgeService, RunningServer], config: dict[str, Any],
                                                    field: str) -> None:
    _, running = server
    body = {"suite": "cpu", "task_id": TASK.id, "answer": TASK.solution("cpp"), "config": config}
    status, reply, _ = _call(running.url, "/v1/evaluate", body, token="s3cret")
    assert status == 400 and field in reply["error"] and "\n" not in reply["error"], reply


def test_a_poll_without_wait_is_done_once_the_verdict_is_in(server: tuple[JudgeService, RunningServer]) -> None:
    service, running = server
    body = {"suite": "cpu", "task_id": TASK.id, "answer": TASK.solution("cpp"), "config": FAST}
    status, reply, _ = _call(running.url, "/v1/evaluate?wait=false", body, token="s3cret")
    assert status == 202
    verdict = service.future(reply["id"]).result(timeout=300)
    for query in ("", "?wait=false", "?wait=0"):
        status, done, _ = _call(running.url, f"/v1/results/{reply['id']}{query}", token="s3cret")
        assert status == 200 and done["state"] == "done" and done["result"]["status"] == verdict.status.value == "ok"


def test_listening_beyond_loopback_needs_a_token(server: tuple[JudgeService, RunningServer]) -> None:
    service, _ = server
    with pytest.raises(KernelGymError, match="--token"):
        start_in_thread(service, host="0.0.0.0")
    env = {k: v for k, v in os.environ.items() if k != "KERNELGYM_SERVE_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "kernelgym.cli", "serve", "--host", "0.0.0.0", "--no-warm-up"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False)
    assert done.returncode == 2 and "--token" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _processes() -> list[tuple[int, str, int, list[str]]]:
    """Every process: pid, state (``Z``: exited, not reaped yet), session id, command line."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, IndexError):
            continue
        if proc.name.isdigit():
            found.append((int(proc.name), stat[0], int(stat[3]), cmdline))
    return found


def _worker_processes(owner: int) -> dict[int, str]:
    """Live processes of the workers ``owner`` started and of what they forked, by pid: each names its work dir."""
    work_dirs = {str(d) for d in Path(tempfile.gettempdir()).glob("kernelgym-worker-*")
                 if (d / "owner.pid").is_file() and (d / "owner.pid").read_text().strip() == str(owner)}
    return {pid: next(a for a in cmdline if a in work_dirs)
            for pid, state, _, cmdline in _processes() if state != "Z" and work_dirs.intersection(cmdline)}


def test_sigterm_stops_a_served_judge_and_its_workers(cache_dir: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "kernelgym.cli", "serve", "--port", str(port), "--workers", "1", "--no-warm-up",
         "--cache-dir", str(cache_dir)], cwd=REPO, env={k: v for k, v in os.environ.items() if k != "KERNELGYM_SERVE_TOKEN"},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1500):  # until it listens (it imports the package first)
            with contextlib.suppress(OSError):
                if _call(url, "/v1/health")[0] == 200:
                    break
            assert server.poll() is None, server.communicate()[1]
            time.sleep(0.2)
        else:
            pytest.fail("the server did not start listening")
        body = {"suite": "cpu", "task_id": TASK.id, "answer": TASK.solution("cpp"), "config": FAST}
        status, done, _ = _call(url, "/v1/evaluate", body)
        assert status == 200 and done["result"]["status"] == "ok"
        # Answers never built before: each a build of many seconds, which the stop must not wait for.
        fresh = [{**body, "answer": TASK.solution("cpp").replace("<torch/extension.h>", f"<torch/extension.h>\n// {time.time_ns()}-{i}")}
                 for i in range(3)]
        status, _, _ = _call(url, "/v1/batch?wait=false", {"requests": fresh})
        assert status == 202
        for _ in range(600):
            if _call(url, "/v1/metrics")[1]["in_flight"]:
                break
            time.sleep(0.1)
        workers = _worker_processes(server.pid)
        sessions = set(workers)  # each worker leads a session: its builds and candidates are in it
        assert workers, "the judge's worker should be running"
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)  # a few seconds: it never waits on an answer's builds or budgets
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0 and "Traceback" not in stderr, stderr
    assert not [(pid, cmd) for pid, state, session, cmd in _processes() if state != "Z" and session in sessions]
    assert not any(Path(work_dir).exists() for work_dir in workers.values())


def test_openrlhf_s_remote_reward_call_is_answered_with_each_query_s_score(server: tuple[JudgeService, RunningServer]) -> None:
    """As OpenRLHF's ``remote_rm_fn`` calls ``--remote_rm_url``: queries are prompt + response, labels name tasks."""
    _, running = server
    prompt = "Write a faster ReLU.\n```python\n" + TASK.source + "\n```\n"
    body = {"query": [prompt + "```python\n" + TASK.solution("cpp") + "\n```", prompt + "I cannot."],
            "prompts": [prompt, prompt], "labels": [f"cpu:{TASK.id}", TASK.id]}
    status, reply, _ = _call(running.url, "/get_reward", body, token="s3cret")
    assert status == 200, reply
    assert reply["extra_logs"]["status"] == ["ok", "format_error"]  # the prompt's own reference code was cut off
    assert reply["rewards"] == reply["scores"] and reply["rewards"][0] > reply["rewards"][1]
    status, refused, _ = _call(running.url, "/get_reward", {"query": ["x"]}, token="s3cret")
    assert status == 400 and "labels" in refused["error"]
