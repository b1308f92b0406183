"""The trusted side of judging: reference, inputs, comparisons, timing and verdict (worker side only).

Holds:
    judge: judge one :class:`JudgeJob` against a candidate process, to an :class:`EvalResult`.
    Verdict: raised inside a stage to end the evaluation with a status.

This module runs in the judge's worker process, never in the candidate's. The
candidate runs in a process of its own (:mod:`kernelgym.verifier.candidate_side`)
and hands back outputs only, through buffers this side owns. Inputs are drawn on
the target device from fresh seeds; outputs are compared on the device; every
call of the candidate, checked or timed, runs the same way under the same guards
on fresh inputs, and the checked ones are chosen after the call returns; per-call
times the candidate reports are checked against this side's own clock.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import random
import statistics
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
from kernelgym.backends.native import trim_compiler_log
from kernelgym.verifier.candidate_side import run_call
from kernelgym.verifier.channel import CandidateChannel, CandidateCrash, CandidateProtocolError, CandidateTimeout
from kernelgym.verifier.compare import Comparison, Mismatch, checksum, compare_outputs, flatten_outputs, same_bytes
from kernelgym.verifier.feedback import compose_feedback
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.result import EvalResult, StageSeconds, Status, Violation
from kernelgym.verifier.timing_audit import audit_claims
from kernelgym.verifier.trial_inputs import Refresher, SharedBuffers, draw_inputs, tensor_bytes

__all__ = ["judge", "Verdict"]

_perf_counter = time.perf_counter

# (training mode, grad enabled) per correctness trial, cycled.
_MODES = ((False, False), (True, True), (False, True))
# The trial (of the first shape) in which every floating parameter and buffer is redrawn.
_REDRAW_TRIAL = 1
# Every timed call's output is compared when the reference costs less than this in all; otherwise a sample.
_VERIFY_ALL_SECONDS = 3.0
_VERIFY_ALL_BYTES = 64 * 1024**2
_SAMPLED_CALLS = 8


class Verdict(Exception):
    """Raised inside a stage to end the evaluation with a status."""

    def __init__(self, status: Status, details: list[str], violations: tuple[Violation, ...] = (), lead: str = "") -> None:
        super().__init__(details[0] if details else status.value)
        self.status = status
        self.details = details
        self.violations = violations
        self.lead = lead


def _illegal(sentence: str, rule: str, message: str) -> Verdict:
    return Verdict(Status.ILLEGAL, [sentence], (Violation(rule, 0, message, "runtime"),))


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
    notes: list[str] = field(default_factory=list)
    variants_checked: int = 0


def _load_module(name: str, source: str, directory: Path) -> ModuleType:
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = directory / f"{name}_{digest}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"{name}_{digest}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _build_verdict(message: str, log: str) -> Verdict:
    """A compile error whose feedback starts with the compiler's first error line."""
    lines = (trim_compiler_log(log) if log else "").splitlines()
    if not lines:
        return Verdict(Status.COMPILE_ERROR, [], lead=message)
    return Verdict(Status.COMPILE_ERROR, ["\n".join(lines[1:]), f"({message})"], lead=lines[0])


