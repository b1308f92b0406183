"""Answers written the way LLMs write them (builds in ``__init__``, failing builds with a fallback, several modules,
builds keyed on constructor arguments, builds at the first call): each build is made once, outside the check and
time stages, and a slow build never holds up another answer's verdict.

Each sample starts with ``# task:``, ``# rules:`` and ``# expect:`` lines. A nonce is added to every sample's
sources, so the builds a test counts are its own (the session shares one build cache).
"""

from __future__ import annotations

import re
import secrets
from concurrent.futures import as_completed
from dataclasses import replace
from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.backends.cpp import CppBackend
from kernelgym.backends.store import ExtensionStore
from kernelgym.executor.local import LocalExecutor
from kernelgym.executor.registry import PoolSettings
from kernelgym.tasks import load_task_file
from kernelgym.verifier import Status, VerifierConfig

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).parent / "cpp"


def _sample(name: str) -> tuple[dict[str, str], str]:
    """A sample's header fields and its text, its C++ sources made unique to this call."""
    text = (SAMPLES / f"{name}.py").read_text()
    fields = dict(re.findall(r"^#\s*(task|rules|expect):\s*(\S+)", text, re.M))
    return fields, text.replace("#include <torch/extension.h>", f"#include <torch/extension.h>\n// {secrets.token_hex(8)}")


def _config(rules: str) -> VerifierConfig:
    return VerifierConfig(runs=3, warmup=1, rules=rules)


def _as_kernelbench(rules: str) -> VerifierConfig:
    """The contract's speedup timed as KernelBench times it (:mod:`kernelgym.verifier.kernelbench_timing`)."""
    return replace(_config(rules), contract_timing="kernelbench")


def _store_files(cache_dir: Path) -> dict[str, int]:
    """Every record of the judge's store (builds and failures) and its modification time."""
    records = ExtensionStore(cache_dir / "builds").records
    return {path.name: path.stat().st_mtime_ns for path in records.glob("*.json")} if records.is_dir() else {}


def test_a_failing_build_in_init_inside_try_is_compiled_once_and_remembered(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("fallback_after_failing_build")
    task = cpu_suite[fields["task"]]
    before = _store_files(cache_dir)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        first = verifier.evaluate(task, text)
        after_first = _store_files(cache_dir)
        second = verifier.evaluate(task, text)
    assert first.status is Status.OK and second.status is Status.OK, first.feedback
    # The failure, recorded once by the trusted side (a fresh cache also gains the worker's own one-time builds).
    assert len([name for name in after_first if name not in before and name.endswith(".failed.json")]) == 1
    # Built once, in the build stage: the check stage's constructions and the time stage's found it in the store.
    assert first.seconds.check + first.seconds.time < first.seconds.build
    # Judged again: nothing compiled (the record would have been written again), nothing new in the store.
    assert _store_files(cache_dir) == after_first


def test_builds_asked_for_by_other_shapes_are_made_once_and_never_charged_to_the_check_stage(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("build_keyed_on_init_args")
    task = cpu_suite[fields["task"]]
    before = _store_files(cache_dir)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(task, text)
    assert result.status is Status.OK, result.feedback
    built = [name for name in _store_files(cache_dir) if name not in before]
    assert len(built) >= 2, "the shape variants change the constructor's feature count: one build each"
    assert result.seconds.check < result.seconds.build


@pytest.mark.parametrize("name", ["two_modules_built_in_init"])
def test_modules_built_in_init_are_judged_ok(name: str, cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample(name)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
    assert result.status is Status(fields["expect"]), result.feedback


def test_with_one_judge_a_build_asked_for_late_goes_to_a_build_worker_and_a_fast_answer_is_judged_meanwhile(
        cache_dir: Path, cpu_suite, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cpp backend builds where it runs; pretend it can build apart, as the cuda backend does on a GPU host.
    monkeypatch.setattr(CppBackend, "build_worker_environment", lambda self: {})
    monkeypatch.setattr(CppBackend, "device_count", lambda self: 1)
    fields, slow_text = _sample("build_at_first_forward")
    slow_task, fast_task = cpu_suite[fields["task"]], cpu_suite["level1/1_ReLU"]
    rounds: list[int] = []
    executor = LocalExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), build_workers=2)
    real = executor._build_then_judge
    monkeypatch.setattr(executor, "_build_then_judge", lambda job, judged, n, *rest, **kw: (rounds.append(n), real(job, judged, n, *rest, **kw)))
    try:
        with Verifier(backend="cpp", executor=executor, config=_config(fields["rules"])) as verifier:
            assert verifier.evaluate(fast_task, fast_task.solution("cpp")).status is Status.OK  # its build is in the store
            slow = verifier.submit(slow_task, slow_text)
            fast = verifier.submit(fast_task, fast_task.solution("cpp"))
            order = [future is fast for future in as_completed([slow, fast], timeout=900)]
    finally:
        executor.close()
    assert slow.result().status is Status.OK and fast.result().status is Status.OK, slow.result().feedback
    assert order == [True, False]  # the fast answer's verdict did not wait for the slow one's build
    assert 1 in rounds  # the judge sent the slow answer back to the build workers once, with the build it asked for


def test_a_failing_build_asked_for_at_the_first_call_is_built_once_by_a_build_worker_and_remembered(
        cache_dir: Path, cpu_suite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CppBackend, "build_worker_environment", lambda self: {})
    monkeypatch.setattr(CppBackend, "device_count", lambda self: 1)
    fields, text = _sample("failing_build_at_first_forward")
    task = cpu_suite[fields["task"]]
    rounds: list[int] = []
    before = _store_files(cache_dir)
    executor = LocalExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), build_workers=1)
    real = executor._build_then_judge
    monkeypatch.setattr(executor, "_build_then_judge", lambda job, judged, n, *rest, **kw: (rounds.append(n), real(job, judged, n, *rest, **kw)))
    try:
        with Verifier(backend="cpp", executor=executor, config=_config(fields["rules"])) as verifier:
            first = verifier.evaluate(task, text)
            after_first = _store_files(cache_dir)
            second = verifier.evaluate(task, text)
    finally:
        executor.close()
    assert first.status is Status.OK and second.status is Status.OK, first.feedback  # the answer's fallback ran
    assert rounds == [0, 1, 0], "sent back to a build worker once, with the build its first call asked for; not again"
    assert len([name for name in after_first if name not in before and name.endswith(".failed.json")]) == 1
    assert _store_files(cache_dir) == after_first  # judged again: nothing compiled, nothing new in the store


