"""The runtime rules: what the worker sees while it checks a candidate, as registered rules and their violations.

Holds one function per runtime rule, each returning the
:class:`~kernelgym.verifier.result.Violation` the worker reports:
    aten_fallback, decoy_kernel, input_mutation, global_state_changed: guards around ``forward``.
    aten_compute_sampled: ``forward``'s time, sampled from outside, ran in PyTorch's compute libraries.
    output_violation: a wrong or illegal output, named by its cause (``wrong-output``,
        ``output-not-plain-tensor``, ``output-not-plain-container``, ``output-aliases-input``, ``stale-output``,
        ``shape-variant-mismatch``, ``mode-mismatch``, ``initial-weights-assumed``,
        ``timed-output-mismatch``).
    weights_cached: an output that follows the weights as they were before a change (copies made in ``__init__``).
    weights_unplaced: reference weights with no place in ``ModelNew``, not declared constant.
    inherits_model: ``Model`` found in ``ModelNew``'s MRO (the static rule of that id, seen at run time).
    forbidden_native_symbol: a built extension links against symbols off its backend's allow-list.
    unverified_library: native code mapped into the candidate that the judge neither built nor installed.
    host_array_library: the candidate imports NumPy (or another host array library).
    forged_message: the candidate wrote on the judge's channel.
    process_state_changed: the candidate changed its process (affinity, signal handlers, limits).
    excessive_speedup: a call faster than its memory traffic allows, measured by the judge itself.

The static rules cannot see these (an op reached through a computed name, a
kernel defined but never launched, an answer that depends on call history), so
the worker checks them by running the candidate in its sandbox.
"""

from __future__ import annotations

from kernelgym.verifier.result import Violation
from kernelgym.verifier.rules.catalogue import rule

__all__ = [
    "aten_compute_sampled",
    "aten_fallback",
    "decoy_kernel",
    "excessive_speedup",
    "forbidden_native_symbol",
    "forged_message",
    "global_state_changed",
    "host_array_library",
    "inherits_model",
    "input_mutation",
    "output_violation",
    "process_state_changed",
    "unverified_library",
    "weights_cached",
    "weights_unplaced",
]


def _runtime(rule_id: str, message: str) -> Violation:
    return Violation(rule_id, 0, message, "runtime")


@rule("aten-fallback", "ATen compute ops were dispatched during forward (the runtime fallback guard)", stage="runtime")
def aten_fallback(ops: str) -> Violation:
    """``ops`` (``"aten.add, aten.mul"``) computed part of the answer during ``forward``."""
    return _runtime("aten-fallback", f"ATen compute ops dispatched during forward: {ops}. Implement them in your kernel.")


@rule("aten-compute-sampled", "forward's time, sampled from outside the candidate's process, ran in PyTorch's compute "
      "libraries (ATen kernels called below the dispatcher, through a pointer)", stage="runtime")
def aten_compute_sampled(detail: str) -> Violation:
    """``detail``: how much of ``forward``'s sampled time ran in torch's compute libraries, and where."""
    return _runtime("aten-compute-sampled", f"{detail}. Compute every output in your own kernel; PyTorch's kernels, "
                    "however they are reached, are not yours.")


@rule("observer-record-missing", "the native ATen observer's record of a call is missing, malformed or not that call's "
      "(the observer was disarmed, re-armed or bypassed)", stage="runtime")
def observer_record_missing() -> Violation:
    """The record the observer writes from C++ to the judge's descriptor was not there as the call left it."""
    return _runtime("observer-record-missing", "the judge's record of the operators your forward ran was missing or changed; "
                    "do not touch the judge's observer, its callbacks or its descriptors.")


@rule("decoy-kernel", "no native kernel ran during forward (a kernel defined but never launched)", stage="runtime")
def decoy_kernel() -> Violation:
    """``forward`` ran no kernel of the candidate's own."""
    return _runtime("decoy-kernel", "forward must call your compiled kernel; defining it is not enough.")


@rule("input-mutation", "forward wrote to its inputs", stage="runtime")
def input_mutation() -> Violation:
    """``forward`` changed its inputs in place."""
    return _runtime("input-mutation", "forward must not write to its inputs; write results to new tensors.")


@rule("global-state-changed", "process-wide state changed (thread count, timers, torch function identity, "
      "backend flags)", stage="runtime")
def global_state_changed(changes: list[str]) -> Violation:
    """The candidate changed process-wide state (``changes``: one phrase per change)."""
    return _runtime("global-state-changed", "; ".join(changes))


def inherits_model() -> Violation:
    """``Model`` is in ``ModelNew``'s MRO (the static ``inherits-model`` rule, caught at run time)."""
    return _runtime("inherits-model", "ModelNew must not inherit from Model; subclass nn.Module.")


@rule("wrong-output", "an output differs from the reference (values, shape, dtype, device, NaN/inf)", stage="runtime")
@rule("output-not-plain-tensor", "an output is not a plain torch.Tensor (a subclass, another object, or a tensor "
      "carrying attributes of its own)", stage="runtime")
@rule("output-not-plain-container", "outputs are held in a subclass of tuple, list or dict (code the judge would run "
      "to read them, after the clock stopped)", stage="runtime")
