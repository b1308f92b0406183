"""Which mapped files count as the installed runtime (the judge's side of "only verified code runs")."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

from kernelgym.verifier.mapped_code import Places as _Places
from kernelgym.verifier.mapped_code import installed as _installed

LAUNCHER = "__triton_launcher" + importlib.machinery.EXTENSION_SUFFIXES[0]


def _places(tmp_path: Path) -> tuple[_Places, Path]:
    cache = tmp_path / "cache"
    (cache / "builds").mkdir(parents=True)
    candidate = tmp_path / "job1"
    candidate.mkdir()
    return _Places.of(cache / "builds", candidate), candidate


def test_the_runtime_is_installed_and_the_candidates_files_are_not(tmp_path: Path) -> None:
    places, candidate = _places(tmp_path)
    mine = candidate / "mine.so"
    mine.write_bytes(b"\x7fELF")
    assert _installed(os.path.realpath(sys.executable), places, "cpp")
    assert not _installed(str(mine), places, "cpp")
    assert not _installed(str(mine) + " (deleted)", places, "cpp")
    assert not _installed("/memfd:x (deleted)", places, "cpp")


def test_a_triton_launcher_counts_only_inside_the_candidates_own_cache(tmp_path: Path) -> None:
    places, candidate = _places(tmp_path)
    own = candidate / ".triton" / "cache" / "ab"
    own.mkdir(parents=True)
    (own / LAUNCHER).write_bytes(b"\x7fELF")
    assert _installed(str(own / LAUNCHER), places, "triton")
    assert not _installed(str(own / LAUNCHER), places, "cuda")


def test_a_link_planted_as_the_triton_cache_leads_nowhere_trusted(tmp_path: Path) -> None:
    places, candidate = _places(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / LAUNCHER).write_bytes(b"\x7fELF")
    (candidate / ".triton").mkdir()
    (candidate / ".triton" / "cache").symlink_to(elsewhere)
    assert not _installed(str(candidate / ".triton" / "cache" / LAUNCHER), places, "triton")
