"""The stages that run candidate code: build, check, time, score (worker side only).

Holds:
    judge: run one :class:`JudgeJob` to an :class:`EvalResult`.

This module is imported only inside sandboxed worker processes. It loads the
reference and the candidate as modules from files (so ``inspect.getsource``
works for Triton), builds through the backend's hooks, checks correctness over
fresh-seed trials, modes and shape variants under the runtime guards, times
both programs, re-checks after timing and scores the result.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.backends import Backend, BuildRecord, KernelTracker, get_backend
from kernelgym.backends.base import median_and_iqr
from kernelgym.backends.native import BuildError, trim_compiler_log
from kernelgym.verifier.compare import Mismatch, compare_outputs, fingerprint, flatten_outputs
from kernelgym.verifier.feedback import compose_feedback
from kernelgym.verifier.guard import AtenGuard, GlobalState
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, StageSeconds, Status, Violation

__all__ = ["judge", "Verdict"]

# Captured at import, before any candidate runs, so a candidate cannot swap the clock we use.
_perf_counter = time.perf_counter

# (training mode, grad enabled) per correctness trial, cycled.
_MODES = ((False, False), (True, True), (False, True))


class Verdict(Exception):
    """Raised inside a stage to end the evaluation with a status."""

    def __init__(self, status: Status, details: list[str], violations: tuple[Violation, ...] = (), lead: str = "") -> None:
        super().__init__(details[0] if details else status.value)
        self.status = status
        self.details = details
        self.violations = violations
        self.lead = lead


@dataclass
class _Progress:
    """What the stages learned so far (mutable, local to one evaluation)."""

    compiled: bool = False
    correct: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)


def _load_module(name: str, source: str, directory: Path) -> ModuleType:
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = directory / f"{name}_{digest}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{name}_{digest}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _error_line(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "candidate_" in f.filename]
    where = f" (candidate line {frames[-1].lineno})" if frames else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text[:1500] + " ...") if len(text) > 1500 else text + where


def _to_device(values: list[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _stage(name: str, progress: _Progress, on_stage: Callable[[str], None]) -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def run() -> Iterator[None]:
        on_stage(name)
        start = _perf_counter()
        try:
            yield
        finally:
            progress.seconds[name] = progress.seconds.get(name, 0.0) + _perf_counter() - start

    return run()


class _Harness:
    """Reference and candidate modules plus the runtime defenses, for one job."""

    def __init__(self, job: JudgeJob, backend: Backend, work_dir: Path, build_root: Path) -> None:
        self.job = job
        self.backend = backend
        self.work_dir = work_dir
        self.build_root = build_root
        self.tracker = KernelTracker()
        self.builds: list[BuildRecord] = []
        self.device = backend.device()
        self.state = GlobalState.capture()
        self.reference: ModuleType | None = None
        self.candidate: ModuleType | None = None
        self.kernel_calls = 0

    def check_state(self, when: str) -> None:
        changes = GlobalState.capture().changes_since(self.state)
        if changes:
            raise Verdict(
                Status.ILLEGAL,
                [f"The candidate changed global state {when}."],
                (Violation("global-state-changed", 0, "; ".join(changes), "runtime"),),
            )

    def load(self) -> None:
        task = self.job.task
        try:
            self.reference = _load_module("reference", task.source, self.work_dir)
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(self.reference, name):
                    raise AttributeError(f"the task program does not define {name}")
        except Exception as exc:  # the task itself is broken: not the candidate's fault
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error in {task.id}: {_error_line(exc)}"]) from None
        try:
            with self.backend.build_hooks(self.build_root, self.tracker, self.builds):
                self.candidate = _load_module("candidate", self.job.code, self.work_dir)
        except BuildError as exc:
            raise _build_verdict(exc) from None
        except Exception as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"Loading your program raised {_error_line(exc)}"]) from None
        model_new = getattr(self.candidate, "ModelNew", None)
        if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
            raise Verdict(Status.FORMAT_ERROR, ["`ModelNew` must be a subclass of torch.nn.Module."])
        if any(cls is self.reference.Model or cls.__name__ == "Model" for cls in model_new.__mro__):
            raise Verdict(
                Status.ILLEGAL,
                ["ModelNew derives from the reference Model."],
                (Violation("inherits-model", 0, "ModelNew must not inherit from Model; subclass nn.Module.", "runtime"),),
            )
        self.check_state("while loading")

    def models(self, variant: dict[str, Any]) -> tuple[torch.nn.Module, torch.nn.Module]:
        assert self.reference is not None and self.candidate is not None
        for key, value in variant.items():
            if not hasattr(self.reference, key):
                raise Verdict(Status.RUNTIME_ERROR, [f"Task error: variant sets {key!r}, which the task does not define."])
            setattr(self.reference, key, value)
        seed = self.job.seeds[0]  # never an input seed: __init__ cannot pre-draw the trial inputs
        torch.manual_seed(seed)
        init_inputs = self.reference.get_init_inputs()
        torch.manual_seed(seed)
        reference = self.reference.Model(*init_inputs)
        torch.manual_seed(seed)
        try:
            candidate = self.candidate.ModelNew(*init_inputs)
        except Exception as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"ModelNew(*get_init_inputs()) raised {_error_line(exc)}"]) from None
        ref_state, new_state = reference.state_dict(), candidate.state_dict()
        with torch.no_grad():
            for key, value in ref_state.items():
                if key in new_state and new_state[key].shape == value.shape:
                    new_state[key].copy_(value)
        return reference.to(self.device), candidate.to(self.device)

    def inputs(self, seed: int) -> list[Any]:
        assert self.reference is not None
        torch.manual_seed(seed)
        return _to_device(list(self.reference.get_inputs()), self.device)

    def run_candidate(self, model: torch.nn.Module, inputs: list[Any]) -> Any:
        """One guarded candidate forward: ATen compute, decoys and input mutation are caught here."""
        before = fingerprint(inputs)
        self.backend.poison_memory()
        guard = AtenGuard()
        try:
            with self.tracker.watching(), guard:
                output = model(*inputs)
            self.backend.synchronize()
        except Verdict:
            raise
        except BuildError as exc:  # JIT backends (Triton) compile at the first launch
            raise _build_verdict(exc) from None
        except Exception as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"ModelNew.forward raised {_error_line(exc)}"]) from None
        if guard.compute_ops:
            ops = ", ".join(f"aten.{op}" for op in guard.compute_ops[:12])
            raise Verdict(
                Status.ILLEGAL,
                ["PyTorch computed part of the answer during ModelNew.forward."],
                (Violation("aten-fallback", 0, f"ATen compute ops dispatched during forward: {ops}. Implement them in your kernel.", "runtime"),),
            )
        if self.tracker.calls == 0:
            raise Verdict(
                Status.ILLEGAL,
                ["No custom kernel ran during ModelNew.forward."],
                (Violation("decoy-kernel", 0, "forward must call your compiled kernel; defining it is not enough.", "runtime"),),
            )
        self.kernel_calls = self.tracker.calls
        if fingerprint(inputs) != before:
            raise Verdict(
                Status.INCORRECT,
                ["The candidate modified its inputs."],
                (Violation("input-mutation", 0, "forward must not write to its inputs; write results to new tensors.", "runtime"),),
            )
        return output


def _build_verdict(exc: BuildError) -> Verdict:
    """A compile error whose feedback starts with the compiler's first error line."""
    lines = (trim_compiler_log(exc.log) if exc.log else "").splitlines()
    if not lines:
        return Verdict(Status.COMPILE_ERROR, [], lead=str(exc))
    return Verdict(Status.COMPILE_ERROR, ["\n".join(lines[1:]), f"({exc})"], lead=lines[0])