def test_under_the_kernelbench_preset_a_result_carries_the_verdict_of_kernelbench_s_own_contract(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("weights_transformed_in_init")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    honest_text = text.replace("self.weight_t)", "self.linear.weight.t())")
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
        honest = verifier.evaluate(cpu_suite[fields["task"]], honest_text)
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert result.kernelbench_differs_by == "`weights-cached`" and "KernelBench's own contract" in result.feedback
    assert result.kernelbench_speedup_eager is not None and result.kernelbench_speedup_eager > 0
    # Where both contracts agree, the result says so without a second timing: the strict verdict's figures are the contract's.
    assert honest.status is Status.OK and honest.kernelbench_verdict is Status.OK and honest.kernelbench_status is None
    assert honest.kernelbench_speedup_eager == honest.speedup_eager
    # Timed as KernelBench times (contract_timing="kernelbench"), the speedups differ by the timing alone.
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_as_kernelbench(fields["rules"])) as verifier:
        timed = verifier.evaluate(cpu_suite[fields["task"]], honest_text)
    assert timed.status is Status.OK and timed.kernelbench_verdict is Status.OK, timed.feedback
    assert timed.kernelbench_differs_by.startswith("the timing (KernelBench's:") and "speedups differ by the timing" in timed.feedback
    assert timed.kernelbench_speedup_eager is not None and timed.kernelbench_speedup_eager > 0
    assert timed.kernelbench_speedup_eager != timed.speedup_eager  # two measurements, not one figure copied


@pytest.mark.parametrize("name", ["wrong_only_in_kernelbench_timing", "timing_loop_replaced"])
def test_kernelbench_s_timing_of_an_answer_is_checked_as_far_as_its_figure_allows(name: str, cache_dir: Path, cpu_suite) -> None:
    """With the contract's speedup timed as KernelBench times it, in a fresh process: an answer wrong only inside that
    loop is wrong under the contract (the judge compares one call of the loop it picks), one that rewrites the loop
    has changed the process's global state."""
    fields, text = _sample(name)
    kernelbench_expected = Status(re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1))
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_as_kernelbench(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
    assert result.kernelbench_verdict is kernelbench_expected and result.kernelbench_speedup_eager is None, result.feedback
    if kernelbench_expected is Status.INCORRECT:
        assert result.status is Status.OK and "timed as KernelBench times" in result.feedback, result.feedback
    else:
        assert result.status is Status.ILLEGAL and "kernelbench_calls was replaced" in result.feedback, result.feedback


def test_kernelbench_s_contract_keeps_the_weights_the_answer_s_own_init_made(cache_dir: Path, cpu_suite) -> None:
    """KernelBench builds the reference and ModelNew from one seed and copies nothing between them: an answer that
    scales its weights in place in ``__init__`` is right there, and wrong once the reference's weights are copied in."""
    fields, text = _sample("weights_scaled_in_place_in_init")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    task = cpu_suite[fields["task"]]
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(task, text)
    fixed_config = replace(_config(fields["rules"]), weights="fixed")
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=fixed_config) as verifier:
        fixed = verifier.evaluate(task, text)
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert fixed.status is Status.INCORRECT, fixed.feedback  # the reference's weights copied over the scaled ones


