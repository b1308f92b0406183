"""The trusted side of judging: the check stage, the verdict and the result (worker side only).

Holds:
    judge: judge one :class:`JudgeJob` against a candidate process, to an :class:`EvalResult`.
    Verdict: raised inside a stage to end the evaluation with a status (from :mod:`.harness`).

This module runs in the judge's worker process, never in the candidate's. The
candidate runs in a process of its own (:mod:`kernelgym.verifier.candidate_side`)
and hands back outputs only, through buffers this side owns (:mod:`.harness`).
Inputs are drawn on the target device from fresh seeds; outputs are compared on
the device; every call of the candidate, checked or timed, runs the same way
under the same guards on fresh inputs, and the checked ones are chosen after the
call returns (:mod:`.timing_stage`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from kernelgym.backends import Backend, get_backend
from kernelgym.verifier.channel import BuildsDeferred, CandidateChannel
from kernelgym.verifier.compare import compare_outputs, fingerprint, flatten_outputs
from kernelgym.verifier.feedback import conclude, contract_of_rejected, with_contract
from kernelgym.verifier.guard import settings_as
from kernelgym.verifier.harness import (
    CHECK_MODES,
    Harness,
    Progress,
    Verdict,
    mismatch_verdict,
    redrawable_state,
    require_ok,
    tolerances,
)
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.kernel_share import profile_kernels
from kernelgym.verifier.kernelbench_numerics import KERNELBENCH_TRIALS, job_inputs, kernelbench_seeds, reseed
from kernelgym.verifier.kernelbench_timing import kernelbench_speedup
from kernelgym.verifier.presets import contract_preset
from kernelgym.verifier.result import EvalResult, StageSeconds, Status, Violation
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.sampled_compute import sample_compute
from kernelgym.verifier.sandboxed_task import TaskFailure
from kernelgym.verifier.timing_stage import time_stage

__all__ = ["judge", "Verdict"]

# The trial (of the first shape) in which every floating parameter and buffer is redrawn.
_REDRAW_TRIAL = 1


def _variants(h: Harness) -> list[tuple[dict[str, Any], bool]]:
    """The shapes to check: the task's own first, then its declared variants, else variants derived from its source."""
    from kernelgym.tasks.variants import derive_variants

    shapes: list[tuple[dict[str, Any], bool]] = [({}, True)]
    if h.config.check_variants:
        declared = [dict(v) for v in h.job.task.variants]
        derived = [] if declared else [dict(v) for v in derive_variants(h.job.task.source)]
        shapes += [(v, True) for v in declared] + [(v, False) for v in derived]
    return shapes