def _mismatch_verdict(mismatch: Mismatch, context: str, rule: str) -> Verdict:
    status = Status.ILLEGAL if mismatch.illegal else Status.INCORRECT
    rule_id = mismatch.rule if mismatch.illegal or mismatch.rule != "wrong-output" else rule
    return Verdict(status, [f"{context}: {mismatch.message}"], (Violation(rule_id, 0, mismatch.message, "runtime"),))


def _mismatch_rule(
    h: _Harness,
    reference: torch.nn.Module,
    candidate: torch.nn.Module,
    inputs: list[Any],
    output: Any,
    previous: set[str],
    trial: int,
    v_index: int,
) -> str:
    """Name the cause of a mismatch: a replayed earlier output, a mode-dependent answer, or a wrong one."""
    if fingerprint(output) in previous:
        return "stale-output"
    if trial == 0:
        return "shape-variant-mismatch" if v_index else "wrong-output"
    training, grad = _MODES[trial % len(_MODES)]
    if training or grad:
        reference.eval()
        candidate.eval()
        with torch.no_grad():
            expected = reference(*_clone(inputs))
            again = h.run_candidate(candidate, _clone(inputs))
        if compare_outputs(expected, again, inputs, *_tolerances(h.job), h.job.config.low_precision_tol).mismatch is None:
            return "mode-mismatch"
    # Trial 1 passed in this very mode: an answer that goes wrong later depends on its call history.
    return "stale-output"


