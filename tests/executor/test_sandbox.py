"""The sandbox helpers that confine workers and candidates: environment, limits, Landlock, sessions.

Each confining call runs in a child process, so this test process stays unconfined.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelgym.executor.sandbox import SandboxPolicy, kill_session, scrubbed_environment


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh Python with kernelgym importable; its stdout is the answer."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def test_the_environment_keeps_no_credentials_and_gives_private_home_and_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "do-not-leak")
    env = scrubbed_environment(tmp_path / "work", tmp_path / "cache", threads=3)
    assert "do-not-leak" not in env.values()
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path / "work")
    assert env["TORCH_EXTENSIONS_DIR"].startswith(str(tmp_path / "cache"))
    assert env["OMP_NUM_THREADS"] == "3"
    # the worker imports the same kernelgym as this process
    assert str(Path(__file__).resolve().parents[2]) in env["PYTHONPATH"].split(os.pathsep)


def test_the_allocator_thresholds_are_fixed_so_history_does_not_decide_where_buffers_come_from(tmp_path: Path) -> None:
    # A fresh glibc process serves a 1 MB block with fresh pages (mmap); one that has freed such blocks, from its
    # heap. The judge's processes start in the second state, whatever they did before (sandbox.ALLOCATOR_ENV).
    code = """
        import ctypes
        libc = ctypes.CDLL(None)
        class Info(ctypes.Structure):
            _fields_ = [(name, ctypes.c_size_t) for name in
                        ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
        libc.mallinfo2.restype = Info
        libc.malloc.restype = ctypes.c_void_p
        before = libc.mallinfo2().hblkhd
        block = libc.malloc(1 << 20)
        print(libc.mallinfo2().hblkhd - before)
        libc.free(ctypes.c_void_p(block))
    """
    env = scrubbed_environment(tmp_path / "work", tmp_path / "cache", threads=1)
    plain = {k: v for k, v in env.items() if not k.startswith("MALLOC_")}
    mapped = {name: subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                                   env=e, check=True).stdout.strip() for name, e in (("judge", env), ("plain", plain))}
    mapped = {name: int(value) for name, value in mapped.items()}
    assert mapped["plain"] >= 1 << 20  # the control: without the setting, fresh pages
    assert mapped["judge"] == 0, mapped


def test_limits_cap_file_size_and_core_dumps_and_never_raise_a_hard_limit() -> None:
    done = _run("""
        import resource
        from kernelgym.executor.sandbox import SandboxPolicy, apply_limits
        apply_limits(SandboxPolicy(memory_gb=None, file_size_gb=0.001, max_processes=512))
        print(resource.getrlimit(resource.RLIMIT_FSIZE)[0], resource.getrlimit(resource.RLIMIT_CORE)[0],
              resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)
    """)
    assert done.returncode == 0, done.stderr
    fsize, core, no_as_limit = done.stdout.split()
    assert int(fsize) == int(0.001 * 1024**3) and int(core) == 0
    assert no_as_limit == str(resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)


def test_landlock_leaves_only_the_named_directories_writable(tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    done = _run("""
        import sys
        from pathlib import Path
        from kernelgym.executor.sandbox import restrict_filesystem
        applied = restrict_filesystem((sys.argv[1],))
        print(applied)
        if applied != "unavailable":
            (Path(sys.argv[1]) / "ok.txt").write_text("fine")
            try:
                (Path(sys.argv[2]) / "escape.txt").write_text("escaped")
                print("escaped")
            except PermissionError:
                print("refused")
    """, str(inside), str(outside))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    if lines[0] == "unavailable":
        pytest.skip("this kernel has no Landlock")
    assert lines[1] == "refused"
    assert (inside / "ok.txt").read_text() == "fine" and not (outside / "escape.txt").exists()


def test_landlock_confines_reads_to_the_runtime_and_runs_nothing_the_process_wrote(tmp_path: Path) -> None:
    inside, judge = tmp_path / "inside", tmp_path / "judge"
    inside.mkdir()
    judge.mkdir()
    (judge / "record.json").write_text("the judge's")
    done = _run("""
        import os, shutil, subprocess, sys, sysconfig
        from kernelgym.executor.sandbox import restrict_filesystem, runtime_paths
        inside, judge = sys.argv[1], sys.argv[2]
        applied = restrict_filesystem((inside,), runtime_paths((os.path.dirname(inside),)))
        print(applied)

        def attempt(call):
            try:
                call()
                return "allowed"
            except PermissionError:
                return "refused"

        print(attempt(lambda: open("/etc/hostname").read()), attempt(lambda: os.listdir("/etc")),
              attempt(lambda: open(os.path.join(judge, "record.json")).read()), attempt(lambda: os.listdir(judge)))
        import xml.dom.minidom  # a module of the standard library imported after confinement
        print(attempt(lambda: os.listdir(sysconfig.get_paths()["purelib"])), attempt(lambda: open(__import__("json").__file__).read()),
              attempt(lambda: open(os.path.join(inside, "mine.txt"), "w").write("mine")))
        shutil.copy("/bin/true", os.path.join(inside, "true"))  # a copy of an installed program, written by the process
        print(attempt(lambda: subprocess.run(["/bin/true"], check=True)), attempt(lambda: subprocess.run([os.path.join(inside, "true")])))
    """, str(inside), str(judge))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines[0] == "unavailable":
        pytest.skip("this kernel has no Landlock")
    assert lines[0].endswith("reads confined")
    assert lines[1:] == ["refused refused refused refused", "allowed allowed allowed", "allowed refused"]


def test_the_runtime_a_candidate_reads_never_holds_a_private_directory(tmp_path: Path) -> None:
    from kernelgym.executor.sandbox import runtime_paths

    private = tmp_path / "cache.trusted"
    private.mkdir()
    paths = [os.path.realpath(p) for p in runtime_paths((str(private),))]
    assert os.path.realpath(sys.base_prefix) in paths and "/proc" in paths
    assert not {"/", "/etc", "/root", "/home", "/tmp", "/dev"} & set(paths)
    private_path = os.path.realpath(private)
    assert not [p for p in paths if private_path == p or private_path.startswith(p + "/") or p.startswith(private_path + "/")]


def test_kill_session_leaves_no_process_of_the_session() -> None:
    # a session leader whose child ignores SIGTERM and re-parents itself away from the leader
    leader = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "os.fork() or time.sleep(60)\ntime.sleep(60)"],
        start_new_session=True,
    )
    try:
        deadline = time.time() + 10
        sid = os.getsid(leader.pid)
        from kernelgym.executor.sandbox import _SESSION, _members

        def _session_members(sid: int) -> list[int]:
            return _members(sid, _SESSION)

        while len(_session_members(sid)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(_session_members(sid)) >= 2
        kill_session(sid)
        assert _session_members(sid) == []
    finally:
        leader.kill()
        leader.wait()


def test_a_policy_names_one_cpu_for_a_judge_by_default() -> None:
    policy = SandboxPolicy(cpu=2)
    assert (policy.cpu, policy.cpu_count) == (2, 1)


def test_the_seccomp_filter_denies_what_no_kernel_needs_and_allows_the_rest() -> None:
    done = _run("""
        import errno, os, resource
        from kernelgym.executor.sandbox import deny_syscalls
        applied = deny_syscalls()
        print(applied)

        def attempt(call):
            try:
                call()
                return "allowed"
            except OSError as exc:
                return errno.errorcode[exc.errno]

        print(attempt(lambda: os.setpriority(os.PRIO_PROCESS, 0, 5)))  # even lowering it: setpriority is denied
        print(attempt(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))))
        print(attempt(lambda: resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)))  # another process's limits
        print(attempt(lambda: os.sched_getaffinity(0)), attempt(lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))),
              attempt(lambda: os.getpriority(os.PRIO_PROCESS, 0)))
        # what it starts inherits the filter
        import subprocess, sys
        child = subprocess.run([sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, 5)"], capture_output=True)
        print(b"PermissionError" in child.stderr)
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines[0].startswith("unavailable"):
        pytest.skip(f"no seccomp filter here: {lines[0]}")
    assert lines[1:4] == ["EPERM", "EPERM", "EPERM"]
    assert lines[4] == "allowed allowed allowed"
    assert lines[5] == "True"


def test_the_seccomp_filter_allows_unix_sockets_only_and_keeps_the_process_in_its_group() -> None:
    done = _run("""
        import os, socket
        from kernelgym.executor.sandbox import deny_syscalls
        channel, other_end = socket.socketpair()  # the judge's channel: opened before the filter
        print(deny_syscalls())

        def attempt(call):
            try:
                call()
                return "allowed"
            except PermissionError:
                return "refused"

        print(attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)), attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
              attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)), attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)))
        print(attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)), attempt(lambda: socket.socketpair()[0]))
        channel.sendall(b"still open")
        print(other_end.recv(100).decode())
        print(attempt(lambda: os.setsid()), attempt(lambda: os.setpgid(0, 0)))
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines[0].startswith("unavailable"):
        pytest.skip(f"no seccomp filter here: {lines[0]}")
    assert lines[1:] == ["refused refused refused refused", "allowed allowed", "still open", "refused refused"]


def test_dropping_privileges_leaves_no_capability_and_no_new_privs() -> None:
    done = _run("""
        from kernelgym.executor.sandbox import drop_privileges
        print(drop_privileges())
        fields = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        print(" ".join(fields[k].strip() for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs")))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "0000000000000000 " * 4 + "1"


def test_the_judge_reads_a_candidates_log_without_following_links(tmp_path: Path) -> None:
    from kernelgym.executor.candidate import _log_tail

    secret = tmp_path / "outside.txt"
    secret.write_text("judge's secret")
    (tmp_path / "link.log").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.log")  # opening it must not wait for a writer
    (tmp_path / "real.log").write_text("x" * 100 + "the end")
    assert _log_tail(tmp_path / "link.log", 1000) == ""
    assert _log_tail(tmp_path / "fifo.log", 1000) == ""
    assert _log_tail(tmp_path / "missing.log", 1000) == ""
    assert _log_tail(tmp_path / "real.log", 7) == "the end"