def test_an_answer_right_only_with_the_reference_s_weights_copied_in_is_wrong_under_kernelbench_s_contract(
        cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("weights_drawn_in_another_order")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    task = cpu_suite[fields["task"]]
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(task, text)
        same_order = verifier.evaluate(task, text.replace("torch.randn(out_features) * 0.0", "torch.zeros(out_features)"))
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert "weights copied into `ModelNew`" in result.kernelbench_differs_by
    # Its own __init__ drawing the reference's weights, the copy changes nothing: no second check, the verdicts agree.
    assert same_order.status is Status.OK and same_order.kernelbench_status is None, same_order.feedback


def test_an_answer_illegal_only_by_a_rule_kernelbench_lacks_is_judged_under_its_contract(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("flags_set_at_import")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    task = cpu_suite[fields["task"]]
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        built = verifier.build_many([(task, text)])[0]
        result = verifier.evaluate(task, text)
        patched = verifier.evaluate(task, text.replace("super().__init__()", "super().__init__()\n        torch.relu = torch.sigmoid"))
    assert built.status is Status.ILLEGAL and built.kernelbench_status is None  # built ahead, still the strict verdict
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert result.kernelbench_differs_by == "`global-flags`" and {v.rule for v in result.violations} == {"global-flags"}
    assert result.kernelbench_speedup_eager is not None and result.kernelbench_speedup_eager > 0 and result.score == 0.0
    # A hack defense the contract keeps: the answer that also replaces a torch function is illegal under both.
    assert patched.status is Status.ILLEGAL and patched.kernelbench_verdict is Status.ILLEGAL and patched.kernelbench_status is None
    # The strict preset's own illegal answers are final at once under the native preset.
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config("native")) as verifier:
        native = verifier.evaluate(task, text)
    assert native.status is Status.ILLEGAL and native.kernelbench_status is None and native.seconds.build == 0.0


def test_an_input_written_in_place_is_incorrect_and_right_under_kernelbench_s_contract(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("input_written_in_place")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert result.kernelbench_differs_by == "`input-mutation`"


def test_sources_written_to_files_and_loaded_are_built_through_the_store_under_kernelbench_s_contract(cache_dir: Path, cpu_suite) -> None:
    fields, text = _sample("sources_written_to_files_and_loaded")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    before = _store_files(cache_dir)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert result.kernelbench_differs_by == "`file-access`" and result.kernelbench_speedup_eager > 0
    assert any(name not in before and not name.endswith(".failed.json") for name in _store_files(cache_dir))  # built, by the store


def test_an_answer_within_kernelgym_s_tolerance_but_not_kernelbench_s_allclose_is_wrong_under_its_contract(
        cache_dir: Path, cpu_suite) -> None:
    """KernelBench's check is ``torch.allclose`` on its own seeds' inputs; kernelgym scales its tolerance to the output's
    magnitude. The bundled cumsum answer off by 5e-3 on long scans (the task's own shape: outputs of mean magnitude
    about 50), exact on short ones, is within kernelgym's tolerance (the task's 1e-3, scaled) and beyond KernelBench's
    ``allclose`` at that tolerance on the small elements. An ``ok`` answer is checked again KernelBench's way, its
    strict timing kept."""
    task = cpu_suite["level1/20_Cumsum"]
    exact = task.solution("cpp").replace("#include <torch/extension.h>", f"#include <torch/extension.h>\n// {secrets.token_hex(8)}")
    off = exact.replace("o[off + i] = (float)acc[i];", "o[off + i] = (float)(acc[i] + (r > 1024 ? 5e-3 : 0.0));")
    assert off != exact
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config("kernelbench")) as verifier:
        result = verifier.evaluate(task, off)
        right = verifier.evaluate(task, exact)
    assert result.status is Status.OK and result.kernelbench_verdict is Status.INCORRECT, result.feedback
    assert "kernelgym's comparison" in result.kernelbench_differs_by and "torch.allclose" in result.feedback
    assert right.status is Status.OK and right.kernelbench_status is None, right.feedback  # right both ways: one verdict


def test_kernelbench_s_contract_calls_the_model_as_built(cache_dir: Path, cpu_suite) -> None:
    """KernelBench never calls ``train()`` or ``eval()``: a submodule its ``__init__`` put in eval mode stays there
    (kernelgym's own trials call every mode, and find the dropout on in training mode)."""
    fields, text = _sample("modes_set_in_init")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
        on = verifier.evaluate(cpu_suite[fields["task"]], text.replace("        self.dropout.eval()\n", ""))
        # Illegal by a rule KernelBench lacks, it is judged under the contract alone: there too as built.
        flagged = verifier.evaluate(cpu_suite[fields["task"]], text.replace(
            "super().__init__()", "super().__init__()\n        torch.backends.cudnn.benchmark = True"))
    assert result.status is Status(fields["expect"]) and result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert flagged.status is Status.ILLEGAL and flagged.kernelbench_verdict is Status.OK, flagged.feedback
    assert on.kernelbench_verdict is Status.INCORRECT, on.feedback  # left in training mode, the dropout is on there too


def test_kernelbench_s_contract_times_a_batchnorm_model_as_built(cache_dir: Path) -> None:
    """kernelgym times in eval mode; KernelBench times the models as built, where a BatchNorm computes its batch's
    statistics: an answer right both ways is timed again under the contract, and the feedback says why."""
    task = load_task_file(Path(__file__).parent / "batchnorm_task.py")
    answer = task.source.replace("class Model(", "class ModelNew(").replace("super().__init__()", "super().__init__()  # as is")
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config("kernelbench")) as verifier:
        result = verifier.evaluate(task, answer)
    assert result.status is Status.OK and result.kernelbench_verdict is Status.OK, result.feedback
    assert "timed mode" in result.kernelbench_differs_by and result.kernelbench_speedup_eager is not None