def _check(h: _Harness, progress: _Progress) -> tuple[torch.nn.Module, torch.nn.Module]:
    job, task = h.job, h.job.task
    atol, rtol = _tolerances(job)
    variants: list[dict[str, Any]] = [{}]
    if job.config.check_variants:
        variants += [dict(v) for v in task.variants]
    assert h.reference is not None
    base = {key: getattr(h.reference, key) for v in variants for key in v if hasattr(h.reference, key)}
    kept: tuple[torch.nn.Module, torch.nn.Module] | None = None
    for v_index, variant in enumerate(variants):
        reference, candidate = h.models({**base, **variant})
        previous: set[str] = set()
        for trial in range(job.config.trials):
            training, grad = _MODES[trial % len(_MODES)]
            reference.train(training)
            candidate.train(training)
            seed = job.seeds[1 + trial]
            inputs = h.inputs(seed)
            with torch.set_grad_enabled(grad):
                expected = reference(*_clone(inputs))
                output = h.run_candidate(candidate, inputs)
            result = compare_outputs(expected, output, inputs, atol, rtol, job.config.low_precision_tol)
            progress.max_abs = max(progress.max_abs, result.max_abs_error)
            progress.max_rel = max(progress.max_rel, result.max_rel_error)
            if result.mismatch is not None:
                where = f"trial {trial + 1} (seed {seed}, {'train' if training else 'eval'} mode, grad {'on' if grad else 'off'})"
                if v_index:
                    where += f", shape variant {variant}"
                rule = _mismatch_rule(h, reference, candidate, inputs, output, previous, trial, v_index)
                raise _mismatch_verdict(result.mismatch, where, rule)
            previous.add(fingerprint(output))
        if v_index == 0:
            kept = (reference.eval(), candidate.eval())
    for key, value in base.items():
        setattr(h.reference, key, value)
    h.check_state("during the correctness trials")
    assert kept is not None
    progress.correct = True
    return kept


