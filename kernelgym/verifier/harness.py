"""The trusted side's hold on one job: the reference, the candidate's process, the stage clock (worker side only).

Holds:
    Harness: builds the reference here and ``ModelNew`` in the candidate's process, shares buffers with it,
        makes each call the same way and reads outputs back; every request runs within the stage's budget.
    Verdict: raised inside a stage to end the evaluation with a status.
    Progress: what the stages learned so far.
    illegal_verdict / mismatch_verdict: verdicts with a runtime rule.
    tolerances: the task's or the config's tolerances.
    clone_values: copies of the tensors among some values.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.backends import Backend, BuildRecord
from kernelgym.backends.native import beyond_floor, floor_stores, trim_compiler_log
from kernelgym.backends.symbols import describe_findings, exported_symbols, forbidden_symbols, imported_symbols
from kernelgym.verifier.candidate_side import call_signature, load_module
from kernelgym.verifier.channel import CandidateChannel, CandidateCrash, CandidateProtocolError, CandidateTimeout
from kernelgym.verifier.compare import Comparison, Mismatch, compare_outputs, flatten_outputs, leaf_mismatch, same_bytes
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.presets import get_preset
from kernelgym.verifier.result import Status, Violation
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.trial_inputs import SharedBuffers

__all__ = ["Harness", "Progress", "Verdict", "clone_values", "illegal_verdict", "mismatch_verdict", "tolerances", "perf_counter"]

# Captured at import, before anything else runs in this process.
perf_counter = time.perf_counter


class Verdict(Exception):
    """Raised inside a stage to end the evaluation with a status."""

    def __init__(self, status: Status, details: list[str], violations: tuple[Violation, ...] = (), lead: str = "") -> None:
        super().__init__(details[0] if details else status.value)
        self.status = status
        self.details = details
        self.violations = violations
        self.lead = lead


def illegal_verdict(sentence: str, violation: Violation) -> Verdict:
    """An ``illegal`` verdict naming one rule (its violation built by :mod:`kernelgym.verifier.rules.runtime`)."""
    return Verdict(Status.ILLEGAL, [sentence], (violation,))


@dataclass
class Progress:
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


def clone_values(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _build_verdict(message: str, log: str) -> Verdict:
    """A compile error whose feedback starts with the compiler's first error line."""
    lines = (trim_compiler_log(log) if log else "").splitlines()
    if not lines:
        return Verdict(Status.COMPILE_ERROR, [], lead=message)
    return Verdict(Status.COMPILE_ERROR, ["\n".join(lines[1:]), f"({message})"], lead=lines[0])


def _require_ok(reply: dict[str, Any]) -> None:
    """Turn a failed request into its verdict: a compile error, a refused build, a format error, or a runtime error."""
    if reply.get("ok"):
        return
    error, message = reply.get("error"), str(reply.get("message", ""))
    if error == "build":
        raise _build_verdict(message, str(reply.get("log", "")))
    if error == "illegal":
        detail = str(reply.get("detail", message))
        builders = {"forbidden-native-symbol": runtime.forbidden_native_symbol, "host-array-library": runtime.host_array_library}
        builder = builders.get(str(reply.get("rule")))
        violation = builder(detail) if builder else runtime.forged_message(f"a reply naming the unknown rule {reply.get('rule')!r}")
        raise illegal_verdict(message, violation)
    raise Verdict(Status.FORMAT_ERROR if error == "format" else Status.RUNTIME_ERROR, [message])


