"""Every red-team sample gets its expected status with its rule named; every legit sample is ok.

Samples live in ``tests/hacks/<backend>/`` and ``tests/legit/<backend>/``; each
starts with ``# task:``, ``# expect:`` and (for hacks) ``# rule:`` lines. The
``cpp`` corpus runs here; the CUDA and Triton corpora need a GPU.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgym import Verifier

from kernelgym.verifier import Status, VerifierConfig

ROOT = Path(__file__).resolve().parents[1]
SUITE_OF = {"cpp": "cpu", "cuda": "gpu", "triton": "gpu"}


def _header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines()[:8]:
        match = re.match(r"#\s*(task|expect|rule):\s*(\S+)", line)
        if match:
            fields[match.group(1)] = match.group(2)
    return fields


def _samples(kind: str) -> list:
    params = []
    for backend in ("cpp", "cuda", "triton"):
        for path in sorted((ROOT / kind / backend).glob("*.py")):
            marks = [pytest.mark.slow] if backend == "cpp" else [pytest.mark.gpu]
            params.append(pytest.param(backend, path, id=f"{backend}/{path.stem}", marks=marks))
    return params


@pytest.fixture(scope="module")
def verifiers(cache_dir: Path):
    made: dict[str, Verifier] = {}

    def get(backend: str) -> Verifier:
        if backend not in made:
            made[backend] = Verifier(backend=backend, num_workers=2, cache_dir=cache_dir, config=VerifierConfig(runs=5, warmup=1))
        return made[backend]

    yield get
    for verifier in made.values():
        verifier.close()


def _task(backend: str, task_id: str):  # noqa: ANN202
    from kernelgym.tasks import load_suite

    return load_suite(SUITE_OF[backend])[task_id]


@pytest.mark.parametrize(("backend", "path"), _samples("hacks"))
def test_hack_is_caught(verifiers, backend: str, path: Path) -> None:
    header = _header(path)
    result = verifiers(backend).evaluate(_task(backend, header["task"]), path.read_text())
    assert result.status is Status(header["expect"]), result.feedback
    assert f"[{header['rule']}]" in result.feedback, result.feedback
    assert not result.faster or result.status is Status.OK
    assert result.score <= 0.1 if result.status is Status.INCORRECT else result.score == 0.0


@pytest.mark.parametrize(("backend", "path"), _samples("legit"))
def test_legit_kernel_is_ok(verifiers, backend: str, path: Path) -> None:
    header = _header(path)
    result = verifiers(backend).evaluate(_task(backend, header["task"]), path.read_text())
    assert result.status is Status.OK, result.feedback
    assert result.violations == ()