def _time(h: _Harness, progress: _Progress, models: tuple[torch.nn.Module, torch.nn.Module]) -> None:
    job, backend, config = h.job, h.backend, h.job.config
    reference, candidate = models
    if not backend.timing_meaningful:
        progress.flags.append("timing-not-meaningful")
        return
    timing_seed = job.seeds[config.trials + 1]
    input_sets = [h.inputs(timing_seed + i) for i in range(config.input_sets)]
    with torch.no_grad():
        runs = config.runs or backend.default_runs
        ref_times = backend.time_calls(lambda ins: reference(*ins), input_sets, config.warmup, runs)
        try:
            new_times = backend.time_calls(lambda ins: candidate(*ins), input_sets, config.warmup, runs)
        except Exception as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"ModelNew.forward raised while timed: {_error_line(exc)}"]) from None
        # Re-check on fresh inputs after timing: catches batch-and-skip and caches keyed on pointers or content.
        recheck = h.inputs(job.seeds[config.trials + 2])
        expected = reference(*_clone(recheck))
        output = h.run_candidate(candidate, recheck)
        # And on a timed input rewritten in place (same pointers, new values): catches caches keyed on data_ptr.
        reused = input_sets[0]
        torch.manual_seed(job.seeds[config.trials + 2] + 1)
        for tensor in reused:
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                tensor.copy_(torch.randn_like(tensor))
        expected_reused = reference(*_clone(reused))
        output_reused = h.run_candidate(candidate, reused)
    h.check_state("while being timed")
    for label, want, got, ins in (
        ("after timing, on fresh inputs", expected, output, recheck),
        ("after timing, on a timed input rewritten in place", expected_reused, output_reused, reused),
    ):
        result = compare_outputs(want, got, ins, *_tolerances(job), config.low_precision_tol)
        if result.mismatch is not None:
            raise _mismatch_verdict(result.mismatch, label, "stale-output")
    ref_ms, ref_spread = median_and_iqr(ref_times)
    new_ms, new_spread = median_and_iqr(new_times)
    progress.timing.update(ref_eager_ms=ref_ms, runtime_ms=new_ms, runtime_spread_ms=new_spread)
    if config.compile_baseline:
        progress.timing["ref_compile_ms"] = _compile_baseline(h, reference, input_sets)
    bandwidth = config.roofline_bandwidth_gbs or backend.default_bandwidth_gbs
    moved = sum(t.numel() * t.element_size() for t in flatten_outputs(input_sets[0]) + flatten_outputs(output) if isinstance(t, torch.Tensor))
    floor_ms = moved / (bandwidth * 1e9) * 1e3
    if new_ms < floor_ms:
        progress.flags.append("excessive-speedup")
        progress.timing["roofline_reason"] = (
            f"excessive speedup: {new_ms * 1e3:.2f} us per call is below the roofline floor of "
            f"{floor_ms * 1e3:.2f} us ({moved} bytes at {bandwidth:.0f} GB/s)"
        )


def _tolerances(job: JudgeJob) -> tuple[float, float]:
    task = job.task
    return (
        task.atol if task.atol is not None else job.config.atol,
        task.rtol if task.rtol is not None else job.config.rtol,
    )


def _compile_baseline(h: _Harness, reference: torch.nn.Module, input_sets: list[list[Any]]) -> float | None:
    """Median time of ``torch.compile(Model)``, cached per (task, shapes, device, torch version)."""
    shapes = [tuple(t.shape) for t in flatten_outputs(input_sets[0]) if isinstance(t, torch.Tensor)]
    key = json.dumps([h.job.task.id, hashlib.sha1(h.job.task.source.encode()).hexdigest(), shapes, h.backend.device_name(), torch.__version__])
    cache = h.build_root / "baselines" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    if cache.exists():
        return json.loads(cache.read_text())["ref_compile_ms"]
    try:
        compiled = torch.compile(reference)
        times = h.backend.time_calls(lambda ins: compiled(*ins), input_sets, h.job.config.warmup + 2, h.job.config.runs or h.backend.default_runs)
    except Exception:  # a baseline that cannot compile is reported as missing, not as the candidate's failure
        return None
    value = median_and_iqr(times)[0]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "ref_compile_ms": value}))
    return value


