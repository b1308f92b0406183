"""Tasks a request sends as source to ``kernelgym serve``: judged with their program run sandboxed, never in the judge.

Each hostile task program below tries one thing against the server (write the judge's ``.trusted``
directory, read ``/etc/shadow``, send a datagram, leave a process behind, hand back an object that
is not data, a tensor larger than the judge takes or values nested without end, hang, crash). Each request gets a one-line
``judge_error`` naming the task's failure, and leaves nothing behind: no file in the judge's
directory, no process, a server that judges the next honest request ``ok``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from kernelgym.backends.store import judge_dir  # noqa: E402
from kernelgym.serve import JudgeService, RequestError, RunningServer, ServedTasks, start_in_thread  # noqa: E402
from kernelgym.tasks import load_suite  # noqa: E402

from .processes import left_behind

TASK = load_suite("cpu")["level1/1_ReLU"]
WEIGHTED = load_suite("cpu")["level2/1_Linear_ReLU"]
FAST = {"trials": 3, "runs": 2, "warmup": 1, "timing": False}
ORPHAN = "kg-task-orphan"
PORT = 47293  # where the datagram task sends


def _task(prelude: str = "", inputs: str = "x = torch.randn(batch_size, dim)\n    return [x]", forward: str = "torch.relu(x)") -> str:
    """A ReLU task program of its own (not the served one), with ``prelude`` run at import."""
    return (f"import os\nimport torch\nfrom torch import nn\n{prelude}\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, x):\n        return {forward}\n\n\n"
            "batch_size = 16\ndim = 4096\n\n\n"
            f"def get_inputs():\n    {inputs}\n\n\ndef get_init_inputs():\n    return []\n")


def _hostile(cache: Path, token: str) -> dict[str, str]:
    planted = judge_dir(cache) / f"planted-{token}"
    return {
        "writes the judge's directory": _task(f"open({str(planted)!r}, 'w').write('written by the task')"),
        "reads /etc/shadow": _task("raise RuntimeError('read: ' + open('/etc/shadow').read())"),
        "sends a datagram": _task(f"import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'{token}', ('127.0.0.1', {PORT}))"),
        "hands back an object": _task("class Payload:\n    def __reduce__(self):\n        return (os.system, ('true',))",
                                      inputs="return [torch.randn(batch_size, dim), Payload()]"),
        "hands back a huge tensor": _task(inputs="return [torch.zeros(1).expand(2**40)]"),
        "hands back values nested deep": _task(inputs="v = 1\n    for _ in range(100):\n        v = [v]\n    return [torch.randn(batch_size, dim), v]"),
        "hangs": _task("while True:\n    pass"),
        "crashes": _task("import signal\nos.kill(os.getpid(), signal.SIGSEGV)"),
    }


def _call(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url + "/v1/evaluate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=300) as response:
        return response.status, json.loads(response.read())


@pytest.fixture(scope="module")
def server(cache_dir: Path) -> Iterator[RunningServer]:
    service = JudgeService(["cpp"], num_workers=1, cache_dir=str(cache_dir), queue_size=8)
    running = start_in_thread(service)
    try:
        yield running
    finally:
        running.stop()
        service.close()


def test_a_sent_task_is_sandboxed_unless_it_is_a_served_one() -> None:
    served = ServedTasks().task({"task": {"source": TASK.source, "id": "mine"}})
    sent = ServedTasks().task({"task": {"source": _task(), "id": "mine"}})
    assert not served.sandboxed and served.suite == "cpu"
    assert sent.sandboxed and sent.id == "mine" and sent.source == _task()
    with pytest.raises(RequestError, match="sandboxed"):  # no request can say its task is to be trusted
        ServedTasks().task({"task": {"source": _task(), "sandboxed": False}})


def built_ahead(suite: Mapping[str, Any], items: Sequence[pytest.Item]) -> list[tuple[Any, str]]:
    """The answers this module judges, built before the first test (``answers_built_ahead``, ``tests/conftest.py``)."""
    return [(suite[task_id], suite[task_id].solution("cpp")) for task_id in (TASK.id, WEIGHTED.id)]


@pytest.mark.parametrize(("forward", "status"), [("torch.relu(x)", "ok"), ("torch.relu(x) * 2", "incorrect")])
def test_a_sent_task_is_judged_in_a_sandbox(server: RunningServer, forward: str, status: str) -> None:
    body = {"task": {"source": _task(forward=forward), "id": "mine"}, "answer": TASK.solution("cpp"), "config": FAST}
    code, reply = _call(server.url, body)
    result = reply["result"]
    assert code == 200 and result["status"] == status, result["feedback"] + result["judge_reason"]
    assert result["task_id"] == "mine"


def test_a_sent_task_with_weights_is_checked_with_them_redrawn_and_timed(server: RunningServer) -> None:
    # Its weights are built in the task's process, handed over, redrawn here in one trial; its reference timed in a twin.
    source = WEIGHTED.source + "\n# a copy of my own\n"
    body = {"task": {"source": source, "variants": list(WEIGHTED.variants)}, "answer": WEIGHTED.solution("cpp"),
            "config": {**FAST, "timing": True}}
    code, reply = _call(server.url, body)
    result = reply["result"]
    assert code == 200 and result["status"] == "ok", result["feedback"] + result["judge_reason"]
    assert result["speedup_eager"] and result["ref_compile_ms"] is None and "weights-not-redrawn" not in result["flags"]


def test_a_hostile_task_gets_a_one_line_reason_and_leaves_nothing_behind(server: RunningServer, cache_dir: Path) -> None:
    token = secrets.token_hex(8)
    config = {**FAST, "timeouts": {"check": 5}}
    reasons = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", PORT))
        listener.setblocking(False)
        for attack, source in _hostile(cache_dir, token).items():
            code, reply = _call(server.url, {"task": source, "answer": TASK.solution("cpp"), "config": config})
            result = reply["result"]
            assert code == 200 and result["status"] == "judge_error", (attack, result)
            reasons[attack] = result["judge_reason"]
        with pytest.raises(BlockingIOError):
            listener.recv(100)
    for attack, reason in reasons.items():
        assert reason.startswith("The task's program failed: ") and "\n" not in reason, (attack, reason)
    assert "did not finish within" in reasons["hangs"] and "SIGSEGV" in reasons["crashes"]
    assert "not plain data" in reasons["hands back an object"] and "GiB" in reasons["hands back a huge tensor"]
    assert "nested deeper" in reasons["hands back values nested deep"]
    assert not list(judge_dir(cache_dir).glob(f"planted-{token}*"))
    shadow = Path("/etc/shadow").read_text().splitlines()[:1] if os.access("/etc/shadow", os.R_OK) else []
    assert not [line for line in shadow if line and line in json.dumps(reasons)]
    for variant in ({"__task__": 1}, {"Model": 1}, {"undefined": 1}):  # a request's shapes set module constants only
        code, reply = _call(server.url, {"task": {"source": _task(), "variants": [variant]}, "answer": TASK.solution("cpp"),
                                         "config": FAST})
        assert reply["result"]["status"] == "judge_error" and "module constants" in reply["result"]["judge_reason"]
    code, reply = _call(server.url, {"task": _task(), "answer": TASK.solution("cpp"), "config": FAST})
    assert reply["result"]["status"] == "ok", reply["result"]


def test_a_process_a_sent_task_starts_is_killed_with_its_job(server: RunningServer) -> None:
    orphan = (f"import ctypes\nif os.fork() == 0:\n    ctypes.CDLL(None).prctl(15, b'{ORPHAN}')\n    import time\n"
              "    time.sleep(300)\n    os._exit(0)")
    body = {"task": _task(orphan), "answer": TASK.solution("cpp"), "config": FAST}
    with ThreadPoolExecutor(1) as pool:
        judged = pool.submit(_call, server.url, body)
        seen = False
        while not judged.done():  # the process it forked, seen while the answer is judged
            seen = seen or bool(left_behind(ORPHAN))
            time.sleep(0.01)
        code, reply = judged.result()
    assert code == 200 and reply["result"]["status"] == "ok" and seen, reply["result"]
    deadline = time.monotonic() + 30  # killed before the verdict was sent; a killed process may take a moment to exit
    while left_behind(ORPHAN) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_behind(ORPHAN) == []