class _Harness:
    """The reference, the candidate's process and the stage clock, for one job."""

    def __init__(self, job: JudgeJob, backend: Backend, candidate: CandidateChannel, work_dir: Path,
                 on_stage: Callable[[str, float], None], progress: _Progress) -> None:
        self.job = job
        self.config = job.config
        self.backend = backend
        self.candidate = candidate
        self.work_dir = work_dir
        self.on_stage = on_stage
        self.progress = progress
        self.device = backend.device()
        self.builds: list[BuildRecord] = []
        self.reference: ModuleType | None = None
        self.kernel_calls = 0
        self.baseline: dict[str, Any] = {}
        self.buffers = SharedBuffers(candidate.dir)
        self.bound: tuple | None = None
        self.local_inputs: list[Any] = []
        self.local_outputs: list[Any] = []
        self.reference_seconds: list[float] = []
        self.rng = random.SystemRandom()
        self.build_root = work_dir
        self.stage_name, self.stage_budget, self.deadline = "build", 0.0, 0.0

    # --- the stage clock ----------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str, budget: float) -> Iterator[None]:
        start = _perf_counter()
        self.stage_name = name
        self.set_budget(budget, start)
        try:
            yield
        finally:
            self.progress.seconds[name] = self.progress.seconds.get(name, 0.0) + _perf_counter() - start

    def set_budget(self, budget: float, start: float | None = None) -> None:
        """(Re)set the running stage's budget, counted from its start."""
        begun = start if start is not None else self.deadline - self.stage_budget
        self.stage_budget, self.deadline = budget, begun + budget
        self.on_stage(self.stage_name, budget)

    def ask(self, *command: Any) -> dict[str, Any]:
        """One request to the candidate within the stage's budget; failures become verdicts."""
        try:
            return self.candidate.request(command, self.deadline - _perf_counter())
        except CandidateTimeout:
            elapsed = self.stage_budget - max(self.deadline - _perf_counter(), 0.0)
            raise Verdict(Status.TIMEOUT, [
                f"The {self.stage_name} stage exceeded its {self.stage_budget:.0f} s budget (stopped after {elapsed:.0f} s); "
                "the candidate's process was killed."
            ]) from None
        except CandidateCrash as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"Your program's process crashed during the {self.stage_name} stage: {exc}"]) from None
        except CandidateProtocolError as exc:
            raise _illegal("Your program wrote on the judge's channel.", "forged-message", str(exc)) from None

    # --- build ----------------------------------------------------------------------------------

    def load(self) -> None:
        task = self.job.task
        try:
            self.reference = _load_module("reference", task.source, self.work_dir)
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(self.reference, name):
                    raise AttributeError(f"the task program does not define {name}")
        except Exception as exc:  # the task itself is broken: not the candidate's fault
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error in {task.id}: {type(exc).__name__}: {exc}"]) from None
        reply = self.ask("load", self.job.code)
        self.builds = [BuildRecord(str(k), float(s), bool(h)) for k, s, h in reply.get("builds", [])]
        if not reply.get("ok"):
            error, message = reply.get("error"), str(reply.get("message", ""))
            if error == "build":
                raise _build_verdict(message, str(reply.get("log", "")))
            if error == "illegal":
                raise _illegal(message, str(reply.get("rule", "forbidden-native-symbol")), str(reply.get("detail", message)))
            raise Verdict(Status.FORMAT_ERROR if error == "format" else Status.RUNTIME_ERROR, [message])
        if "Model" in reply.get("mro", []):
            raise _illegal("ModelNew derives from the reference Model.", "inherits-model", "ModelNew must not inherit from Model; subclass nn.Module.")
        self.observe_state(reply, "while loading")
        self.baseline = self.candidate.process_state()

    def observe_state(self, reply: dict[str, Any], when: str) -> None:
        changes = reply.get("state") or []
        if changes:
            raise _illegal(f"The candidate changed global state {when}.", "global-state-changed", "; ".join(map(str, changes)))

    def check_process(self, when: str) -> None:
        """Threads, affinity, signal handlers and limits of the candidate's process are as they were after loading."""
        now = self.candidate.process_state()
        changes = [f"{key} {self.baseline.get(key)} -> {value}" for key, value in now.items() if self.baseline.get(key) != value]
        if changes:
            raise _illegal(f"The candidate changed its process {when}.", "process-state-changed", "; ".join(changes))

    # --- models and calls ---------------------------------------------------------------------------

    def models(self, variant: dict[str, Any]) -> torch.nn.Module:
        """Build the reference here and ``ModelNew`` there, with the same init inputs and the reference's state."""
        assert self.reference is not None
        for key, value in variant.items():
            setattr(self.reference, key, value)
        seed = self.job.seeds[0]  # never an input seed: __init__ cannot pre-draw the trial inputs
        torch.manual_seed(seed)
        init_inputs = list(self.reference.get_init_inputs())
        torch.manual_seed(seed)
        reference = self.reference.Model(*init_inputs).to(self.device)
        reply = self.ask("construct", seed, init_inputs, _host_state(reference))
        if not reply.get("ok"):
            raise Verdict(Status.RUNTIME_ERROR, [str(reply.get("message"))])
        self.observe_state(reply, "while building ModelNew")
        return reference

    def redraw_weights(self, reference: torch.nn.Module) -> bool:
        """Move every floating parameter and buffer away from its initial value, here and there."""
        state = reference.state_dict()
        floating = {k: v for k, v in state.items() if v.is_floating_point() and v.numel()}
        if not floating:
            return False
        with torch.no_grad():
            for name, value in floating.items():
                noise = torch.randn_like(value) * (0.25 * float(value.abs().mean()) + 0.25)
                value.add_(noise)
                if name.endswith("running_var"):
                    value.abs_().add_(1e-3)
        reply = self.ask("state", _host_state(reference))
        if not reply.get("ok"):
            raise Verdict(Status.RUNTIME_ERROR, [str(reply.get("message"))])
        return True

    def reference_call(self, reference: torch.nn.Module, inputs: list[Any], training: bool, grad: bool) -> Any:
        """The expected output (on a copy of the inputs, which the reference may mutate); its cost is recorded."""
        reference.train(training)
        start = _perf_counter()
        with torch.set_grad_enabled(grad):
            expected = reference(*_clone(inputs))
        self.backend.synchronize()
        self.reference_seconds.append(_perf_counter() - start)
        return expected

    def bind(self, inputs: list[Any], expected: Any) -> None:
        """Share input and output buffers shaped like these (again only when the shapes change)."""
        signature = (_signature(inputs), _signature(flatten_outputs(expected)))
        if self.bound == signature:
            return
        self.local_inputs, remote_inputs = self.buffers.share_all(inputs)
        outputs, remote_outputs = [], []
        for leaf in flatten_outputs(expected):
            if isinstance(leaf, torch.Tensor):
                mine, theirs = self.buffers.share(leaf)
                outputs.append(mine)
                remote_outputs.append(theirs)
            else:
                outputs.append(None)
                remote_outputs.append(None)
        self.local_outputs = outputs
        reply = self.ask("bind", remote_inputs, remote_outputs)
        if not reply.get("ok"):
            raise Verdict(Status.RUNTIME_ERROR, [str(reply.get("message"))])
        self.bound = signature

    def call(self, inputs: list[Any], training: bool, grad: bool) -> tuple[dict[str, Any], float]:
        """One candidate call on ``inputs`` (copied into the shared buffers); returns its reply and the judge's own seconds.

        The judge's own measurement is the wall time of the request on a device, and
        the candidate's CPU time on a host (where waiting for a shared core is no work).
        """
        for dst, src in zip(self.local_inputs, inputs, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        self.backend.synchronize()
        reply, own = self.measured("call", training, grad)
        if not reply.get("ok"):
            if reply.get("error") == "build":
                raise _build_verdict(str(reply.get("message")), str(reply.get("log", "")))
            raise Verdict(Status.RUNTIME_ERROR, [str(reply.get("message"))])
        ops = [str(op) for op in reply.get("ops", [])]
        if ops:
            listed = ", ".join(f"aten.{op}" for op in ops[:12])
            raise _illegal("PyTorch computed part of the answer during ModelNew.forward.", "aten-fallback",
                           f"ATen compute ops dispatched during forward: {listed}. Implement them in your kernel.")
        calls = int(reply.get("kernel_calls", 0))
        if calls == 0:
            raise _illegal("No custom kernel ran during ModelNew.forward.", "decoy-kernel",
                           "forward must call your compiled kernel; defining it is not enough.")
        self.kernel_calls = calls
        self.observe_state(reply, "during ModelNew.forward")
        for shared, original in zip(self.local_inputs, inputs, strict=True):
            if isinstance(shared, torch.Tensor) and not same_bytes(shared, original):
                raise Verdict(Status.INCORRECT, ["The candidate modified its inputs."], (
                    Violation("input-mutation", 0, "forward must not write to its inputs; write results to new tensors.", "runtime"),))
        return reply, own

    def measured(self, *command: Any) -> tuple[dict[str, Any], float]:
        """A request and the judge's own measure of its cost (see :meth:`call`)."""
        host = self.device.type == "cpu"
        start = self.candidate.cpu_seconds() if host else _perf_counter()
        reply = self.ask(*command)
        return reply, (self.candidate.cpu_seconds() if host else _perf_counter()) - start

    def outputs(self, reply: dict[str, Any], expected: Any) -> tuple[Mismatch | None, list[Any]]:
        """Read the kept outputs back (after checking what the candidate says they are)."""
        mismatch = _leaf_mismatch(flatten_outputs(expected), reply.get("leaves", []))
        if mismatch is not None:
            return mismatch, []
        fetched = self.ask("fetch")
        if not fetched.get("ok"):
            raise Verdict(Status.RUNTIME_ERROR, [str(fetched.get("message"))])
        leaves = [buffer if buffer is not None else meta.get("value") for buffer, meta in zip(self.local_outputs, reply["leaves"], strict=True)]
        return None, leaves

    def compare(self, expected: Any, got: list[Any]) -> Comparison:
        atol, rtol = _tolerances(self.job)
        result = compare_outputs(flatten_outputs(expected), got, [], atol, rtol, self.config.low_precision_tol)
        self.progress.max_abs = max(self.progress.max_abs, result.max_abs_error)
        self.progress.max_rel = max(self.progress.max_rel, result.max_rel_error)
        return result


def _host_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _signature(values: list[Any]) -> tuple:
    return tuple((tuple(v.shape), v.dtype, v.device) if isinstance(v, torch.Tensor) else type(v).__name__ for v in values)


def _leaf_mismatch(expected: list[Any], leaves: list[Any]) -> Mismatch | None:
    """What the candidate reports about its outputs, against the reference's (count, type, aliasing, shape, dtype, device)."""
    if len(leaves) != len(expected):
        return Mismatch("wrong-output", f"expected {len(expected)} output(s), got {len(leaves)}")
    for index, (ref, meta) in enumerate(zip(expected, leaves, strict=True)):
        label = f"output {index}" if len(expected) > 1 else "the output"
        if not isinstance(meta, dict):
            return Mismatch("wrong-output", f"{label} could not be read")
        if not isinstance(ref, torch.Tensor):
            if meta.get("kind") != "value" or meta.get("value") != ref:
                return Mismatch("wrong-output", f"{label} should be {ref!r}, got {meta.get('value', meta.get('type'))!r}")
            continue
        if meta.get("kind") != "tensor" or not meta.get("plain"):
            return Mismatch("output-not-plain-tensor", f"{label} is a {meta.get('type')}, not a plain torch.Tensor", illegal=True)
        if meta.get("aliases_input"):
            return Mismatch("output-aliases-input", f"{label} shares memory with an input; return a tensor of your own", illegal=True)
        if tuple(meta.get("shape", ())) != tuple(ref.shape):
            return Mismatch("wrong-output", f"{label} has shape {tuple(meta.get('shape', ()))}, expected {tuple(ref.shape)}")
        if meta.get("dtype") != str(ref.dtype):
            return Mismatch("wrong-output", f"{label} has dtype {meta.get('dtype')}, expected {ref.dtype}")
        if str(meta.get("device", "")).split(":")[0] != ref.device.type:
            return Mismatch("wrong-output", f"{label} is on {meta.get('device')}, expected {ref.device}")
    return None


def _mismatch_verdict(mismatch: Mismatch, context: str, rule: str) -> Verdict:
    status = Status.ILLEGAL if mismatch.illegal else Status.INCORRECT
    rule_id = mismatch.rule if mismatch.illegal or mismatch.rule != "wrong-output" else rule
    return Verdict(status, [f"{context}: {mismatch.message}"], (Violation(rule_id, 0, mismatch.message, "runtime"),))


def _tolerances(job: JudgeJob) -> tuple[float, float]:
    task = job.task
    return (
        task.atol if task.atol is not None else job.config.atol,
        task.rtol if task.rtol is not None else job.config.rtol,
    )


def _variants(h: _Harness) -> list[tuple[dict[str, Any], bool]]:
    """The shapes to check: the task's own first, then its declared variants, else variants derived from its source."""
    from kernelgym.tasks.variants import derive_variants

    shapes: list[tuple[dict[str, Any], bool]] = [({}, True)]
    if h.config.check_variants:
        declared = [dict(v) for v in h.job.task.variants]
        derived = [] if declared else [dict(v) for v in derive_variants(h.job.task.source)]
        shapes += [(v, True) for v in declared] + [(v, False) for v in derived]
    return shapes


def _mismatch_rule(h: _Harness, reference: torch.nn.Module, inputs: list[Any], got: list[Any], seen: set[tuple],
                   trial: int, variant: int, redrawn: bool) -> str:
    """Name the cause of a mismatch: a replayed output, a mode-dependent answer, assumed weights, a shape, or a wrong one."""
    if checksum(got) in seen:
        return "stale-output"
    training, grad = _MODES[trial % len(_MODES)]
    if training or grad:
        expected = h.reference_call(reference, inputs, False, False)
        reply, _ = h.call(inputs, False, False)
        mismatch, again = h.outputs(reply, expected)
        if mismatch is None and h.compare(expected, again).mismatch is None:
            return "mode-mismatch"
    if redrawn:
        return "initial-weights-assumed"
    if variant:
        return "shape-variant-mismatch"
    return "wrong-output" if trial == 0 else "stale-output"


def _check(h: _Harness) -> None:
    job, config = h.job, h.config
    assert h.reference is not None
    shapes = _variants(h)
    base = {key: getattr(h.reference, key) for shape, _ in shapes for key in shape if hasattr(h.reference, key)}
    budget_set = False
    for index, (variant, declared) in enumerate(shapes):
        unknown = [key for key in variant if not hasattr(h.reference, key)]
        if unknown:
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error: variant sets {unknown[0]!r}, which the task does not define."])
        try:
            reference = h.models({**base, **variant})
            probe = draw_inputs(h.reference, job.seeds[1], h.device) if not declared else None
            if probe is not None:
                h.reference_call(reference, probe, False, False)
        except Verdict:
            raise
        except Exception:
            if declared:
                raise
            continue  # a derived shape the reference itself cannot run: not a shape of this task
        seen: set[tuple] = set()
        redrawn_trial = False
        for trial in range(config.trials):
            training, grad = _MODES[trial % len(_MODES)]
            redrawn_trial = index == 0 and trial == _REDRAW_TRIAL and h.redraw_weights(reference)
            seed = job.seeds[1 + trial]
            inputs = draw_inputs(h.reference, seed, h.device)
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
                where = f"trial {trial + 1} (seed {seed}, {'train' if training else 'eval'} mode, grad {'on' if grad else 'off'})"
                if index:
                    where += f", shape variant {variant}"
                if redrawn_trial:
                    where += ", weights redrawn away from their initial values"
                rule = "wrong-output" if not got else _mismatch_rule(h, reference, inputs, got, seen, trial, index, redrawn_trial)
                raise _mismatch_verdict(mismatch, where, rule)
            seen.add(checksum(got))
        h.progress.variants_checked += 1 if index else 0
    for key, value in base.items():
        setattr(h.reference, key, value)
    h.check_process("during the correctness trials")
    h.progress.correct = True


def _time_reference(h: _Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, calls: int, warmup: int) -> tuple[list[float], list[float]]:
    """The reference timed here through the candidate's own call path (:func:`run_call`).

    Returns the timer's milliseconds per call and the judge's own measure of each
    whole call (CPU time of this thread on a host, wall time on a device), whose
    difference is the harness's overhead.
    """
    host = h.device.type == "cpu"
    clock = time.thread_time if host else _perf_counter
    tracker = KernelTracker()
    times, costs = [], []
    with torch.no_grad():
        for i in range(warmup + calls):
            refresher.refresh(inputs)
            h.backend.synchronize()
            start = clock()
            _, reply = run_call(reference, inputs, h.backend, tracker, False, False)
            json.dumps(reply)
            cost = clock() - start
            if i >= warmup:
                costs.append(cost * 1e3)
                times.append(float(reply["ms"]))
    return times, costs


def _time(h: _Harness) -> None:
    job, config, backend, progress = h.job, h.config, h.backend, h.progress
    if not backend.timing_meaningful:
        progress.flags.append("timing-not-meaningful")
        return
    reference = h.models({}).eval()  # both programs afresh at the task's own shapes
    assert h.reference is not None
    rng = random.Random(h.rng.randrange(2**63))
    per_call = statistics.median(h.reference_seconds) if h.reference_seconds else 0.01
    runs = config.runs or max(10, min(backend.default_runs, int(config.timing_seconds / max(per_call, 1e-6))))
    warmup = config.warmup + rng.randrange(0, 4)
    h.set_budget(config.timeouts.scaled(config.timeouts.time, per_call, 6 * (runs + warmup)))
    inputs = draw_inputs(h.reference, job.seeds[config.trials + 1], h.device)
    refresher = Refresher(h.reference, inputs, h.device, rng)
    ref_times, ref_walls = _time_reference(h, reference, inputs, refresher, runs, warmup)
    overhead_ms = max(statistics.median(w - t for w, t in zip(ref_walls, ref_times, strict=True)), 0.0)
    roundtrip_ms = statistics.median(h.measured("ping")[1] * 1e3 for _ in range(5))
    total = warmup + runs
    verify_all = per_call * total < _VERIFY_ALL_SECONDS and tensor_bytes(inputs) < _VERIFY_ALL_BYTES
    checked = set(range(total)) if verify_all else set(rng.sample(range(total), min(total, _SAMPLED_CALLS)))
    reported, judged = [], []
    seen: set[tuple] = set()
    with torch.no_grad():
        expected = h.reference_call(reference, inputs, False, False)
        h.bind(inputs, expected)
        for i in range(total):
            refresher.refresh(inputs)
            reply, own = h.call(inputs, False, False)
            if i >= warmup:
                reported.append(float(reply.get("ms", 0.0)))
                judged.append(own * 1e3)
            if i in checked:
                expected = h.reference_call(reference, inputs, False, False)
                mismatch, got = h.outputs(reply, expected)
                if mismatch is None:
                    mismatch = h.compare(expected, got).mismatch
                if mismatch is not None:
                    rule = "stale-output" if got and checksum(got) in seen else "timed-output-mismatch"
                    raise _mismatch_verdict(mismatch, f"timed call {i + 1} of {total} (fresh inputs)", rule)
                seen.add(checksum(got))
    h.check_process("while being timed")
    audit = audit_claims(reported, judged, roundtrip_ms, overhead_ms)
    ref_ms, _ = median_and_iqr(ref_times)
    new_ms, new_spread = audit.credited_ms, audit.spread_ms
    if audit.rejected:
        progress.flags.append("timing-claim-rejected")
        progress.notes.append(audit.sentence)
    moved = tensor_bytes(inputs) + tensor_bytes([t for t in h.local_outputs if isinstance(t, torch.Tensor)])
    bandwidth = config.roofline_bandwidth_gbs or backend.default_bandwidth_gbs
    floor_ms = moved / (bandwidth * 1e9) * 1e3
    if new_ms < floor_ms:
        wall_ms = audit.wall_ms
        if wall_ms < floor_ms:
            raise _illegal("The measured time is below what the memory traffic allows.", "excessive-speedup",
                           f"{wall_ms * 1e3:.2f} us per call (measured by the judge) is below the roofline floor of "
                           f"{floor_ms * 1e3:.2f} us ({moved} bytes at {bandwidth:.0f} GB/s)")
        progress.flags.append("excessive-speedup")
        progress.notes.append(f"Your reported {new_ms * 1e3:.2f} us per call is below the roofline floor of {floor_ms * 1e3:.2f} us; "
                              f"the judge's own measurement ({wall_ms * 1e3:.2f} us) is credited instead.")
        new_ms = wall_ms
    progress.timing.update(ref_eager_ms=ref_ms, runtime_ms=new_ms, runtime_spread_ms=new_spread, timed_calls=runs)
    if config.compile_baseline:
        progress.timing["ref_compile_ms"] = _compile_baseline(h, reference, inputs, refresher, runs, warmup)


def _compile_baseline(h: _Harness, reference: torch.nn.Module, inputs: list[Any], refresher: Refresher, runs: int, warmup: int) -> float | None:
    """Median time of ``torch.compile(Model)``, cached per (task, shapes, device, torch version)."""
    shapes = [tuple(t.shape) for t in inputs if isinstance(t, torch.Tensor)]
    key = json.dumps([h.job.task.id, hashlib.sha1(h.job.task.source.encode()).hexdigest(), shapes, h.backend.device_name(), torch.__version__])
    cache = h.build_root / "baselines" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    if cache.exists():
        return json.loads(cache.read_text())["ref_compile_ms"]
    try:
        compiled = torch.compile(reference)
        times, _ = _time_reference(h, compiled, inputs, refresher, runs, warmup + 2)
    except Exception:  # a baseline that cannot compile is reported as missing, not as the candidate's failure
        return None
    value = median_and_iqr(times)[0]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "ref_compile_ms": value}))
    return value