def _same_values(a: Any, b: Any) -> bool:
    """Init inputs equal value for value (tensors compared element by element)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype \
            and bool(torch.equal(a.cpu(), b.cpu()))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # a value without a plain equality: built again
        return False


def _same_models_first(h: Harness, shapes: list[tuple[dict[str, Any], bool]], base: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """The task's own shape, then the variants with its init inputs (they reuse its models), then the others, in order.

    Example: KernelBench's GEMM tasks derive ``{"batch_size": 65}`` after two smaller layers; checked second, it
    reuses the task's own models instead of building its 8192 x 8192 weights a second time.
    """
    try:
        own = h.init_inputs_for(dict(base))
        same = [index for index, (variant, _) in enumerate(shapes[1:], 1) if _same_values(h.init_inputs_for({**base, **variant}), own)]
    except Exception:  # a variant the reference cannot even describe: left where it was (its check says more)
        return shapes
    finally:
        h.init_inputs_for(dict(base))
    return [shapes[0], *(shapes[i] for i in same), *(shape for i, shape in enumerate(shapes[1:], 1) if i not in same)]


def _mismatch_rule(h: Harness, reference: torch.nn.Module, inputs: list[Any], got: list[Any], seen: set[tuple],
                   trial: int, variant: int, redrawn: bool) -> str:
    """Name the cause of a mismatch: a replayed output, a mode-dependent answer, cached or assumed weights, a shape, or a wrong one."""
    if fingerprint(got) in seen:
        return "stale-output"
    training, grad = CHECK_MODES[trial % len(CHECK_MODES)]
    if training or grad:
        expected = h.reference_call(reference, inputs, False, False)
        reply, _ = h.call(inputs, False, False)
        mismatch, again = h.outputs(reply, expected)
        if mismatch is None and h.compare(expected, again).mismatch is None:
            return "mode-mismatch"
    if redrawn:
        return _weights_rule(h, inputs)
    if variant:
        return "shape-variant-mismatch"
    return "wrong-output" if trial == 0 else "stale-output"


def _weights_rule(h: Harness, inputs: list[Any]) -> str:
    """Why an answer is wrong once the weights were redrawn: ``weights-cached`` or ``initial-weights-assumed``.

    The initial weights go back into ``ModelNew``. ``weights-cached``: it is right again on these inputs,
    and it holds tensors that received no weight (a copy in an attribute or an extra buffer) or the
    reference draws its weights at random (another seed builds other ones), so a copy made before the
    redraw is what it followed. An answer right only at constants a reference starts with (LayerNorm's
    ones and zeros), holding no copy, or wrong at the initial weights too, is ``initial-weights-assumed``.
    """
    initial = h.initial_reference()
    h.send_state(initial)
    expected = h.reference_call(initial, inputs, False, False)
    reply, _ = h.call(inputs, False, False)
    mismatch, got = h.outputs(reply, expected)
    if mismatch is None:
        atol, rtol = tolerances(h.job)
        mismatch = compare_outputs(flatten_outputs(expected), got, [], atol, rtol, h.config.low_precision_tol).mismatch
    if mismatch is not None:
        return "initial-weights-assumed"
    if h.unfilled_tensors:
        return "weights-cached"
    other = redrawable_state(h.initial_reference(h.job.seeds[0] + 1))
    drawn = any(not torch.equal(value, other[name]) for name, value in redrawable_state(initial).items())
    return "weights-cached" if drawn else "initial-weights-assumed"


def contract_job(job: JudgeJob) -> JudgeJob:
    """``job`` as KernelBench's contract judges it: the weights ``ModelNew``'s own ``__init__`` makes from the models'
    seed (``seeded``), the task's own shapes, and KernelBench's seeds, trials, inputs and comparison."""
    config = replace(job.config, weights="seeded", check_variants=False, trials=KERNELBENCH_TRIALS)
    return replace(job, config=config, seeds=kernelbench_seeds(KERNELBENCH_TRIALS), kernelbench_numerics=True)


def _check(h: Harness, modes: tuple[tuple[bool, bool], ...] = CHECK_MODES) -> None:
    job, config = h.job, h.config
    assert h.reference is not None
    shapes = _variants(h)
    base = {key: getattr(h.reference, key) for shape, _ in shapes for key in shape if hasattr(h.reference, key)}
    for variant, _ in shapes:
        unknown = [key for key in variant if not hasattr(h.reference, key)]
        if unknown and job.task.sandboxed:
            raise TaskFailure(f"a shape variant sets {unknown[0]!r}, which is none of the task's module constants")
        if unknown:
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error: variant sets {unknown[0]!r}, which the task does not define."])
    shapes = _same_models_first(h, shapes, base)
    budget_set = False
    reference: torch.nn.Module | None = None
    for index, (variant, declared) in enumerate(shapes):
        h.checking = (variant if index else None, None)
        try:
            # A variant whose init inputs are those of the models built last (another batch size) reuses them:
            # building the models again cost seconds per variant on tasks with large weights.
            reused = reference is not None and _same_values(h.init_inputs_for({**base, **variant}), h.init_inputs)
            if not reused:
                reference = None  # a build that fails leaves nothing to reuse (h.init_inputs already names this variant)
                reference = h.models({**base, **variant})
            probe = job_inputs(job, h.reference, job.seeds[1], h.device) if not declared else None
            if probe is not None:
                try:
                    h.reference_call(reference, probe, False, False)
                except Exception:
                    if not reused:
                        raise
                    # Models built for another shape: their __init__ may have read the constants this variant
                    # changes (a hidden state sized by batch_size); built again for this shape, they may run it.
                    reference = None
                    reference = h.models({**base, **variant})
                    h.reference_call(reference, probe, False, False)
            del probe
        except Verdict:
            raise
        except Exception as exc:
            if declared or isinstance(exc, TaskFailure) and exc.process_lost:
                raise
            continue  # a derived shape the reference itself cannot run: not a shape of this task
        seen: set[tuple] = set()
        redrawn_trial = False
        for trial in range(config.trials):
            training, grad = modes[trial % len(modes)]
            h.checking = (variant if index else None, (training, grad))
            redrawn_trial = index == 0 and trial == _REDRAW_TRIAL and h.redraw_weights(reference)
            seed = job.seeds[1 + trial]
            inputs = job_inputs(job, h.reference, seed, h.device)
            if job.kernelbench_numerics:  # KernelBench seeds again, then moves both models, before the calls
                _place_as_kernelbench(h, reference, seed)
            expected = h.reference_call(reference, inputs, training, grad)
            if not budget_set:  # the first reference call sets what the stage may cost
                calls = 4 * config.trials * len(shapes)
                h.set_budget(config.timeouts.scaled(config.timeouts.check, h.reference_seconds[-1], calls))
                budget_set = True
            h.bind(inputs, expected)
            reply, _ = h.call(inputs, training, grad)
            mismatch, got = h.outputs(reply, expected)
            if mismatch is None:
                mismatch = h.compare(expected, got).mismatch
            if mismatch is not None:
                where = f"trial {trial + 1} (seed {seed}, {_mode_words(training)}, grad {'on' if grad else 'off'})"
                if index:
                    where += f", shape variant {variant}"
                if redrawn_trial:
                    where += ", weights redrawn away from their initial values"
                rule = "wrong-output" if not got else _mismatch_rule(h, reference, inputs, got, seen, trial, index, redrawn_trial)
                if rule == "weights-cached" and not mismatch.illegal:
                    raise Verdict(Status.INCORRECT, [f"{where}: {mismatch.message}"], (runtime.weights_cached(),))
                raise mismatch_verdict(mismatch, where, rule)
            seen.add(fingerprint(got))
            # One trial's tensors at a time: a 6.4 GB-input task held two trials' inputs and outputs at once.
            del inputs, expected, got
        h.progress.variants_checked += 1 if index else 0
    h.checking = (None, None)
    for key, value in base.items():
        setattr(h.reference, key, value)
    h.check_process("during the correctness trials")
    h.progress.correct = True


def _place_as_kernelbench(h: Harness, reference: torch.nn.Module, seed: int) -> None:
    """KernelBench's trial: seeded, the reference moved ``.to(device, dtype=torch.float32)``, seeded again (the calls
    start from there), ``ModelNew`` moved the same way in its process after seeding it (each trial, after its inputs
    are drawn)."""
    reseed(seed)
    reference.to(device=h.device, dtype=torch.float32)
    reseed(seed)
    reply = h.ask("place", seed)
    require_ok(reply)
    h.observe_state(reply, "while KernelBench's contract moved ModelNew to the device")


def judge(job: JudgeJob, candidate: CandidateChannel, build_root: Path, work_dir: Path,
          on_stage: Callable[[str, float], None] = lambda _s, _b: None,
          twin: Callable[[], CandidateChannel] | None = None, quiet: Callable[[], None] = lambda: None) -> EvalResult:
    """Build, check, time and score one candidate running in ``candidate``'s process (build only when ``job.build_only``).

    ``on_stage(name, budget)`` is told each stage and its budget in seconds as it starts or its budget changes.
    ``twin()`` starts a fresh process made like the candidate's: on a host, the reference is timed there
    (:mod:`kernelgym.verifier.twin`); without it, in this process. ``quiet()`` returns once no process the
    caller started ahead (the next job's candidate) is still starting: it is called before the timed calls.
    """
    if job.strict_rejection is not None and not job.build_only:  # judged under KernelBench's contract only
        contract = contract_job(job)
        return contract_of_rejected(job.strict_rejection, _judged(contract, candidate, build_root, work_dir, on_stage, twin, quiet))
    return _judged(job, candidate, build_root, work_dir, on_stage, twin, quiet)


def _judged(job: JudgeJob, candidate: CandidateChannel, build_root: Path, work_dir: Path,
            on_stage: Callable[[str, float], None], twin: Callable[[], CandidateChannel] | None,
            quiet: Callable[[], None]) -> EvalResult:
    backend = get_backend(job.backend)
    progress = Progress(seconds={"extract": job.extract_seconds, "inspect": job.inspect_seconds})
    h = Harness(job, backend, candidate, build_root, work_dir, on_stage, progress, twin, quiet)
    try:
        return _stages(h, job, backend, progress)
    finally:
        h.close()  # a sandboxed task's process, with everything it started


def _stages(h: Harness, job: JudgeJob, backend: Backend, progress: Progress) -> EvalResult:
    status, details, violations, lead = Status.OK, [], (), ""
    timeouts = job.config.timeouts
    try:
        with h.stage("build", timeouts.build):
            h.load()
            progress.compiled = True
            h.construct_ahead()
        # Under KernelBench's contract the reference runs with the settings the answer made, as in KernelBench's one process.
        if not job.build_only:
            with settings_as(h.settings):
                with h.stage("check", timeouts.check):
                    _check(h, _KERNELBENCH_MODES if job.kernelbench_numerics else CHECK_MODES)
                if job.config.timing:
                    with h.stage("time", timeouts.time):
                        time_stage(h)
                    if job.kernelbench_numerics and job.config.contract_timing == "kernelbench":  # judged under the contract alone
                        with h.stage("time", timeouts.time):
                            progress.timing["kernelbench_speedup"] = kernelbench_speedup(h, progress.timing.get("runtime_ms"))
                with h.stage("check", timeouts.check):  # after the timed calls, which it cannot perturb
                    sample_compute(h)  # where forward runs, sampled from outside: ATen reached below the dispatcher
                    profile_kernels(h)  # on a device: the share of its device time in the answer's own kernels
    except Verdict as verdict:
        status, details, violations, lead = verdict.status, verdict.details, verdict.violations, verdict.lead
    except BuildsDeferred:  # the job goes back to the build workers, and comes back
        raise
    except TaskFailure as exc:  # a sandboxed task's program failed: the task's fault, never the answer's
        status, details = Status.JUDGE_ERROR, [f"The task's program failed: {exc}"]
    except torch.cuda.OutOfMemoryError as exc:  # torch's first line says how much was asked for and how much was free
        status, details = Status.RUNTIME_ERROR, ["The judge ran out of device memory for this task's reference and buffers.",
                                                 *str(exc).strip().splitlines()[:1]]
    except Exception as exc:  # a failure of the harness itself is reported, never crashes the worker
        status, details = Status.JUDGE_ERROR, [f"Internal judge error (please report): {''.join(traceback.format_exception(exc))[-2000:]}"]
    contract = (_kernelbench_contract(h, status, violations)
                if job.config.rules == "kernelbench" and job.config.kernelbench_contract else None)
    result = _result(job, backend, progress, h, status, details, violations, lead)
    if job.build_only and status is Status.OK:  # built, not judged: say nothing about correctness
        return result.with_changes(feedback="Status: ok\nBuilt ahead only: not checked or timed; judge it for a verdict.")
    if contract is not None:
        result = with_contract(result, *contract)
    elif result.status is Status.OK and progress.timing.get("kernelbench_speedup"):
        result = result.with_changes(kernelbench_status=Status.OK.value, kernelbench_speedup=progress.timing["kernelbench_speedup"])
    return result


_TIMED_AS_KERNELBENCH = ("the timing (KernelBench's: each call alone after a synchronization and its cache flush, as built, "
                         "autograd on, the mean of 100, each program in a fresh process; kernelgym's: in eval mode, the median)")

_KERNELBENCH_MODES = ((None, False),)
"""KernelBench calls models as they were built, neither ``train()`` nor ``eval()`` called (``None``: a module its
``__init__`` put in eval mode stays there), under ``torch.no_grad``."""


def _mode_matters(reference: torch.nn.Module) -> bool:
    """Whether ``reference`` computes otherwise in training mode (BatchNorm, dropout): kernelgym times in eval mode,
    KernelBench as built."""
    kinds = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.modules.dropout._DropoutNd)
    return any(isinstance(module, kinds) for module in reference.modules())


def _mode_words(training: bool | None) -> str:
    return "as built" if training is None else f"{'train' if training else 'eval'} mode"


def _kernelbench_contract(h: Harness, status: Status, violations: tuple[Violation, ...]) -> tuple[Status, float | None, str, str] | None:
    """The verdict under KernelBench's contract, where it may differ from the strict one.

    The answer is checked again as KernelBench checks it (:func:`contract_job`: the weights ``ModelNew`` made at
    construction from the models' seed, the task's own shapes, KernelBench's seeds, inputs and ``torch.allclose``, its
    mode: the modules as built, no gradients), every hack defense on, and timed where the strict verdict has no timing of
    it: where the strict one is ``ok`` (KernelBench's numbers can still find it wrong: its comparison does not scale
    the tolerance to the output's magnitude), or failed the check on a check KernelBench does not make. ``None``
    where the two cannot differ: the answer failed before its check (it did not build, broke a rule, timed out) or
    failed it with an error on the task's own shape, or this is already the contract's judgement.
    Returns (status, speedup, what separates the verdicts, why the contract's verdict is not ``ok`` where it is not).
    """
    if not h.progress.compiled or h.job.build_only or h.job.kernelbench_numerics:
        return None
    timed = True
    if status is Status.OK:  # the strict timing stands, unless the weights or the timed mode differ
        try:
            timed = h.own_weights_differ or _mode_matters(h.initial_reference())
        except Exception:  # the reference not built again here: its strict timing stands
            timed = h.own_weights_differ
        differs_by = ("the reference's weights copied into `ModelNew` (its own `__init__` makes others from the same "
                      "seed, and KernelBench keeps those)" if h.own_weights_differ else
                      "kernelgym's comparison (fresh inputs; a tolerance scaled to the output's magnitude)")
    elif status not in (Status.INCORRECT, Status.RUNTIME_ERROR):
        return None
    elif violations and violations[0].rule == "wrong-output":  # the task's own shape, in eval mode: KernelBench's is training
        differs_by = "`wrong-output` in eval mode (KernelBench calls the model as built: in training mode)"
    elif violations:
        differs_by = f"`{violations[0].rule}`"
    elif h.checking[0]:
        differs_by = f"an error on a shape KernelBench does not try ({h.checking[0]})"
    elif h.checking[1] not in (None, (True, False)):  # KernelBench's: as built, which is training mode unless __init__ said otherwise
        training, grad = h.checking[1]
        differs_by = f"an error in a mode KernelBench does not call ({_mode_words(training)}, grad {'on' if grad else 'off'})"
    else:
        return None
    job, config, progress, preset = h.job, h.config, h.progress, h.preset
    h.job = contract_job(job)
    h.config, h.preset = h.job.config, contract_preset(preset)
    h.progress = Progress(compiled=True, seconds=progress.seconds)
    try:
        with h.stage("check", h.config.timeouts.check):
            _check(h, _KERNELBENCH_MODES)
        speedup = None
        if timed and h.config.timing:  # every defense of the time stage, in the contract's mode and weights
            with h.stage("time", h.config.timeouts.time):
                time_stage(h)
            timing = h.progress.timing
            speedup = timing["ref_eager_ms"] / timing["runtime_ms"] if timing.get("runtime_ms") else None
        as_kernelbench = None
        if h.config.timing and h.config.contract_timing == "kernelbench":
            with h.stage("time", h.config.timeouts.time):
                as_kernelbench = kernelbench_speedup(h, h.progress.timing.get("runtime_ms") or progress.timing.get("runtime_ms"))
        if as_kernelbench is None and not timed:
            return None  # ok both ways: the strict verdict's figures are the contract's
        if status is Status.OK and not h.own_weights_differ:  # right both ways, timed another way
            differs_by = (_TIMED_AS_KERNELBENCH if as_kernelbench is not None else
                          "the timed mode (kernelgym times the model in eval mode, KernelBench as built)")
        return Status.OK, as_kernelbench or speedup, differs_by, ""
    except Verdict as verdict:  # its first detail says why, in the feedback's contract line
        why = [*verdict.details, *(f"[{v.rule}] {v.message}" for v in verdict.violations)]
        return verdict.status, None, differs_by, why[0] if why else ""
    except Exception:  # the strict verdict stands alone
        return None
    finally:
        h.job, h.config, h.progress, h.preset = job, config, progress, preset


def _result(job: JudgeJob, backend: Backend, progress: Progress, h: Harness, status: Status, details: list[str], violations: tuple[Violation, ...], lead: str) -> EvalResult:
    config = job.config
    timing = progress.timing
    correct = status is Status.OK and progress.correct
    compiled = progress.compiled and status is not Status.COMPILE_ERROR
    speedup_eager = speedup_compile = None
    if correct and timing.get("runtime_ms"):
        speedup_eager = timing["ref_eager_ms"] / timing["runtime_ms"]
        if timing.get("ref_compile_ms"):
            speedup_compile = timing["ref_compile_ms"] / timing["runtime_ms"]
    meaningful = correct and backend.timing_meaningful and config.timing
    faster = bool(speedup_eager and speedup_eager > config.faster_threshold)
    reward = config.reward
    if "weights-not-redrawn" in progress.flags:  # checked at the initial values of weights it holds constant only
        reward = replace(reward, correct_weight=reward.correct_weight / 2, speed_weight=0.0)
    lines = list(details)
    if correct:
        shapes = f" and {progress.variants_checked} shape variant(s)" if progress.variants_checked else ""
        lines.append(f"Correct on {config.trials} trials{shapes}; max abs error {progress.max_abs:.3g}, max rel error {progress.max_rel:.3g}.")
        if speedup_eager is not None:
            lines.append(
                f"Runtime {timing['runtime_ms']:.4f} ms (IQR {timing['runtime_spread_ms']:.4f}, {timing['timed_calls']} calls) vs reference "
                f"{timing['ref_eager_ms']:.4f} ms eager: speedup {speedup_eager:.3f}x"
                + (f", {speedup_compile:.3f}x vs torch.compile" if speedup_compile else "")
                + "."
            )
        lines.extend(progress.notes)
        if "timing-not-meaningful" in progress.flags:
            lines.append("Timing is not meaningful on this machine (interpreter); no speedup is reported.")
    seconds = StageSeconds(**{k: round(v, 6) for k, v in progress.seconds.items()})
    build_seconds = sum(b.seconds for b in h.builds)
    return conclude(
        job.task.id,
        job.backend,
        status,
        reward=reward,
        details=lines,
        violations=violations,
        lead=lead,
        compiled=compiled,
        correct=correct,
        speedup_eager=speedup_eager,
        timing_meaningful=meaningful,
        speedup_compile=speedup_compile,
        faster=faster,
        runtime_ms=timing.get("runtime_ms") if correct else None,
        runtime_spread_ms=timing.get("runtime_spread_ms") if correct else None,
        timed_calls=int(timing.get("timed_calls", 0)) if correct else 0,
        ref_eager_ms=timing.get("ref_eager_ms"),
        ref_compile_ms=timing.get("ref_compile_ms"),
        max_abs_error=progress.max_abs if compiled else None,
        max_rel_error=progress.max_rel if compiled else None,
        flags=tuple(progress.flags),
        seconds=seconds,
        cache_hit=bool(h.builds) and all(b.cache_hit for b in h.builds) and build_seconds < 5.0,
        custom_kernel_calls=h.kernel_calls,
        seeds=job.seeds[: config.trials + 1],
        device=backend.device_name(),
        rules=config.rules,
        weights=config.weights,
        own_kernel_share=timing.get("own_kernel_share") if correct else None,
    )
