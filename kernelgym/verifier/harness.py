"""The trusted side's hold on one job: the reference, the candidate's process, the stage clock (worker side only).

Holds:
    Harness: builds the reference here and ``ModelNew`` in the candidate's process, shares buffers with it,
        makes each call the same way and reads outputs back; every request runs within the stage's budget.
    Verdict: raised inside a stage to end the evaluation with a status.
    Progress: what the stages learned so far.
    illegal_verdict / mismatch_verdict: verdicts with a runtime rule.
    clone_values: copies of the tensors among some values.
    redrawable_state: the parameters and buffers a weights redraw moves.
"""

from __future__ import annotations

import contextlib
import functools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelgym.backends import Backend, BuildRecord
from kernelgym.backends.locks import device_lock, given_device_lock
from kernelgym.backends.native import beyond_floor, floor_stores, trim_compiler_log
from kernelgym.backends.store import ExtensionStore
from kernelgym.backends.symbols import describe_findings, forbidden_symbols
from kernelgym.verifier.candidate_side import call_signature, load_module
from kernelgym.verifier.channel import CandidateChannel, CandidateCrash, CandidateProtocolError, CandidateTimeout
from kernelgym.verifier.compare import (
    Comparison,
    Mismatch,
    checksum,
    compare_outputs,
    flatten_outputs,
    leaf_meta,
    leaf_mismatch,
    same_bytes,
)
from kernelgym.verifier.guard import compute_ops
from kernelgym.verifier.job import JudgeJob
from kernelgym.verifier.kernel_share import profiles
from kernelgym.verifier.kernelbench_numerics import allclose_mismatch
from kernelgym.verifier.mapped_code import RUNTIME_FILES, Places, installed
from kernelgym.verifier.placement import covered_names
from kernelgym.verifier.presets import contract_preset, get_preset, tolerances
from kernelgym.verifier.reference_builds import ReferenceBuilds
from kernelgym.verifier.result import Status, Violation
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.sandboxed_task import SandboxedProgram, SandboxedTask, TaskFailure
from kernelgym.verifier.trial_inputs import send_shared, share_buffers

__all__ = ["Harness", "Progress", "Verdict", "clone_values", "illegal_verdict", "require_ok", "mismatch_verdict", "redrawable_state",
           "perf_counter"]

IDLE_WAIT_SECONDS = 0.05
"""How long the judge waits for a candidate's threads to stop running before it reads its outputs again (host)."""

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


def require_ok(reply: dict[str, Any]) -> None:
    """Turn a failed request into its verdict: a compile error, a refused build, a format error, or a runtime error."""
    if reply.get("ok"):
        return
    error, message = reply.get("error"), str(reply.get("message", ""))
    if error == "build":
        raise _build_verdict(message, str(reply.get("log", "")))
    if error == "illegal":
        detail = str(reply.get("detail", message))
        builders = {"forbidden-native-symbol": runtime.forbidden_native_symbol, "host-array-library": runtime.host_array_library,
                    "work-after-return": runtime.work_after_return,
                    **{rule: functools.partial(runtime.output_violation, rule) for rule in ("output-not-plain-tensor", "output-not-plain-container")}}
        builder = builders.get(str(reply.get("rule")))
        violation = builder(detail) if builder else runtime.forged_message(f"a reply naming the unknown rule {reply.get('rule')!r}")
        raise illegal_verdict(message, violation)
    raise Verdict(Status.FORMAT_ERROR if error == "format" else Status.RUNTIME_ERROR, [message])


