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
from tests.hacks.samples import built_ahead  # noqa: F401 (read by answers_built_ahead, tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
SUITE_OF = {"cpp": "cpu", "cuda": "gpu", "triton": "gpu"}


def _header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines()[:9]:
        match = re.match(r"#\s*(task|expect|rule):\s*(\S+)", line)
        if match:
            fields[match.group(1)] = match.group(2)
    return fields


RUNTIME_DEFAULT = frozenset({"aten-fallback", "forged-message", "unverified-library", "observer-record-missing", "work-after-return"})
"""The runtime rules whose first sample the default run judges: one per defense of the worker that no other default
test reaches end to end (ATen guards, the channel, loaded libraries, the observer's record, work after return). Wrong
outputs are judged in ``tests/verifier/test_pipeline.py``; output caches and input mutation in the extended run."""
LEGIT_DEFAULT = frozenset({"openmp_relu_views", "concatenated_sources_lazy_build"})


def _samples(kind: str, expect_ok: bool = False) -> list:
    """Samples of ``kind``; hack samples expected ``ok`` (pure timing attacks) only when ``expect_ok``.

    The default run judges the first ``cpp`` sample of each static rule (rejected before any build), of the
    runtime rules in :data:`RUNTIME_DEFAULT` and the legit samples in :data:`LEGIT_DEFAULT` (each a build of
    ~20 s on 2 cores); the others are marked ``extended`` (``python -m pytest -m extended``, which CI also runs).
    """
    from kernelgym.verifier.rules import catalogue

    runtime = catalogue("runtime")
    params, seen = [], set()
    for backend in ("cpp", "cuda", "triton"):
        for path in sorted((ROOT / kind / backend).glob("*.py")):
            header = _header(path)
            if kind == "hacks" and (header.get("expect") == "ok") != expect_ok:
                continue
            marks = [pytest.mark.slow] if backend == "cpp" else [pytest.mark.gpu]
            key = (backend, header.get("rule"), header.get("expect"))
            if kind == "hacks" and (key in seen or (header.get("rule") in runtime and header.get("rule") not in RUNTIME_DEFAULT)):
                marks.append(pytest.mark.extended)
            if kind == "legit" and backend == "cpp" and path.stem not in LEGIT_DEFAULT:
                marks.append(pytest.mark.extended)
            seen.add(key)
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
    if header["rule"] != "none":  # a format error names no rule
        assert f"[{header['rule']}]" in result.feedback, result.feedback
    assert not result.faster or result.status is Status.OK
    assert result.score <= 0.1 if result.status is Status.INCORRECT else result.score == 0.0


@pytest.mark.parametrize(("backend", "path"), _samples("hacks", expect_ok=True))
def test_timing_attack_earns_no_more_than_the_honest_answer(verifiers, backend: str, path: Path) -> None:
    """A pure timing attack may pass, but its credited speedup stays within 1.5x of the honest answer's."""
    header = _header(path)
    task = _task(backend, header["task"])
    honest = verifiers(backend).evaluate(task, _honest_answer(backend, header["task"]))
    attack = verifiers(backend).evaluate(task, path.read_text())
    assert honest.status is Status.OK, honest.feedback
    assert attack.status is Status.OK, attack.feedback
    assert attack.speedup_eager is not None and honest.speedup_eager is not None
    assert attack.speedup_eager <= 1.5 * honest.speedup_eager, (attack.feedback, honest.feedback)


def _honest_answer(backend: str, task_id: str) -> str:
    suite = SUITE_OF[backend]
    return (ROOT.parent / "kernelgym" / "tasks" / "suites" / suite / "solutions" / backend / f"{task_id}.py").read_text()


@pytest.mark.parametrize(("backend", "path"), _samples("legit"))
def test_legit_kernel_is_ok(verifiers, backend: str, path: Path) -> None:
    header = _header(path)
    result = verifiers(backend).evaluate(_task(backend, header["task"]), path.read_text())
    assert result.status is Status.OK, result.feedback
    assert result.violations == ()