def test_kernelbench_s_contract_moves_the_models_before_every_trial(cache_dir: Path, cpu_suite) -> None:
    """KernelBench calls ``.to(device, dtype=torch.float32)`` on both models before each of its trials; an answer whose
    first call's state goes stale at a move (CUDA-L1's ``level3/35_LSTM``: a CUDA graph over an LSTM whose weights
    every move flattens anew) fails there from its second trial on (kernelgym's own trials move it at the redraw)."""
    fields, text = _sample("state_lost_on_move")
    kernelbench_expected = re.search(r"^#\s*kernelbench:\s*(\S+)", text, re.M).group(1)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config(fields["rules"])) as verifier:
        result = verifier.evaluate(cpu_suite[fields["task"]], text)
    assert result.status is Status(fields["expect"]), result.feedback
    assert result.kernelbench_verdict is Status(kernelbench_expected), result.feedback
    assert "KernelBench's torch.allclose" in result.feedback and "trial 2 (seed" in result.feedback.split("Under KernelBench")[1]
    # Wrong under both, for different reasons: the line names the check that separates them, not a timing difference.
    assert "the strict verdict differs by `initial-weights-assumed`" in result.feedback, result.feedback


def test_kernelbench_s_contract_checks_and_times_without_autograd(cache_dir: Path) -> None:
    """KernelBench checks its trials under ``torch.no_grad`` and never reads a timed call's output (CUDA-L1's
    ``level2/96``: a half-precision path taken only while autograd records). kernelgym's rules refuse the downgrade;
    under KernelBench's contract the answer is checked and timed without autograd, and is right, as KernelBench
    finds it."""
    task = load_task_file(Path(__file__).parent / "batchnorm_task.py")
    answer = task.source.replace("class Model(", "class ModelNew(").replace(
        "        return self.norm(self.linear(x))",
        "        out = self.norm(self.linear(x))\n"
        "        return out.half() if torch.is_grad_enabled() else out  # another path under autograd")
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=_config("kernelbench")) as verifier:
        result = verifier.evaluate(task, answer)
    assert result.status is Status.ILLEGAL and result.kernelbench_verdict is Status.OK, result.feedback
    assert result.kernelbench_differs_by == "`precision-downgrade`" and result.kernelbench_speedup_eager is not None
