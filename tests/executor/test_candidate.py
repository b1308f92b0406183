"""Tests of kernelgym.executor.candidate: candidate processes forked by the factory, as the trusted judge drives them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.backends.store import judge_dir
from kernelgym.executor.candidate import CandidateFactory, CandidateProcess
from kernelgym.executor.sandbox import SandboxPolicy, scrubbed_environment, seccomp_unavailable
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


def test_each_candidate_is_a_new_process_leading_a_group_of_its_own_in_the_workers_session(factory: CandidateFactory):
    first, second = factory.spawn(300), factory.spawn(300)
    try:
        first.wait_ready(300)
        second.wait_ready(300)
        assert first.pid != second.pid
        assert os.getpgid(first.pid) == first.pid and os.getpgid(second.pid) == second.pid
        # in the session of whoever started the factory (the worker's): stopping that session stops them
        assert os.getsid(first.pid) == os.getsid(second.pid) == os.getsid(factory.process.pid)
    finally:
        first.close()
        second.close()
    assert not first.dir.exists()


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_process_the_candidate_detaches_dies_with_it(candidate: CandidateProcess):
    # A double fork whose middle process tries to start a session of its own: the grandchild is orphaned and
    # outlives its parent, but not its process group (setsid and setpgid are refused), which close kills.
    if seccomp_unavailable():
        pytest.skip("no seccomp filter here: a candidate's process may leave its group")
    code = (
        "import os, time\n"
        "read, write = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    try:\n"
        "        os.setsid()\n"
        "        outcome = 'left'\n"
        "    except PermissionError:\n"
        "        outcome = 'refused'\n"
        "    grandchild = os.fork()\n"
        "    if grandchild == 0:\n"
        "        time.sleep(120)\n"
        "        os._exit(0)\n"
        "    os.write(write, f'{outcome} {grandchild}'.encode())\n"
        "    os._exit(0)\n"
        "os.close(write)\n"
        "raise RuntimeError('detached: ' + os.read(read, 100).decode())\n"
    )
    reply = candidate.request(("load", code), 60)
    outcome, pid = reply["message"].split("detached: ")[1].split()[:2]
    grandchild = int(pid)
    assert outcome == "refused", reply
    assert _alive(grandchild) and os.getpgid(grandchild) == candidate.pid
    candidate.close()
    assert not _alive(grandchild)


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


def test_a_build_is_asked_of_the_judge_while_the_command_runs(candidate: CandidateProcess):
    asked = []

    def service(request: dict, seconds: float) -> dict:
        asked.append(request)
        return {"ok": False, "error": "build", "message": "refused by the judge", "log": "main.cpp:1:1: error: no"}

    candidate.build_service = service
    code = ("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
            "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        load_inline(name='anything', cpp_sources='int f();', functions=['f'], extra_cflags=['-O2'])\n")
    assert candidate.request(("load", code), 60)["ok"] is True  # nothing built at import
    reply = candidate.request(("construct", 0, [], {}), 60)  # the hooks are still there in __init__
    assert reply == {"ok": False, "error": "build", "message": "refused by the judge", "log": "main.cpp:1:1: error: no",
                     "nonce": reply["nonce"]}
    assert asked == [{"cpp_sources": ["int f();"], "device_sources": [], "functions": ["f"], "extra_cflags": ["-O2"],
                      "device_cflags": [], "extra_ldflags": [], "extra_include_paths": []}]


def test_a_build_request_under_another_commands_nonce_is_a_protocol_error(candidate: CandidateProcess):
    code = (
        "import json, os, socket, struct\n"
        "fd = next(int(n) for n in os.listdir('/proc/self/fd') if os.readlink(f'/proc/self/fd/{n}').startswith('socket:'))\n"
        "s = socket.socket(fileno=fd)\n"
        "body = json.dumps({'build': {'cpp_sources': ['int f();']}, 'nonce': '0' * 16}).encode()\n"
        "s.sendall(struct.pack('!i', len(body)) + body)\n"
        "s.detach()\n"
    )
    with pytest.raises(CandidateProtocolError):
        candidate.request(("load", code), 60)


def _landlock() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import sys\nfrom kernelgym.executor.sandbox import restrict_filesystem\n"
                            "print(restrict_filesystem(('/tmp',)))"], capture_output=True, text=True, timeout=120)
    return "landlock" in probe.stdout


def test_the_build_cache_is_read_only_to_a_candidate(candidate: CandidateProcess, cache_dir: Path):
    if not _landlock():
        pytest.skip("this kernel has no Landlock")
    target = cache_dir / "builds" / "planted.txt"
    code = f"import logging\nlogging.FileHandler({str(target)!r}, mode='w').close()\nclass ModelNew: pass\n"
    reply = candidate.request(("load", code), 60)
    assert reply["ok"] is False and "PermissionError" in reply["message"]
    assert not target.exists()


def test_a_candidate_reads_the_store_and_its_directory_but_nothing_of_the_judges(candidate: CandidateProcess, cache_dir: Path):
    if not _landlock():
        pytest.skip("this kernel has no Landlock")
    judge = judge_dir(cache_dir)
    judge.mkdir(exist_ok=True)
    paths = ["/etc/hostname", str(judge), str(cache_dir), str(candidate.dir.parent), "/root", str(cache_dir / "builds"), str(candidate.dir)]
    code = (
        "import os\n"
        "import xml.dom.minidom\n"  # a module of the standard library first imported after confinement
        "def attempt(path):\n"
        "    try:\n"
        "        open(path).read() if os.path.isfile(path) else os.listdir(path)\n"
        "        return 'read'\n"
        "    except PermissionError:\n"
        "        return 'refused'\n"
        f"raise RuntimeError('outcome: ' + ' '.join(attempt(p) for p in {paths!r}))\n"
    )
    reply = candidate.request(("load", code), 60)
    assert reply["message"].split("outcome: ")[1].split()[:7] == ["refused"] * 5 + ["read"] * 2, reply


def test_temporary_files_go_to_the_candidates_own_directory(candidate: CandidateProcess):
    # Python caches its temporary directory; the factory's (the worker's) is not writable to a candidate.
    code = "import tempfile\nraise RuntimeError('made ' + tempfile.NamedTemporaryFile(delete=False).name)\n"
    reply = candidate.request(("load", code), 60)
    assert reply["ok"] is False and f"made {candidate.dir}/" in reply["message"], reply


def test_a_hang_times_out_and_a_crash_is_reported(candidate: CandidateProcess):
    with pytest.raises(CandidateTimeout):
        candidate.request(("load", "while True:\n    pass\n"), 3)
    candidate.close()
    with pytest.raises(CandidateCrash):
        candidate.request(("ping",), 5)
    assert not candidate.dir.exists()


_PROBE = """
import os, sys
from pathlib import Path
from kernelgym.executor.candidate import prepare_factory
prepare_factory(Path(sys.argv[1]), sys.argv[2])
import torch
pid = os.fork()
if pid == 0:
    try:
        torch.empty(1, device="cpu" if sys.argv[2] == "cpp" else "cuda")
        os._exit(0 if torch.cuda._nvml_based_avail() else 3)
    except RuntimeError as exc:
        print(exc, flush=True)
        os._exit(2)