def judge(job: JudgeJob, build_root: Path, work_dir: Path, on_stage: Callable[[str], None] = lambda _s: None) -> EvalResult:
    """Build, check, time and score one candidate (only build it when ``job.build_only``). Runs inside a worker only."""
    backend = get_backend(job.backend)
    progress = _Progress(seconds={"extract": job.extract_seconds, "inspect": job.inspect_seconds})
    h = _Harness(job, backend, work_dir, build_root)
    status, details, violations, lead = Status.OK, [], (), ""
    try:
        with _stage("build", progress, on_stage):
            h.load()
            progress.compiled = True
        if not job.build_only:
            with _stage("check", progress, on_stage):
                models = _check(h, progress)
            if job.config.timing:
                with _stage("time", progress, on_stage):
                    _time(h, progress, models)
    except Verdict as verdict:
        status, details, violations, lead = verdict.status, verdict.details, verdict.violations, verdict.lead
    except MemoryError:
        status, details = Status.RUNTIME_ERROR, ["The candidate ran out of memory (the worker's memory limit was hit)."]
    except Exception as exc:  # a failure of the harness itself is reported, never crashes the worker
        status, details = Status.RUNTIME_ERROR, [f"Internal judge error (please report): {''.join(traceback.format_exception(exc))[-2000:]}"]
    return _result(job, backend, progress, h, status, details, violations, lead)


def _result(job: JudgeJob, backend: Backend, progress: _Progress, h: _Harness, status: Status, details: list[str], violations: tuple[Violation, ...], lead: str) -> EvalResult:
    config = job.config
    timing = progress.timing
    correct = status is Status.OK and progress.correct
    compiled = progress.compiled and status is not Status.COMPILE_ERROR
    speedup_eager = speedup_compile = None
    if correct and timing.get("runtime_ms"):
        speedup_eager = timing["ref_eager_ms"] / timing["runtime_ms"]
        if timing.get("ref_compile_ms"):
            speedup_compile = timing["ref_compile_ms"] / timing["runtime_ms"]
    excessive = "excessive-speedup" in progress.flags
    meaningful = correct and backend.timing_meaningful and config.timing
    faster = bool(speedup_eager and speedup_eager > config.faster_threshold and not excessive)
    lines = list(details)
    if correct:
        lines.append(
            f"Correct on {config.trials} trials"
            + (f" and {len(job.task.variants)} shape variant(s)" if config.check_variants and job.task.variants else "")
            + f"; max abs error {progress.max_abs:.3g}, max rel error {progress.max_rel:.3g}."
        )
        if speedup_eager is not None:
            lines.append(
                f"Runtime {timing['runtime_ms']:.4f} ms (IQR {timing['runtime_spread_ms']:.4f}) vs reference "
                f"{timing['ref_eager_ms']:.4f} ms eager: speedup {speedup_eager:.3f}x"
                + (f", {speedup_compile:.3f}x vs torch.compile" if speedup_compile else "")
                + "."
            )
        if excessive:
            lines.append(timing["roofline_reason"] + "; the speedup is not credited.")
        if "timing-not-meaningful" in progress.flags:
            lines.append("Timing is not meaningful on this machine (interpreter); no speedup is reported.")
    score = config.reward.score(
        status,
        compiled=compiled,
        correct=correct,
        speedup=None if excessive else speedup_eager,
        timing_meaningful=meaningful,
    )
    seconds = StageSeconds(**{k: round(v, 6) for k, v in progress.seconds.items()})
    build_seconds = sum(b.seconds for b in h.builds)
    return EvalResult(
        task_id=job.task.id,
        backend=job.backend,
        status=status,
        parsed=True,
        legal=status is not Status.ILLEGAL,
        compiled=compiled,
        correct=correct,
        speedup_eager=speedup_eager,
        speedup_compile=speedup_compile,
        faster=faster,
        runtime_ms=timing.get("runtime_ms") if correct else None,
        runtime_spread_ms=timing.get("runtime_spread_ms") if correct else None,
        ref_eager_ms=timing.get("ref_eager_ms"),
        ref_compile_ms=timing.get("ref_compile_ms"),
        timing_meaningful=meaningful,
        max_abs_error=progress.max_abs if compiled else None,
        max_rel_error=progress.max_rel if compiled else None,
        violations=violations,
        flags=tuple(progress.flags),
        feedback=compose_feedback(status, lines, violations, lead),
        score=score,
        seconds=seconds,
        cache_hit=bool(h.builds) and all(b.cache_hit for b in h.builds) and build_seconds < 5.0,
        custom_kernel_calls=h.kernel_calls,
        seeds=job.seeds[: config.trials + 1],
        device=backend.device_name(),
    )

