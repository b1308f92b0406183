"""Tests of kernelgym.executor.candidate: candidate processes forked by the factory, as the trusted judge drives them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgym.executor.candidate import CandidateFactory, CandidateProcess
from kernelgym.executor.sandbox import SandboxPolicy, scrubbed_environment
from kernelgym.verifier.channel import CandidateCrash, CandidateProtocolError, CandidateTimeout

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def factory(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path):
    directory = tmp_path_factory.mktemp("candidates")
    made = CandidateFactory("cpp", cache_dir, SandboxPolicy(memory_gb=8.0), scrubbed_environment(directory, cache_dir, 1), directory)
    yield made
    made.close()


@pytest.fixture()
def candidate(factory: CandidateFactory):
    process = factory.spawn(300)
    process.wait_ready(300)
    yield process
    process.close()


def test_each_candidate_is_a_new_process_in_a_session_of_its_own(factory: CandidateFactory):
    first, second = factory.spawn(300), factory.spawn(300)
    try:
        first.wait_ready(300)
        second.wait_ready(300)
        assert first.pid != second.pid
        assert os.getsid(first.pid) == first.pid and os.getsid(second.pid) == second.pid
    finally:
        first.close()
        second.close()
    assert not first.dir.exists()


def test_it_answers_loads_and_reports_its_process(candidate: CandidateProcess):
    assert candidate.request(("ping",), 30)["ok"] is True
    reply = candidate.request(("load", "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"), 60)
    assert reply["ok"] and "ModelNew" in reply["mro"] and reply["state"] == []
    state = candidate.process_state()
    assert int(state["threads"]) >= 1 and state["affinity"] and "RLIMIT_AS" in state
    assert candidate.cpu_seconds() > 0.0


def test_an_unsolicited_message_is_a_protocol_error(candidate: CandidateProcess):
    code = (
        "import json, os, socket, struct\n"
        "fd = next(int(n) for n in os.listdir('/proc/self/fd') if os.readlink(f'/proc/self/fd/{n}').startswith('socket:'))\n"
        "s = socket.socket(fileno=fd)\n"
        "body = json.dumps({'ok': True}).encode()\n"
        "s.sendall(struct.pack('!i', len(body)) + body)\n"
        "s.detach()\n"
        "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    )
    with pytest.raises(CandidateProtocolError):
        candidate.request(("load", code), 60)


def test_a_hang_times_out_and_a_crash_is_reported(candidate: CandidateProcess):
    with pytest.raises(CandidateTimeout):
        candidate.request(("load", "while True:\n    pass\n"), 3)
    candidate.close()
    with pytest.raises(CandidateCrash):
        candidate.request(("ping",), 5)
    assert not candidate.dir.exists()