os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _probe(cache_dir: Path, backend: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _PROBE, str(cache_dir), backend], capture_output=True, text=True, timeout=600)


def test_the_factory_asks_for_devices_in_a_way_that_leaves_forks_usable(cache_dir: Path):
    # torch.utils.cpp_extension asks whether CUDA is available at import; through NVML that initializes nothing
    probe = _probe(cache_dir, "cpp")
    assert probe.returncode == 0, probe.stdout + probe.stderr


@pytest.mark.gpu
def test_a_forked_candidate_creates_its_own_cuda_context(cache_dir: Path):
    # Seen on an H100 (torch 2.11+cu130): the factory's import of cpp_extension initialized the driver and every
    # candidate failed with "Cannot re-initialize CUDA in forked subprocess".
    probe = _probe(cache_dir, "cuda")
    assert probe.returncode == 0, probe.stdout + probe.stderr


def test_timed_calls_wait_for_processes_started_ahead_and_variants_reuse_models(factory: CandidateFactory, cache_dir: Path,
                                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``judge`` asks ``quiet()`` once, after the check stage's calls and before every timed call; shape variants
    with the task's own init inputs reuse its models."""
    from kernelgym.tasks import load_suite
    from kernelgym.verifier import VerifierConfig
    from kernelgym.verifier.harness import Harness
    from kernelgym.verifier.job import JudgeJob
    from kernelgym.verifier.judge import judge
    from kernelgym.verifier.result import Status

    task = load_suite("cpu")["level1/1_ReLU"]
    job = JudgeJob(task, task.source.replace("class Model(", "class ModelNew("), "cpp",
                   VerifierConfig(rules="kernelbench", runs=10, warmup=1, kernelbench_contract=False),  # the strict judgement only
                   seeds=(1, 2, 3, 4, 5))
    events: list[str] = []
    call = Harness.call
    monkeypatch.setattr(Harness, "call", lambda self, *args, **kwargs: (events.append("call"), call(self, *args, **kwargs))[1])
    models = Harness.models
    monkeypatch.setattr(Harness, "models", lambda self, *args: (events.append("models"), models(self, *args))[1])
    started: list[CandidateProcess] = []

    def twin() -> CandidateProcess:
        started.append(factory.spawn(300))
        started[-1].wait_ready(300)
        return started[-1]

    candidate = twin()
    try:
        result = judge(job, candidate, cache_dir / "builds", tmp_path, twin=twin, quiet=lambda: events.append("quiet"))
    finally:
        for process in started:
            process.close()
    assert result.status is Status.OK, result.feedback
    assert events.count("quiet") == 1
    quiet = events.index("quiet")
    timed = [e for e in events[quiet + 1:] if e == "call"]
    assert "call" in events[:quiet] and len(timed) >= 10  # the check's calls before it, every timed call after it
    # The ReLU task's shape variants keep its init inputs (none): the check builds the models once, the timing once more.
    assert len(task.variants) >= 1 and events.count("models") == 2
