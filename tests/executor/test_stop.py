"""Stopping the judge: a stopped command leaves nothing running, and a killed build blocks nobody.

A ``kernelgym`` command stopped with SIGTERM while its worker is still doing the one-time builds
(the precompiled header, the toolchain floor, the ATen observer) exits at once with status 130,
and no process of its (workers, factories, build sandboxes, ninja, the compilers) is left. A
torch build baton (``lock``) left in a one-time build's directory by a build that was killed
makes no later judgement wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelgym.tasks import load_suite

_ROOT = Path(__file__).resolve().parents[2]


def _processes_using(path: Path) -> dict[int, str]:
    """Live processes (not zombies) whose command line or working directory lies under ``path``: pid -> name."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()[0]
        if state != "Z" and (str(path) in cmdline or cwd.startswith(str(path))):
            found[int(entry)] = name
    return found


def test_sigterm_during_the_one_time_builds_stops_every_process(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    answer = tmp_path / "answer.py"
    answer.write_text(load_suite("cpu")["level1/1_ReLU"].solution("cpp"))
    env = {**os.environ, "KERNELGYM_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
    command = subprocess.Popen([sys.executable, "-m", "kernelgym.cli", "eval", str(answer), "--task", "level1/1_ReLU"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        compiling: dict[int, str] = {}
        while time.monotonic() < deadline and command.poll() is None:
            compiling = {pid: name for pid, name in _processes_using(cache).items() if name in ("cc1plus", "ninja", "c++", "g++")}
            if compiling:
                break
            time.sleep(0.05)
        assert compiling, "no one-time build started within 120 s"
        command.send_signal(signal.SIGTERM)
        _, err = command.communicate(timeout=30)
        assert command.returncode == 130, err
        assert "interrupted" in err
        left = _processes_using(cache)
        for _ in range(50):  # the kernel reaps what was SIGKILLed within moments
            if not left:
                break
            time.sleep(0.1)
            left = _processes_using(cache)
        assert not left, f"still running after the command stopped: {left} (compilers seen before: {compiling})"
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()


@pytest.mark.slow
def test_a_build_baton_left_by_a_killed_build_makes_no_judgement_wait(cache_dir: Path) -> None:
    from kernelgym import Verifier
    from kernelgym.backends.aten_observer import _build_dir
    from kernelgym.backends.native import floor_record, floor_stores
    from kernelgym.verifier import Status, VerifierConfig

    # torch's load_inline waits for as long as a `lock` file exists in the build directory; a build killed
    # half-way leaves it behind. Every one-time build directory gets one here, as a killed build would leave.
    batons = [_build_dir(cache_dir / "builds") / "lock"]
    floor = floor_record("cpp", floor_stores(cache_dir)[0])
    if floor is not None:
        batons.append(floor.parent / f"floor-{floor.stem.rsplit('-', 1)[1]}" / "lock")
    for baton in batons:
        baton.parent.mkdir(parents=True, exist_ok=True)
        baton.write_text("")
    task = load_suite("cpu")["level1/1_ReLU"]
    config = VerifierConfig(timing=False, check_variants=False)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        result = verifier.evaluate(task, task.solution("cpp"))
    assert result.status is Status.OK, result.feedback
