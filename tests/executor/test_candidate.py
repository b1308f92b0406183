"""Tests of kernelgym.executor.candidate: the candidate's own process, as the trusted judge drives it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelgym.executor.candidate import CandidateProcess
from kernelgym.executor.sandbox import SandboxPolicy, scrubbed_environment
from kernelgym.verifier.channel import CandidateCrash, CandidateProtocolError, CandidateTimeout

pytestmark = pytest.mark.slow


@pytest.fixture()
def candidate(tmp_path: Path, cache_dir: Path):
    env = scrubbed_environment(tmp_path, cache_dir, 1)
    process = CandidateProcess("cpp", cache_dir, SandboxPolicy(memory_gb=8.0), env, tmp_path)
    process.wait_ready(300)
    yield process
    process.close()


def test_it_answers_loads_and_reports_its_process(candidate: CandidateProcess):
    assert candidate.request(("ping",), 30)["ok"] is True
    reply = candidate.request(("load", "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"), 60)
    assert reply["ok"] and "ModelNew" in reply["mro"] and reply["state"] == []
    state = candidate.process_state()
    assert int(state["threads"]) >= 1 and state["affinity"] and "RLIMIT_AS" in state
    assert candidate.cpu_seconds() > 0.0


def test_an_unsolicited_message_is_a_protocol_error(candidate: CandidateProcess):
    code = (
        "import json, socket, sys\n"
        "s = socket.socket(fileno=int(sys.argv[1]))\n"
        "import struct\n"
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
    assert not Path(f"/proc/{candidate.pid}").exists() or os.waitpid(candidate.pid, os.WNOHANG) == (0, 0)