@rule("output-aliases-input", "an output shares memory with an input", stage="runtime")
@rule("stale-output", "an output replays an earlier call's (post-timing re-check, fresh inputs, caches, "
      "batch-and-skip)", stage="runtime")
@rule("shape-variant-mismatch", "an output is wrong on a shape variant of the task", stage="runtime")
@rule("mode-mismatch", "an output is right in one mode only (train/eval, grad/no-grad)", stage="runtime")
@rule("initial-weights-assumed", "an output is right only with the reference's initial weights (they were redrawn)",
      stage="runtime")
@rule("timed-output-mismatch", "the output of a timed call is wrong (every call may be checked; fresh inputs each)",
      stage="runtime")
def output_violation(rule_id: str, message: str) -> Violation:
    """A wrong or illegal output, named by ``rule_id`` (one of the output rules above).

    Raises:
        ValueError: ``rule_id`` is not an output rule.

    Example:
        >>> output_violation("wrong-output", "output 0 has shape (2,), expected (3,)").where
        'runtime'
    """
    if rule_id not in _OUTPUT_RULES:
        raise ValueError(f"{rule_id!r} is not an output rule; choose one of {sorted(_OUTPUT_RULES)}")
    return _runtime(rule_id, message)


_OUTPUT_RULES = frozenset(
    ("wrong-output", "output-not-plain-tensor", "output-not-plain-container", "output-aliases-input", "stale-output", "shape-variant-mismatch",
     "mode-mismatch", "initial-weights-assumed", "timed-output-mismatch")
)


@rule("weights-cached", "an output follows the weights as they were before they were redrawn (copies of the "
      "parameters made in __init__)", stage="runtime")
def weights_cached() -> Violation:
    """After the weights were redrawn, the output still matched the reference at the weights before."""
    return _runtime("weights-cached", "your output matches the reference with the weights as they were before they changed: "
                    "compute from the parameters in forward; copies made in __init__ (transposed, scaled or packed "
                    "weights) go stale when the weights change.")


@rule("weights-unplaced", "a floating parameter or buffer of the reference has no place in ModelNew (no tensor of its "
      "name or shape and dtype) and is not named in its constant_weights", stage="runtime")
def weights_unplaced(listed: str) -> Violation:
    """``listed`` (```ln.weight` (4096,)``, ...): reference tensors ``ModelNew`` could not receive, so could not follow."""
    return _runtime("weights-unplaced", f"ModelNew holds no tensor for the reference's {listed}, so it cannot follow them when "
                    "they change. Register a parameter or buffer of the same shape and dtype for each (any name: one "
                    "with `weight` or `bias` in it is told apart from its equals in shape), or name the ones your answer "
                    "holds fixed in `constant_weights = (...)` on ModelNew (then checked at their initial values only, "
                    "for a lower score).")


@rule("forbidden-native-symbol", "a built extension links against functions off its backend's allow-list (ATen "
      "compute, the dispatcher, dlopen/dlsym, threads, process settings, ...)", stage="runtime")
def forbidden_native_symbol(detail: str) -> Violation:
    """The extension's imported symbols, found before it is loaded (``detail``: the sentence per symbol)."""
    return _runtime("forbidden-native-symbol", detail)


@rule("unverified-library", "native code was loaded that is neither a verified build of the judge's store nor part "
      "of the installed runtime (a library the candidate wrote or changed, loaded with ctypes, dlopen or a build of its own)",
      stage="runtime")
def unverified_library(path: str) -> Violation:
    """The candidate's process maps ``path``, a file the judge did not build (or whose bytes changed) nor install."""
    return _runtime("unverified-library", f"{path} is loaded in your process, but the judge did not build it. "
                    "Build native code with load_inline only, and load nothing else.")


@rule("host-array-library", "the candidate imports NumPy or another host array library", stage="runtime")
def host_array_library(name: str) -> Violation:
    """``name`` (``numpy``, ...) cannot be imported by a candidate: it would compute outside the guards."""
    return _runtime("host-array-library", f"{name} cannot compute outputs here; compute them in your native kernel.")


@rule("forged-message", "the candidate wrote on the judge's channel (a forged or unsolicited reply)", stage="runtime")
def forged_message(detail: str) -> Violation:
    """What the judge received that it did not ask for."""
    return _runtime("forged-message", detail)


@rule("process-state-changed", "the candidate changed its own process (CPU affinity, signal handlers, resource "
      "limits)", stage="runtime")
def process_state_changed(changes: list[str]) -> Violation:
    """What changed since the candidate was loaded, read by the judge from ``/proc``."""
    return _runtime("process-state-changed", "; ".join(changes))


@rule("work-after-return", "work of a call outlived it: an output changed after the call returned, the device stayed "
      "busy after its end event, or the candidate's threads ran between calls", stage="runtime")
def work_after_return(detail: str) -> Violation:
    """Work of a timed call went on after the call returned (a detached thread team, an unjoined stream)."""
    return _runtime("work-after-return", f"work of the call ran after it returned: {detail}")


@rule("excessive-speedup", "a call faster than its memory traffic allows, measured by the judge's own clock",
      stage="runtime")
def excessive_speedup(message: str) -> Violation:
    """The judge's measurement is below the roofline floor: the answer did not do the work."""
    return _runtime("excessive-speedup", message)
