"""The openai agent against a small OpenAI-compatible HTTP server on loopback (real client code path)."""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kernelgym.agents.base import AgentError, AgentRequest, Exchange, make_agent
from kernelgym.agents.openai_agent import OpenAIAgent
from kernelgym.bench import SUMMARY_FILE, add_bench_arguments, bench_main, read_attempts
from kernelgym.envs.prompt import build_prompt
from kernelgym.tasks import load_suite

SUITE = load_suite("cpu")
TASK_IN_PROMPT = re.compile(r"\(task (level\d+/\w+)\)")
MODEL_ID = "fake-kernel-coder"


@dataclass
class FakeChatServer:
    """An OpenAI-compatible chat server: answers with the bundled cpp solution of the task named in the prompt.

    ``answer(task_id, messages)`` may replace that policy; ``fail_next`` makes the next POSTs fail
    with ``fail_status``; every request is recorded as ``(method, path, headers, body)``.
    """

    answer: Callable[[str, list[dict[str, str]]], str] | None = None
    fail_next: int = 0
    fail_status: int = 503
    barrier: threading.Barrier | None = None
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path, dict(self.headers), None))
                if self.path == "/v1/models":
                    self._reply(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
                else:
                    self._reply(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(("POST", self.path, dict(self.headers), body))
                if self.path != "/v1/chat/completions":
                    self._reply(404, {"error": {"message": "not found"}})
                    return
                if server.fail_next > 0:
                    server.fail_next -= 1
                    self._reply(server.fail_status, {"error": {"message": "try again later"}})
                    return
                if server.barrier is not None:
                    server.barrier.wait()  # raises (-> no reply) unless requests arrive together
                match = TASK_IN_PROMPT.search(body["messages"][1]["content"])
                if match is None:
                    self._reply(400, {"error": {"message": "no task id in the prompt"}})
                    return
                task_id = match.group(1)
                if server.answer is not None:
                    content = server.answer(task_id, body["messages"])
                else:
                    content = f"Here it is.\n```python\n{SUITE[task_id].solution('cpp')}\n```\n"
                content = "<think>first idea:\n```python\nclass ModelNew: pass\n```\n</think>\n" + content
                self._reply(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                })

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def posts(self) -> list[dict[str, Any]]:
        return [body for method, _, _, body in self.requests if method == "POST"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    fake = FakeChatServer()
    yield fake
    fake.close()


def request(task_id: str = "level1/1_ReLU", **kwargs: Any) -> AgentRequest:
    task = SUITE[task_id]
    return AgentRequest(task=task, backend="cpp", prompt=build_prompt(task, "C++"), **kwargs)


def test_sends_an_openai_chat_request_and_returns_the_answer(server: FakeChatServer) -> None:
    agent = make_agent("openai", base_url=server.url, temperature=0.3, top_p=0.9, max_tokens=1024,
                       api_key="sk-test", extra_body={"top_k": 20})
    answers = agent.act([request(seed=11), request("level1/2_Sigmoid", sample=1, seed=12)])
    assert answers[0].strip().startswith("Here it is.")  # the <think> block was stripped
    assert SUITE["level1/2_Sigmoid"].solution("cpp") in answers[1]
    assert [(m, p) for m, p, _, _ in server.requests[:1]] == [("GET", "/v1/models")]
    bodies = sorted(server.posts(), key=lambda b: b["seed"])
    assert [b["seed"] for b in bodies] == [11, 12]
    for body in bodies:
        assert body["model"] == MODEL_ID
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["n"], body["top_k"]) == (0.3, 0.9, 1024, 1, 20)
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        assert "ModelNew" in body["messages"][1]["content"]
    headers = [h for method, _, h, _ in server.requests if method == "POST"]
    assert all(h["Authorization"] == "Bearer sk-test" for h in headers)


def test_multi_turn_history_becomes_assistant_and_user_messages(server: FakeChatServer) -> None:
    agent = OpenAIAgent(base_url=server.url, model="given-model", api_key="")
    history = (Exchange("first try", "error: it did not compile"), Exchange("second try", "incorrect output"))
    agent.act([request(history=history, turn=3)])
    (method, _, headers, body), = server.requests  # no /models lookup: the model was given
    assert method == "POST" and body["model"] == "given-model" and "Authorization" not in headers
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == "first try"
    assert "it did not compile" in body["messages"][3]["content"]
    assert "incorrect output" in body["messages"][5]["content"]


def test_transient_failures_are_retried(server: FakeChatServer) -> None:
    server.fail_next = 2
    agent = OpenAIAgent(base_url=server.url, model="m", retries=2, backoff=0.0)
    assert "ModelNew" in agent.act([request()])[0]
    assert len(server.posts()) == 3


def test_gives_up_after_the_retries(server: FakeChatServer) -> None:
    server.fail_next = 5
    agent = OpenAIAgent(base_url=server.url, model="m", retries=1, backoff=0.0)
    with pytest.raises(AgentError, match="failed 2 times.*HTTP 503"):
        agent.act([request()])


def test_a_refused_request_is_not_retried(server: FakeChatServer) -> None:
    server.fail_next, server.fail_status = 5, 400
    agent = OpenAIAgent(base_url=server.url, model="m", retries=3, backoff=0.0)
    with pytest.raises(AgentError, match="refused.*HTTP 400"):
        agent.act([request()])
    assert len(server.posts()) == 1


def test_an_unreachable_endpoint_raises(server: FakeChatServer) -> None:
    url = server.url
    server.close()
    agent = OpenAIAgent(base_url=url, model="m", retries=1, backoff=0.0, timeout=5)
    with pytest.raises(AgentError, match="failed 2 times"):
        agent.act([request()])


def test_requests_are_sent_concurrently(server: FakeChatServer) -> None:
    server.barrier = threading.Barrier(3, timeout=10)  # the server answers only when 3 requests are in flight
    agent = OpenAIAgent(base_url=server.url, model="m", concurrency=3, retries=0)
    answers = agent.act([request(sample=i, seed=i) for i in range(3)])
    assert len(answers) == 3 and all("ModelNew" in a for a in answers)


def test_bad_options_are_rejected() -> None:
    with pytest.raises(AgentError, match="takes no option 'temprature'"):
        make_agent("openai", temprature=0.5)
    with pytest.raises(AgentError):
        OpenAIAgent(concurrency=0)


@pytest.mark.extended
@pytest.mark.slow
def test_bench_with_the_openai_agent_against_a_loopback_server(tmp_path: Path) -> None:
    sigmoid_turns: list[list[dict[str, str]]] = []

    def answer(task_id: str, messages: list[dict[str, str]]) -> str:
        # Sigmoid gets a wrong first answer, then the solution once it has seen feedback.
        if task_id == "level1/2_Sigmoid":
            sigmoid_turns.append(messages)
            if len(messages) == 2:
                return "I would rather not write code today."
        return f"```python\n{SUITE[task_id].solution('cpp')}\n```"

    fake = FakeChatServer(answer=answer)
    try:
        parser = add_bench_arguments(argparse.ArgumentParser())
        args = parser.parse_args([
            "--suite", "cpu", "--agent", "openai", "--base-url", fake.url, "--limit", "2", "-k", "1",
            "--turns", "2", "--success-speedup", "0", "--temperature", "0.2", "--max-tokens", "2048",
            "--concurrency", "2", "--runs", "3", "--warmup", "1", "--no-plots", "--quiet",
            "--out", str(tmp_path / "run"),
        ])
        assert bench_main(args) == 0
    finally:
        fake.close()

    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    metrics = summary["metrics"]
    assert summary["agent"] == "openai" and summary["task_ids"] == ["level1/1_ReLU", "level1/2_Sigmoid"]
    assert metrics["first_turn"]["pass_at_1"] == 0.5
    assert metrics["best_turn"]["pass_at_1"] == 1.0
    assert [m["pass_at_1"] for m in metrics["per_turn"]] == [0.5, 1.0]
    assert summary["attempts"] == 3 and summary["complete"]

    records = read_attempts(tmp_path / "run" / "attempts.jsonl")
    assert [(r["task_id"], r["turn"], r["status"]) for r in sorted(records, key=lambda r: (r["task_id"], r["turn"]))] == [
        ("level1/1_ReLU", 1, "ok"), ("level1/2_Sigmoid", 1, "format_error"), ("level1/2_Sigmoid", 2, "ok"),
    ]
    posts = fake.posts()
    assert len(posts) == 3
    assert all(p["model"] == MODEL_ID and p["temperature"] == 0.2 and p["max_tokens"] == 2048 for p in posts)
    assert len({p["seed"] for p in posts}) == 3
    first, second = sigmoid_turns
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"].strip() == "I would rather not write code today."
    format_feedback = next(r["feedback"] for r in records if r["status"] == "format_error")
    assert format_feedback.strip()[:40] in second[3]["content"]