class Harness:
    """The reference, the candidate's process and the stage clock, for one job."""

    def __init__(self, job: JudgeJob, backend: Backend, candidate: CandidateChannel, build_root: Path, work_dir: Path,
                 on_stage: Callable[[str, float], None], progress: Progress) -> None:
        self.job = job
        self.build_root = build_root
        self.config = job.config
        self.backend = backend
        backend.poisoned_for = None  # the first timed reference call empties the allocator cache of earlier jobs
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
        self.stage_name, self.stage_budget, self.deadline = "build", 0.0, 0.0
        self.preset = get_preset(job.config.rules)
        self.checked_libraries: set[Path] = set()

    # --- the stage clock ----------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str, budget: float) -> Iterator[None]:
        start = perf_counter()
        self.stage_name = name
        self.set_budget(budget, start)
        try:
            yield
        finally:
            self.progress.seconds[name] = self.progress.seconds.get(name, 0.0) + perf_counter() - start

    def set_budget(self, budget: float, start: float | None = None) -> None:
        """(Re)set the running stage's budget, counted from its start."""
        begun = start if start is not None else self.deadline - self.stage_budget
        self.stage_budget, self.deadline = budget, begun + budget
        self.on_stage(self.stage_name, budget)

    def ask(self, *command: Any) -> dict[str, Any]:
        """One request to the candidate within the stage's budget; failures become verdicts."""
        try:
            return self.candidate.request(command, self.deadline - perf_counter())
        except CandidateTimeout:
            elapsed = self.stage_budget - max(self.deadline - perf_counter(), 0.0)
            raise Verdict(Status.TIMEOUT, [
                f"The {self.stage_name} stage exceeded its {self.stage_budget:.0f} s budget (stopped after {elapsed:.0f} s); "
                "the candidate's process was killed."
            ]) from None
        except CandidateCrash as exc:
            raise Verdict(Status.RUNTIME_ERROR, [f"Your program's process crashed during the {self.stage_name} stage: {exc}"]) from None
        except CandidateProtocolError as exc:
            raise illegal_verdict("Your program wrote on the judge's channel.", runtime.forged_message(str(exc))) from None

    # --- build ----------------------------------------------------------------------------------

    def load(self) -> None:
        task = self.job.task
        try:
            self.reference = load_module("reference", task.source, self.work_dir)
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(self.reference, name):
                    raise AttributeError(f"the task program does not define {name}")
        except Exception as exc:  # the task itself is broken: not the candidate's fault
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error in {task.id}: {type(exc).__name__}: {exc}"]) from None
        reply = self.ask("load", self.job.code, sorted(self.preset.admitted_concerns))
        self.builds = [BuildRecord(str(k), float(s), bool(h)) for k, s, h in reply.get("builds", [])]
        _require_ok(reply)
        if "Model" in reply.get("mro", []):
            raise illegal_verdict("ModelNew derives from the reference Model.", runtime.inherits_model())
        self.observe_state(reply, "while loading")
        self.check_libraries()
        self.baseline = self.candidate.process_state()

    def observe_state(self, reply: dict[str, Any], when: str) -> None:
        changes = reply.get("state") or []
        if changes:
            raise illegal_verdict(f"The candidate changed global state {when}.", runtime.global_state_changed([str(c) for c in changes]))

    def check_libraries(self) -> None:
        """Check, here, every built extension mapped into the candidate's process against the symbol allow-list.

        The candidate process refuses such builds itself before importing them, but that process is the
        candidate's; this check reads ``/proc/<pid>/maps`` and runs ``nm`` from the judge's side.
        """
        builds = self.build_root.resolve()
        for path in self.candidate.libraries():
            library = Path(path)
            if library in self.checked_libraries or builds not in library.parents or "aten_observer" in library.parts:
                continue
            self.checked_libraries.add(library)
            try:
                imported, exported = imported_symbols(library), exported_symbols(library)
            except (OSError, subprocess.SubprocessError):
                continue  # no nm here: the candidate side's own check stands
            findings = [f for f in forbidden_symbols(imported, self.job.backend, exported) if f.concern not in self.preset.admitted_concerns]
            # The judge's floor lives beside the cache, outside it: candidates cannot write it.
            findings = beyond_floor(findings, self.job.backend, floor_stores(self.build_root.parent)[0])
            if findings:
                detail = describe_findings(findings)
                raise illegal_verdict("Your compiled extension links against functions a native kernel must not use.",
                                      runtime.forbidden_native_symbol(detail))

    def check_process(self, when: str) -> None:
        """Threads, affinity, signal handlers and limits of the candidate's process are as they were after loading."""
        self.check_libraries()
        now = self.candidate.process_state()
        changes = [f"{key} {self.baseline.get(key)} -> {value}" for key, value in now.items() if self.baseline.get(key) != value]
        if changes:
            raise illegal_verdict(f"The candidate changed its process {when}.", runtime.process_state_changed(changes))

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
        _require_ok(reply)
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
        _require_ok(reply)
        return True

    def reference_call(self, reference: torch.nn.Module, inputs: list[Any], training: bool, grad: bool) -> Any:
        """The expected output (on a copy of the inputs, which the reference may mutate); its cost is recorded."""
        reference.train(training)
        start = perf_counter()
        with torch.set_grad_enabled(grad):
            expected = reference(*clone_values(inputs))
        self.backend.synchronize()
        self.reference_seconds.append(perf_counter() - start)
        return expected

    def bind(self, inputs: list[Any], expected: Any) -> None:
        """Share input and output buffers shaped like these (again only when the shapes change)."""
        signature = (call_signature(inputs), call_signature(flatten_outputs(expected)))
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
        _require_ok(reply)
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
        _require_ok(reply)
        ops = [str(op) for op in reply.get("ops", [])]
        if ops and "aten-fallback" not in self.preset.waived:
            listed = ", ".join(f"aten.{op}" for op in ops[:12])
            raise illegal_verdict("PyTorch computed part of the answer during ModelNew.forward.", runtime.aten_fallback(listed))
        calls = int(reply.get("kernel_calls", 0))
        if calls == 0 and "decoy-kernel" not in self.preset.waived:
            raise illegal_verdict("No custom kernel ran during ModelNew.forward.", runtime.decoy_kernel())
        self.kernel_calls = calls
        self.observe_state(reply, "during ModelNew.forward")
        for shared, original in zip(self.local_inputs, inputs, strict=True):
            if isinstance(shared, torch.Tensor) and not same_bytes(shared, original):
                raise Verdict(Status.INCORRECT, ["The candidate modified its inputs."], (runtime.input_mutation(),))
        return reply, own

    def measured(self, *command: Any) -> tuple[dict[str, Any], float]:
        """A request and the judge's own measure of its cost (see :meth:`call`)."""
        host = self.device.type == "cpu"
        start = self.candidate.cpu_seconds() if host else perf_counter()
        reply = self.ask(*command)
        return reply, (self.candidate.cpu_seconds() if host else perf_counter()) - start

    def outputs(self, reply: dict[str, Any], expected: Any) -> tuple[Mismatch | None, list[Any]]:
        """Read the kept outputs back (after checking what the candidate says they are)."""
        mismatch = leaf_mismatch(flatten_outputs(expected), reply.get("leaves", []))
        if mismatch is not None:
            return mismatch, []
        fetched = self.ask("fetch")
        _require_ok(fetched)
        leaves = [buffer if buffer is not None else meta.get("value") for buffer, meta in zip(self.local_outputs, reply["leaves"], strict=True)]
        return None, leaves

    def compare(self, expected: Any, got: list[Any]) -> Comparison:
        atol, rtol = tolerances(self.job)
        result = compare_outputs(flatten_outputs(expected), got, [], atol, rtol, self.config.low_precision_tol)
        self.progress.max_abs = max(self.progress.max_abs, result.max_abs_error)
        self.progress.max_rel = max(self.progress.max_rel, result.max_rel_error)
        return result


def _host_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def mismatch_verdict(mismatch: Mismatch, context: str, rule: str) -> Verdict:
    status = Status.ILLEGAL if mismatch.illegal else Status.INCORRECT
    rule_id = mismatch.rule if mismatch.illegal or mismatch.rule != "wrong-output" else rule
    return Verdict(status, [f"{context}: {mismatch.message}"], (runtime.output_violation(rule_id, mismatch.message),))


def tolerances(job: JudgeJob) -> tuple[float, float]:
    task = job.task
    return (
        task.atol if task.atol is not None else job.config.atol,
        task.rtol if task.rtol is not None else job.config.rtol,
    )