class Harness:
    """The reference, the candidate's process and the stage clock, for one job."""

    def __init__(self, job: JudgeJob, backend: Backend, candidate: CandidateChannel, build_root: Path, work_dir: Path,
                 on_stage: Callable[[str, float], None], progress: Progress,
                 twin: Callable[[], CandidateChannel] | None = None, quiet: Callable[[], None] = lambda: None) -> None:
        self.job = job
        self.twin = twin  # a fresh process made like the candidate's, for the reference's timing (host devices)
        self.quiet = quiet  # returns once no process started ahead is still starting (called before timed calls)
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
        self.reference: ModuleType | SandboxedProgram | None = None  # the task's program (a stand-in when sandboxed)
        self.kernel_calls = 0
        self.baseline: dict[str, Any] = {}
        self.bound: tuple | None = None
        self.local_inputs: list[Any] = []
        self.local_outputs: list[Any] = []
        self.reference_seconds: list[float] = []
        self.rng = random.SystemRandom()
        self.stage_name, self.stage_budget, self.deadline = "build", 0.0, 0.0
        self.preset = get_preset(job.config.rules)
        if job.strict_rejection is not None:  # judged under KernelBench's contract only: without the rules it lacks
            self.preset = contract_preset(self.preset)
        self.settings: list[str] = []  # under that contract, the settings the answer made (the reference gets them)
        self.checked_libraries: set[Path] = set()
        self.init_inputs: list[Any] = []
        self.unplaced_weights: list[str] = []
        self.constant_weights: list[str] = []
        self.unfilled_tensors: list[str] = []
        self.own_weights_differ = False  # ModelNew's own __init__ made other weights than the reference's (its report)
        self.constant_names: set[str] = set()  # module constants a shape has set in the answer's program (see models)
        self.reference_builds = ReferenceBuilds()
        self.cpus = 1
        self.last_reading: dict[int, float] | None = None
        self.idle_cpu_ms: list[float] = []
        self.pending_ms: list[float] = []
        self.stage_built = 0.0  # seconds the running stage spent waiting on builds (not charged to it)
        self.device_lock = given_device_lock()  # where judges share this device: every stage but the build holds it
        # What the check stage was checking last: a shape variant (None: the task's own) and a (training, grad) mode.
        self.checking: tuple[dict[str, Any] | None, tuple[bool, bool] | None] = (None, None)

    # --- the stage clock ----------------------------------------------------------------------

    @contextlib.contextmanager
    def stage(self, name: str, budget: float) -> Iterator[None]:
        """A stage of ``budget`` seconds. Where judges share the device, checks hold its lock shared and timed calls alone (the
        time stage; a check that :func:`~.kernel_share.profiles`): the wait counts in the stage's seconds, not its budget."""
        start = perf_counter()
        self.stage_name = name
        self.stage_built = 0.0
        with contextlib.ExitStack() as held:
            if self.device_lock is not None and name != "build":
                held.enter_context(device_lock(self.device_lock, name == "time" or profiles(self), lambda: self.on_stage(name, budget)))
            self.set_budget(budget, start if self.device_lock is None else perf_counter())
            try:
                yield
            finally:
                self.progress.seconds[name] = self.progress.seconds.get(name, 0.0) + perf_counter() - start

    def set_budget(self, budget: float, start: float | None = None) -> None:
        """(Re)set the running stage's budget, counted from its start, plus the time its builds took."""
        begun = start if start is not None else self.deadline - self.stage_budget - self.stage_built
        self.stage_budget, self.deadline = budget, begun + budget + self.stage_built
        self.on_stage(self.stage_name, budget + self.stage_built)

    def ask(self, *command: Any) -> dict[str, Any]:
        """One request to the candidate within the stage's budget; failures become verdicts.

        Builds the candidate asked for meanwhile (served by the trusted side) are the build stage's: the
        running stage's deadline moves by their time, which is counted as build time, not the stage's.
        """
        built_before = self.candidate.build_seconds
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
        finally:
            built = self.candidate.build_seconds - built_before
            if built > 0 and self.stage_name != "build":
                self.stage_built += built
                self.progress.seconds[self.stage_name] = self.progress.seconds.get(self.stage_name, 0.0) - built
                self.progress.seconds["build"] = self.progress.seconds.get("build", 0.0) + built
                self.set_budget(self.stage_budget)

    # --- build ----------------------------------------------------------------------------------

    def load(self) -> None:
        self.load_task()
        reply = self.ask("load", self.job.code, self.preset.tf32_convolutions)
        self.builds = [BuildRecord(str(k), float(s), bool(h)) for k, s, h in reply.get("builds", [])]
        require_ok(reply)
        if "Model" in reply.get("mro", []):
            raise illegal_verdict("ModelNew derives from the reference Model.", runtime.inherits_model())
        self.observe_state(reply, "while loading")
        self.check_libraries()
        self.baseline = self.candidate.process_state()
        self.cpus = max(1, len(self.baseline.get("affinity") or [None]))

    def load_task(self) -> None:
        """The task's program: a trusted task's (a suite's) imported here; an untrusted one's loaded in a process of
        its own made like the candidate's, never here (:mod:`~kernelgym.verifier.sandboxed_task`), each request to it
        given what is left of the stage's budget and at most the check stage's floor (its program builds nothing), each
        reply at most the memory its process may hold."""
        task = self.job.task
        if task.sandboxed:
            if self.twin is None:
                raise TaskFailure("this judge starts no process for a task's program, and runs none in its own")
            self.reference = SandboxedTask.start(self.twin(), lambda: min(self.deadline - perf_counter(), self.config.timeouts.check),
                                                 int(self.config.memory_limit_gb * 1024**3), task.source,
                                                 self.preset.tf32_convolutions)
            return
        try:
            self.reference = load_module("reference", task.source, self.work_dir)
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(self.reference, name):
                    raise AttributeError(f"the task program does not define {name}")
        except Exception as exc:  # the task itself is broken: not the candidate's fault
            raise Verdict(Status.RUNTIME_ERROR, [f"Task error in {task.id}: {type(exc).__name__}: {exc}"]) from None

    def close(self) -> None:
        """Kill the process of a sandboxed task's program, if one runs."""
        if isinstance(self.reference, SandboxedProgram):
            self.reference.__task__.close()

    def construct_ahead(self) -> None:
        """Construct ``ModelNew`` once with the task's own init inputs, without weights, so that every build its
        ``__init__`` asks for is made (or found to fail) now, in the build stage, and found in the store after.

        Only a build's own verdict (it did not compile, or links what it must not) is taken from it: any other
        failure (a device it cannot reach in a build-ahead worker, a weights-dependent ``__init__``) is left to
        the check stage's constructions, which judge it.
        """
        if self.reference is None:
            return
        init_inputs = self.init_inputs_for({})
        reply = self.ask("construct", self.job.seeds[0], init_inputs, {}, {})
        if reply.get("ok") or reply.get("error") in ("build", "illegal"):
            require_ok(reply)
            if not self.job.build_only:
                self.observe_state(reply, "while building ModelNew")

    def observe_state(self, reply: dict[str, Any], when: str) -> None:
        changes = [str(c) for c in reply.get("state") or []]
        if "global-flags" in self.preset.waived:  # KernelBench's contract: settings may change; functions stay
            self.settings += [c for c in changes if not c.endswith(" was replaced")]
            changes = [c for c in changes if c.endswith(" was replaced")]
        if changes:
            raise illegal_verdict(f"The candidate changed global state {when}.", runtime.global_state_changed([str(c) for c in changes]))

    def check_libraries(self) -> None:
        """Only verified code runs: check, here, every file mapped executable into the candidate's process.

        A store entry must hash to the judge's record of it (then its recorded symbols are checked
        against the allow-list); anything else must be part of the installed runtime (Python, torch,
        system libraries, the judge's observer) and lie outside every place a candidate can write.
        Reads ``/proc/<pid>/maps`` from the judge's side; the candidate's process is never asked.
        """
        store = ExtensionStore(self.build_root)
        places = Places.of(self.build_root, self.candidate.dir)
        for path in self.candidate.libraries():
            if path in RUNTIME_FILES:
                continue
            library = Path(path)
            if library in self.checked_libraries:
                continue
            record = store.verified(library)
            if record is None and not installed(path, places, self.job.backend):
                raise illegal_verdict("Your program loaded native code the judge did not build.", runtime.unverified_library(path))
            self.checked_libraries.add(library)
            if record is None:
                continue
            findings = [f for f in forbidden_symbols(list(record.imported), self.job.backend, list(record.exported))
                        if f.concern not in self.preset.admitted_concerns]
            # The judge's floor lives beside the cache, outside it: candidates cannot write it.
            findings = beyond_floor(findings, self.job.backend, floor_stores(self.build_root.parent)[0])
            if findings:
                detail = describe_findings(findings)
                raise illegal_verdict("Your compiled extension links against functions a native kernel must not use.",
                                      runtime.forbidden_native_symbol(detail))

    def check_process(self, when: str) -> None:
        """Affinity, signal handlers and limits of the candidate's process are as they were after loading.

        The number of its threads may differ: an OpenMP runtime grows its pool for a ``num_threads(8)``
        team and shrinks it for a smaller one, and threads left idle after a call change nothing the
        verdict rests on. What threads do after a call returns is ``work-after-return``, read from their
        CPU time between requests (:meth:`measured`) and from the outputs read again once they are idle.
        The handlers glibc installs for itself at the process's first new thread are not the candidate's
        (:data:`_LIBC_SIGNALS`).
        """
        self.check_libraries()
        now = self.candidate.process_state()
        changes = [f"{key} {self.baseline.get(key)} -> {value}" for key, value in now.items()
                   if key != "threads" and _compared(key, self.baseline.get(key)) != _compared(key, value)]
        if changes:
            raise illegal_verdict(f"The candidate changed its process {when}.", runtime.process_state_changed(changes))

    # --- models and calls ---------------------------------------------------------------------------

    def models(self, variant: dict[str, Any]) -> torch.nn.Module:
        """Build the reference here and ``ModelNew`` there, with the same init inputs and seed, and the reference's state
        (none under the ``seeded`` weights contract: ``ModelNew`` keeps its own, as KernelBench builds it).

        The state reaches ``ModelNew`` by name, then by shape and role among tensors of equal shape and
        dtype (:func:`~kernelgym.verifier.placement.transfer_state`). ``constant_weights`` keeps the
        floating ones ``ModelNew`` names in its ``constant_weights`` (:func:`~kernelgym.verifier.placement.covered_names`);
        ``unplaced_weights`` the other floating ones its process reports it could not place;
        ``unfilled_tensors`` the tensors of ``ModelNew`` it reports received none (only a rule's name rests
        on those). The report is the candidate's: one that hides an unplaced tensor gets the answer checked
        with weights it never received, one that calls a placed tensor unplaced gets what an answer truly
        holding no such tensor gets (``weights-unplaced``), and one that declares more constants than its
        program does gets a lower score (:meth:`redraw_weights`).
        """
        self.init_inputs = self.init_inputs_for(variant)
        seed = self.job.seeds[0]
        reference = self.initial_reference()
        # The shape's module constants are set in the answer's program too, where it defines them: a ModelNew whose
        # __init__ reads batch_size, as the reference's may, is built for the shape it is then called on.
        # (Names set for an earlier shape are sent again, with the values the reference program holds now.)
        self.constant_names |= set(variant)
        constants = {key: getattr(self.reference, key) for key in sorted(self.constant_names)}
        # Under the seeded contract ModelNew keeps what its __init__ made from the seed, as KernelBench builds it.
        state = {} if self.config.weights == "seeded" else self.shared_state(reference)
        reply = self.ask("construct", seed, self.init_inputs, state, constants)
        require_ok(reply)
        self.observe_state(reply, "while building ModelNew")
        reported, declared = reply.get("unplaced"), reply.get("constant")
        names = {str(name) for name in reported} if isinstance(reported, list) else set()
        floating = list(redrawable_state(reference))
        self.constant_weights = covered_names([str(entry) for entry in declared] if isinstance(declared, list) else [], floating)
        self.unplaced_weights = [name for name in floating if name in names and name not in self.constant_weights]
        unfilled = reply.get("unfilled")
        self.unfilled_tensors = [str(name) for name in unfilled] if isinstance(unfilled, list) else []
        self.own_weights_differ = self.own_weights_differ or bool(reply.get("differed"))
        return reference

    def init_inputs_for(self, variant: dict[str, Any]) -> list[Any]:
        """Set ``variant``'s module constants in the reference program and return its init inputs there."""
        assert self.reference is not None
        for key, value in variant.items():
            setattr(self.reference, key, value)
        torch.manual_seed(self.job.seeds[0])  # never an input seed: __init__ cannot pre-draw the trial inputs
        return list(self.reference.get_init_inputs())

    def send_state(self, reference: torch.nn.Module) -> None:
        """Load ``reference``'s parameters and buffers into ``ModelNew`` (by name, then by shape and role)."""
        reply = self.ask("state", self.shared_state(reference))
        require_ok(reply)

    def shared_state(self, reference: torch.nn.Module) -> dict[str, Any]:
        """``reference``'s parameters and buffers copied into one sealed memfd sent to the candidate's process now
        (it arrives with the next command); returns what that command carries in their place.

        A copy of the candidate's own: what it does to it reaches nothing of the judge's. Pickled through the
        channel instead, a GEMM task's 8192 x 8192 weights cost about half a second per transfer.
        """
        state = {name: value.detach() for name, value in reference.state_dict().items()}
        shared = send_shared(self.candidate, list(state.values()), on_host=True, fill=True)
        return dict(zip(state, shared.remote, strict=True))

    def initial_reference(self, seed: int | None = None) -> torch.nn.Module:
        """The reference as :meth:`models` last built it, at its initial weights (from ``seed`` if given; :class:`ReferenceBuilds`)."""
        program, init_inputs = self.reference, self.init_inputs
        assert program is not None
        return self.reference_builds.get(self.job.seeds[0] if seed is None else seed, init_inputs, program,
                                         lambda: program.Model(*init_inputs).to(self.device))

    def redraw_weights(self, reference: torch.nn.Module) -> bool:
        """Move every floating parameter and buffer away from its initial value, here and there, but those held constant.

        Returns whether any moved. None moves under the ``fixed`` and ``seeded`` weights contracts (an unplaced
        tensor is no fault there: KernelBench's weights never change) or in a task that has none. Under ``redrawn``:

        * a tensor with no place in ``ModelNew`` that it does not declare constant makes the answer
          ``incorrect`` (``weights-unplaced``): it could not follow that tensor when it changed;
        * those it names in ``constant_weights`` stay at their initial values, so it is checked there only:
          the result is flagged ``weights-not-redrawn``, with a note naming them, and scored lower
          (:func:`~kernelgym.verifier.judge.judge`: correctness at half weight, no speed term).
        """
        if self.config.weights in ("fixed", "seeded"):
            return False
        floating = redrawable_state(reference)
        if not floating:
            return False

        def listed(names: list[str]) -> str:
            more = f" and {len(names) - 6} more" if len(names) > 6 else ""
            return ", ".join(f"`{name}` {tuple(floating[name].shape)}" for name in names[:6]) + more

        if self.unplaced_weights:
            raise Verdict(Status.INCORRECT, ["The reference's weights change in one trial; ModelNew has nowhere to receive some of them."],
                          (runtime.weights_unplaced(listed(self.unplaced_weights)),))
        if self.constant_weights:
            self.progress.flags.append("weights-not-redrawn")
            self.progress.notes.append(
                f"Weights held constant: ModelNew names the reference's {listed(self.constant_weights)} in `constant_weights`, so "
                "they kept their initial values in every trial and the answer was checked there only; it scores half the "
                "reward for correctness and none for speed. Compute from them in forward to earn the full reward."
            )
        moving = {name: value for name, value in floating.items() if name not in self.constant_weights}
        if not moving:
            return False
        with torch.no_grad():
            for name, value in moving.items():
                noise = torch.randn_like(value) * (0.25 * float(value.abs().mean()) + 0.25)
                value.add_(noise)
                if name.endswith("running_var"):
                    value.abs_().add_(1e-3)
        self.send_state(reference)
        return True

    def reference_call(self, reference: torch.nn.Module, inputs: list[Any], training: bool | None, grad: bool) -> Any:
        """The expected output (on a copy of the inputs, which the reference may mutate); its cost is recorded."""
        if training is not None:  # None: as built (KernelBench's contract calls neither train() nor eval())
            reference.train(training)
        start = perf_counter()
        with torch.set_grad_enabled(grad):
            expected = reference(*clone_values(inputs))
        self.backend.synchronize()
        self.reference_seconds.append(perf_counter() - start)
        return expected

    def bind(self, inputs: list[Any], expected: Any) -> None:
        """Share input and output buffers shaped like these (again only when the shapes change).

        The host buffers are one sealed memfd, sent by descriptor just before the ``bind`` command.
        """
        signature = (call_signature(inputs), call_signature(flatten_outputs(expected)))
        if self.bound == signature:
            return
        self.local_inputs, self.local_outputs, remote = share_buffers(self.candidate, inputs, flatten_outputs(expected))
        reply = self.ask("bind", *remote)
        require_ok(reply)
        self.bound = signature

    def write_inputs(self, inputs: list[Any]) -> None:
        """Copy ``inputs`` into the shared input buffers (bound by :meth:`bind`)."""
        for dst, src in zip(self.local_inputs, inputs, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)

    @contextlib.contextmanager
    def attached(self, process: CandidateChannel) -> Iterator[None]:
        """Within the block, requests, shared buffers and the checks of loaded code and watched operators go to
        ``process`` (a fresh one made like the candidate's), which is closed after; the candidate's are restored."""
        saved = self.candidate, self.bound, self.local_inputs, self.local_outputs
        self.candidate, self.bound = process, None
        try:
            yield
        finally:
            self.candidate, self.bound, self.local_inputs, self.local_outputs = saved
            close = getattr(process, "close", None)
            if close is not None:
                close()

    def reuse_freed_memory(self) -> None:
        """From now on the candidate's process hands out freed host memory again most recently freed first
        (:meth:`~kernelgym.verifier.candidate_side.CandidateSide.cmd_reuse`), as the reference's twin does."""
        require_ok(self.ask("reuse"))

    def call(self, inputs: list[Any], training: bool | None, grad: bool, python_guard: bool = True) -> tuple[dict[str, Any], float]:
        """One candidate call on ``inputs`` (copied into the shared buffers); returns its reply and the judge's own ms.

        The judge's own measure (:meth:`measured`) is the wall time of the request on a device and, on a
        host, the CPU time its threads ran over it (see :meth:`measured`). ``python_guard=False`` leaves the
        call to the native observer alone (for calls whose time is credited).
        """
        self.write_inputs(inputs)
        self.backend.synchronize()
        reply, own = self.measured("call", training, grad, python_guard)
        require_ok(reply)
        self.check_watched(reply)
        calls = int(reply.get("kernel_calls", 0))
        if calls == 0 and "decoy-kernel" not in self.preset.waived:
            raise illegal_verdict("No custom kernel ran during ModelNew.forward.", runtime.decoy_kernel())
        self.kernel_calls = calls
        self.observe_state(reply, "during ModelNew.forward")
        self.pending_ms.append(float(reply.get("pending_ms", 0.0)))
        for shared, original in zip(self.local_inputs, inputs, strict=True):
            if isinstance(shared, torch.Tensor) and not same_bytes(shared, original) and "input-mutation" not in self.preset.waived:
                raise Verdict(Status.INCORRECT, ["The candidate modified its inputs."], (runtime.input_mutation(),))
        return reply, own

    def check_watched(self, reply: dict[str, Any]) -> None:
        """The operators a watched call ran (the native observer's record, and the Python guard's in ``reply``) are allowed."""
        # What the observer saw comes from its own record (written from C++ to the judge's memfd), not from the reply,
        # which the candidate's Python could rewrite; the reply adds what the Python guard saw, on watched calls.
        seen = self.candidate.observed()
        if seen is None:
            raise illegal_verdict("The judge's record of the operators ModelNew.forward ran was missing or changed.",
                                  runtime.observer_record_missing())
        ops = sorted({str(op) for op in reply.get("ops", [])} | set(compute_ops([n for n in seen if n.startswith("aten::")])))
        if ops and "aten-fallback" not in self.preset.waived:
            listed = ", ".join(f"aten.{op}" for op in ops[:12])
            raise illegal_verdict("PyTorch computed part of the answer during ModelNew.forward.", runtime.aten_fallback(listed))

    def measured(self, *command: Any) -> tuple[dict[str, Any], float]:
        """A request and the judge's own measure of its cost, in ms, taken from outside the candidate.

        On a device: the wall time of the request. On a host, where waiting for a shared core is no
        work: the CPU time the candidate's threads ran over the request, as a lower bound on its wall
        time, the larger of the busiest thread's time and all threads' time over the CPUs it was given.
        CPU time its threads ran between the previous request's reply and this one is added to
        :attr:`idle_cpu_ms` (work that outlived a call runs there).
        """
        before = self.candidate.thread_cpu_seconds()
        if self.last_reading is not None:
            self.idle_cpu_ms.append(_cpu_delta(self.last_reading, before)[0] * 1e3)
        start = perf_counter()
        reply = self.ask(*command)
        wall = perf_counter() - start
        after = self.candidate.thread_cpu_seconds()
        self.last_reading = after
        if self.device.type != "cpu":
            return reply, wall * 1e3
        total, busiest = _cpu_delta(before, after)
        return reply, max(busiest, total / self.cpus) * 1e3

    def outputs(self, reply: dict[str, Any], expected: Any, late_check: bool = True) -> tuple[Mismatch | None, list[Any]]:
        """The outputs taken when the call returned (after checking what the candidate says they are), unchanged since.

        ``late_check``: on a host, also read the candidate's outputs again once its threads are idle (a request
        of its own) to see work that went on after the call had returned.
        """
        mismatch = leaf_mismatch(flatten_outputs(expected), reply.get("leaves", []), "output-aliases-input" in self.preset.waived)
        if mismatch is not None:
            return mismatch, []
        leaves = [buffer if buffer is not None else meta.get("value") for buffer, meta in zip(self.local_outputs, reply["leaves"], strict=True)]
        # The buffers hold what the call returned (taken at return); the candidate now copies what its outputs
        # hold by this time over them: any difference is work that went on after the call had returned.
        # On a device the take follows a synchronization of every stream: no kernel of the call can still run,
        # and a host thread that launches more is seen between calls (:func:`~.timing_stage.time_stage`).
        if self.device.type != "cpu" or not late_check:
            return None, leaves
        taken = checksum(leaves)
        self.wait_until_idle()
        fetched, _ = self.measured("fetch")  # measured, so the CPU it costs is not counted as idle
        require_ok(fetched)
        if checksum(leaves) != taken:
            raise illegal_verdict("Your output was still being written after ModelNew.forward returned.",
                                  runtime.work_after_return("an output changed after ModelNew.forward had returned"))
        return None, leaves

    def wait_until_idle(self) -> None:
        """Wait, at most :data:`IDLE_WAIT_SECONDS`, until no thread of the candidate is runnable.

        Its main thread waits for the next command once it has replied; a thread still running then is
        work that outlived the call, given the CPU here (the candidate may share one with this worker)
        so that what it writes shows when the outputs are read again.
        """
        deadline = perf_counter() + IDLE_WAIT_SECONDS
        while self.candidate.runnable_threads() and perf_counter() < deadline:
            time.sleep(0.001)

    def compare(self, expected: Any, got: list[Any]) -> Comparison:
        """kernelgym's comparison of ``got`` with ``expected`` (:func:`compare_outputs`), and under KernelBench's
        numbers (:attr:`JudgeJob.kernelbench_numerics`) KernelBench's ``torch.allclose`` after its structure check."""
        atol, rtol = tolerances(self.job)
        result = compare_outputs(flatten_outputs(expected), got, [], atol, rtol, self.config.low_precision_tol)
        if self.job.kernelbench_numerics and (result.mismatch is None or result.mismatch.rule == "wrong-output"):
            structure = leaf_mismatch(flatten_outputs(expected), [leaf_meta(new, set()) for new in got])
            mismatch = structure or allclose_mismatch(expected, got, atol, rtol)
            result = Comparison(mismatch, result.max_abs_error, result.max_rel_error)
        self.progress.max_abs = max(self.progress.max_abs, result.max_abs_error)
        self.progress.max_rel = max(self.progress.max_rel, result.max_rel_error)
        return result


