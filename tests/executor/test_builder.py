"""The build sandbox: one confined process per build, started ahead where builds target a device (slow: compiles)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelgym.backends.native import BuildError
from kernelgym.backends.trusted_build import BuildPlan
from kernelgym.executor.builder import SandboxedCompile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("c++") is None or shutil.which("ninja") is None, reason="needs c++ and ninja"),
]

_SOURCE = "int answer() { return 42; }"


def _plan(source: str, name: str) -> BuildPlan:
    # No torch headers and no bindings: a library is built (never imported) in about a second.
    return BuildPlan(key=name, module=name, arguments={"cpp_sources": [source], "no_implicit_headers": True})


def test_a_sandbox_started_ahead_builds_and_another_waits_after_it(tmp_path: Path) -> None:
    compile_apart = SandboxedCompile("torch.utils.cpp_extension", ahead=True)
    try:
        first = compile_apart.waiting
        assert first is not None and first.poll() is None  # started before any plan, waiting for one
        (tmp_path / "a").mkdir()
        compile_apart(_plan(_SOURCE, "kg_sandbox_a"), tmp_path / "a", 300)
        assert first.returncode == 0  # that one built it, and exited
        assert list((tmp_path / "a").glob("kg_sandbox_a*.so"))
        second = compile_apart.waiting
        assert second is not None and second is not first and second.poll() is None
        (tmp_path / "b").mkdir()
        with pytest.raises(BuildError) as failed:
            compile_apart(_plan("int answer() { return }", "kg_sandbox_b"), tmp_path / "b", 300)
        assert "error" in failed.value.log
        assert second.returncode == 3  # did not compile: the sources', not the judge's failure
    finally:
        compile_apart.close()
    assert compile_apart.waiting is None and second.poll() is not None


def test_without_ahead_each_build_starts_its_own_sandbox(tmp_path: Path) -> None:
    compile_apart = SandboxedCompile("torch.utils.cpp_extension")
    assert compile_apart.waiting is None
    compile_apart(_plan(_SOURCE, "kg_sandbox_c"), tmp_path, 300)
    assert list(tmp_path.glob("kg_sandbox_c*.so")) and compile_apart.waiting is None