def judge(job: JudgeJob, candidate: CandidateChannel, build_root: Path, work_dir: Path,
          on_stage: Callable[[str, float], None] = lambda _s, _b: None) -> EvalResult:
    """Build, check, time and score one candidate running in ``candidate``'s process (build only when ``job.build_only``).

    ``on_stage(name, budget)`` is told each stage and its budget in seconds as it starts or its budget changes.
    """
    backend = get_backend(job.backend)
    progress = _Progress(seconds={"extract": job.extract_seconds, "inspect": job.inspect_seconds})
    h = _Harness(job, backend, candidate, work_dir, on_stage, progress)
    h.build_root = build_root
    status, details, violations, lead = Status.OK, [], (), ""
    timeouts = job.config.timeouts
    try:
        with h.stage("build", timeouts.build):
            h.load()
            progress.compiled = True
        if not job.build_only:
            with h.stage("check", timeouts.check):
                _check(h)
            if job.config.timing:
                with h.stage("time", timeouts.time):
                    _time(h)
    except Verdict as verdict:
        status, details, violations, lead = verdict.status, verdict.details, verdict.violations, verdict.lead
    except torch.cuda.OutOfMemoryError:
        status, details = Status.RUNTIME_ERROR, ["The judge ran out of device memory for this task's reference and buffers."]
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
    meaningful = correct and backend.timing_meaningful and config.timing
    faster = bool(speedup_eager and speedup_eager > config.faster_threshold)
    lines = list(details)
    if correct:
        shapes = f" and {progress.variants_checked} shape variant(s)" if progress.variants_checked else ""
        lines.append(f"Correct on {config.trials} trials{shapes}; max abs error {progress.max_abs:.3g}, max rel error {progress.max_rel:.3g}.")
        if speedup_eager is not None:
            lines.append(
                f"Runtime {timing['runtime_ms']:.4f} ms (IQR {timing['runtime_spread_ms']:.4f}) vs reference "
                f"{timing['ref_eager_ms']:.4f} ms eager: speedup {speedup_eager:.3f}x"
                + (f", {speedup_compile:.3f}x vs torch.compile" if speedup_compile else "")
                + "."
            )
        lines.extend(progress.notes)
        if "timing-not-meaningful" in progress.flags:
            lines.append("Timing is not meaningful on this machine (interpreter); no speedup is reported.")
    score = config.reward.score(status, compiled=compiled, correct=correct, speedup=speedup_eager, timing_meaningful=meaningful)
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