_LIBC_SIGNALS = 1 << (32 - 1) | 1 << (33 - 1)
"""glibc's own signals (SIGCANCEL, SIGSETXID) in a ``/proc`` signal mask. It installs their handlers itself (SIGSETXID's
when the process starts its first thread, an OpenMP team's as much as any); ``sigaction`` refuses them to a program."""


def _compared(key: str, value: Any) -> Any:
    """A value of the candidate's process state as :meth:`Harness.check_process` compares it."""
    if key == "sigcgt" and isinstance(value, str):
        return int(value, 16) & ~_LIBC_SIGNALS
    return value


def _cpu_delta(before: dict[int, float], after: dict[int, float]) -> tuple[float, float]:
    """CPU seconds run between two readings by all threads together and by the busiest one (new threads from zero)."""
    deltas = [max(seconds - before.get(tid, 0.0), 0.0) for tid, seconds in after.items()]
    return sum(deltas), max(deltas, default=0.0)


def redrawable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The floating, non-empty parameters and buffers of ``model`` (those a redraw moves), by ``state_dict`` name."""
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point() and v.numel()}


def mismatch_verdict(mismatch: Mismatch, context: str, rule: str) -> Verdict:
    """An ``incorrect`` (or, for an illegal output, ``illegal``) verdict: one violation saying where and what differs.

    The sentence is the violation's only, so the feedback states it once, beside its rule id.
    """
    status = Status.ILLEGAL if mismatch.illegal else Status.INCORRECT
    rule_id = mismatch.rule if mismatch.illegal or mismatch.rule != "wrong-output" else rule
    return Verdict(status, [], (runtime.output_violation(rule_id, f"{context}: {mismatch.message}"),))


CHECK_MODES = ((False, False), (True, True), (False, True))
"""The ``(training, grad)`` modes the checked calls of one shape cycle through (the timed calls use the first)."""
