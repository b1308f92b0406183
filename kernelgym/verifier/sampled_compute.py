"""ATen compute seen by where the candidate runs: samples of its threads' code, weighed by the trusted side.

Holds:
    CodeSample: where one sampled thread was running: the file mapped there and the function it names.
    CodeSampler: what the judge needs of a sampler of the candidate's threads (the executor's ``ThreadSampler``).
    COMPUTE_LIBRARIES / TORCH_LIBRARIES: where ATen's operators compute (with the kernels named in torch's own).
    SHARE_LIMIT / MIN_COMPUTE_SAMPLES / MIN_FORWARD_SAMPLES: what a verdict rests on.
    ComputeShare / compute_share: how much of the candidate's forward ran in them, and in the answer's own builds,
        from samples of calls and probes.
    poisson_bound / settled: when the samples taken so far settle the verdict either way.
    sample_forward: sample untimed calls and probes of a candidate (after its timed calls) into a ComputeShare.
    SAMPLED_FROM_SPEEDUP / sample_compute: the judge's step: which answers are sampled, the verdict, the host's share.

The native observer sees operators that go through the dispatcher; linking rules see the symbols an extension
imports. An answer can do without both: take the address of an ATen kernel (``at::cpu::mm``) from the library
already loaded in its process and call it through a pointer. What runs cannot be hidden that way: the judge
samples, from outside, where the candidate's threads execute during calls of its ``forward`` (untimed ones) and
during probes (the same request with an allocator for a forward, :meth:`CandidateSide.cmd_probe`), so that what
the harness itself runs in torch's libraries around a call (copies of inputs and outputs) is taken away. An honest
answer spends its forward in its own verified build (and libgomp, libc, Python); one that computes in ATen spends
it in ``libtorch_cpu.so``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from time import perf_counter
from typing import TYPE_CHECKING, Protocol

import torch

from kernelgym.backends.store import ExtensionStore
from kernelgym.verifier.harness import illegal_verdict
from kernelgym.verifier.kernel_share import record_share
from kernelgym.verifier.rules import runtime
from kernelgym.verifier.trial_inputs import Refresher, draw_inputs

if TYPE_CHECKING:
    from kernelgym.verifier.harness import Harness

__all__ = ["COMPUTE_LIBRARIES", "CodeSample", "CodeSampler", "ComputeShare", "MIN_COMPUTE_SAMPLES", "MIN_FORWARD_SAMPLES",
           "MIN_KERNEL_SAMPLES", "SAMPLED_FROM_SPEEDUP", "SHARE_LIMIT", "TORCH_LIBRARIES", "UNMAPPED", "compute_share", "poisson_bound", "sample_compute",
           "sample_forward", "settled"]

COMPUTE_LIBRARIES = ("libmkl", "libopenblas", "libblas", "liblapack", "libdnnl", "libmkldnn", "libsleef", "libcublas",
                     "libcudnn", "libcufft")
"""Name prefixes of the BLAS, DNN and vector-math libraries ATen calls: every sample there is compute."""

TORCH_LIBRARIES = ("libtorch_cpu", "libtorch_cuda", "libtorch_hip")
"""Name prefixes of torch's own libraries: compute where the function sampled is a kernel (:func:`computes`).

They also hold what the harness and an honest ``forward`` run there: the dispatcher, allocation, tensor
metadata, ``RecordFunction``, and the copy and fill kernels of allowed operators (``contiguous``, ``zeros``)."""

# MKL (statically linked into libtorch_cpu), BLAS entry points, oneDNN and its JIT assembler, Sleef's vector math.
_LIBRARY_SYMBOL = re.compile(r"mkl|gemm|gemv|cblas|blas_|lapack|dnnl|xbyak|sleef", re.IGNORECASE)
# ATen's kernels: DispatchStub implementations (``*_kernel``, ``*_kernel_impl``), TensorIterator's loops (each
# ``function_ref`` callback names the kernel it runs), reductions.
_KERNEL_SYMBOL = re.compile(r"kernel|loop|callback_fn|reduc", re.IGNORECASE)
# The kernels of the operators an answer may use (copies, fills): allocate and reshape, never compute.
_DATA_MOVEMENT = re.compile(r"copy|fill|zero_", re.IGNORECASE)
# c10's dispatcher (``c10::impl::wrap_kernel_functor_unboxed_``, ``callUnboxedKernelFunction``): it calls kernels.
_DISPATCHER = ("_ZN3c10", "_ZNK3c10")

SHARE_LIMIT = 0.1
"""The share of a forward's samples in ATen's compute, beyond what probes spend there, from which the forward
computed in ATen. An honest forward spends none there (its allocations and copies are not compute); on the small
host tasks most of a forward that calls ATen is Python's and pybind11's call overhead, and a quarter or more is
ATen's kernel."""

MIN_COMPUTE_SAMPLES = 10
"""Fewest samples in ATen's compute, beyond the probes', a verdict rests on."""

MIN_FORWARD_SAMPLES = 40
"""Fewest samples of the forward itself (calls' samples beyond the probes') a verdict rests on."""

MIN_KERNEL_SAMPLES = 10
"""Fewest samples of the forward in kernels (the answer's own builds' and ATen's compute, beyond the probes') that
:attr:`ComputeShare.own` rests on."""

SAMPLING_SECONDS = 1.0
"""At most about how long the sampled calls and probes take in all (at least :data:`MIN_CALLS` of each); they stop
sooner once the samples settle the verdict (:func:`settled`) or the calls hold :data:`ENOUGH_SAMPLES` more samples
than the probes."""

ENOUGH_SAMPLES = 160
"""Samples of the calls beyond the probes' after which sampling stops (four times :data:`MIN_FORWARD_SAMPLES`)."""

DOUBT = 1e-3
"""How unlikely, at most, the samples taken so far are under the verdict that :func:`settled` rules out."""

UNMAPPED = "[unmapped]"
"""The path of a sample in no code mapped as sampling began (placed once it is over, by the mappings read then)."""

MIN_CALLS = 3
"""Fewest calls (and probes) sampled, whatever they cost."""

MAX_CALLS = 400
"""Most calls (and probes) sampled, however cheap."""


@dataclass(frozen=True)
class CodeSample:
    """Where one sampled thread was running.

    Attributes:
        path: the file mapped at its instruction pointer (``[anonymous]``: memory mapped executable from no file;
            ``[unmapped]``: none).
        symbol: the (mangled) function there, when the file's symbol table names one.
    """

    path: str
    symbol: str | None = None

    @functools.cached_property
    def computes(self) -> bool:
        """Whether it ran in ATen's compute: a compute library, a kernel of torch's, or code generated at run time.

        Example:
            >>> CodeSample("/torch/lib/libtorch_cpu.so", "mkl_blas_avx2_sgemm_kernel_0").computes
            True
            >>> CodeSample("/torch/lib/libtorch_cpu.so", "_ZN2at6native12_GLOBAL__N_111copy_kernelERNS_18TensorIteratorBaseEb").computes
            False
            >>> CodeSample("/torch/lib/libtorch_cpu.so", "_ZN3c104impl28wrap_kernel_functor_unboxed_Iv").computes
            False
            >>> CodeSample("/torch/lib/libtorch_cpu.so", "_ZN3c1010TensorImpl7releaseEv").computes, CodeSample("/lib/libc.so.6").computes
            (False, False)
        """
        name = os.path.basename(self.path)
        if self.path == "[anonymous]" or name.startswith(COMPUTE_LIBRARIES):  # oneDNN's JIT kernels live in anonymous code
            return True
        if not name.startswith(TORCH_LIBRARIES) or not self.symbol:
            return False
        if _LIBRARY_SYMBOL.search(self.symbol):
            return True
        if self.symbol.startswith(_DISPATCHER) or _DATA_MOVEMENT.search(self.symbol):
            return False
        return bool(_KERNEL_SYMBOL.search(self.symbol))


class CodeSampler(Protocol):
    """A sampler of the candidate's threads, used as a context manager around the calls it samples.

    Attributes:
        refused: why the kernel refused to let the judge sample the process (``None``: it did not).
    """

    refused: str | None

    def __enter__(self) -> CodeSampler:
        ...

    def __exit__(self, *exc: object) -> None:
        ...

    def window(self, label: str) -> AbstractContextManager[None]:
        """Sample while the block runs, under ``label``."""
        ...

    def count(self, label: str) -> int:
        """How many samples were taken under ``label`` so far."""
        ...

    def tally(self, label: str) -> Counter[CodeSample]:
        """The places sampled under ``label`` so far, and how often (code mapped since sampling began: :data:`UNMAPPED`
        until it is over)."""
        ...


@dataclass(frozen=True)
class ComputeShare:
    """How much of the candidate's forward ran in torch's compute libraries, by samples.

    Attributes:
        calls: the calls sampled.
        probes: the probes sampled.
        forward_samples: samples per call beyond those of a probe, times the calls (the forward's own), and at
            least those in kernels (:attr:`torch_samples` and :attr:`own_samples`: probes run none).
        torch_samples: of them, those in ATen's compute (:attr:`CodeSample.computes`), beyond the probes'.
        functions: the functions of those libraries sampled most often in the calls, most first.
        refused: why the candidate's process could not be sampled (``None``: it was).
        own_samples: of the forward's samples, those in the answer's own builds (the extensions the judge built
            for it and verified in its process), beyond the probes'.
    """

    calls: int
    probes: int
    forward_samples: float
    torch_samples: float
    functions: tuple[str, ...] = ()
    refused: str | None = None
    own_samples: float = 0.0

    @property
    def share(self) -> float:
        """The share of the forward's samples in torch's compute libraries (0 without samples)."""
        return self.torch_samples / self.forward_samples if self.forward_samples > 0 else 0.0

    @property
    def own(self) -> float | None:
        """The share of the forward's time in kernels that ran in the answer's own builds, against PyTorch's.

        ``own_samples / (own_samples + torch_samples)``: the forward's samples (the calls' beyond the probes')
        in the answer's own extensions, over those in its own extensions and in ATen's compute together. What
        is neither (Python, pybind11, the dispatcher, allocation and copies, libgomp's waits, libc) counts on
        no side. 1.0: every kernel the forward ran was the answer's; near 0: it left its work to PyTorch.
        ``None`` when fewer than :data:`MIN_KERNEL_SAMPLES` of the forward's samples lie in kernels (a forward
        of a few microseconds, or too few calls sampled) or the process could not be sampled.

        Example:
            >>> ComputeShare(10, 10, 100.0, 30.0, own_samples=10.0).own
            0.25
            >>> ComputeShare(10, 10, 100.0, 2.0, own_samples=5.0).own is None
            True
        """
        kernels = self.own_samples + self.torch_samples
        return self.own_samples / kernels if kernels >= MIN_KERNEL_SAMPLES and not self.refused else None

    @property
    def computed_in_aten(self) -> bool:
        """Enough of the forward ran in ATen's compute: :data:`MIN_COMPUTE_SAMPLES`, and :data:`SHARE_LIMIT` of it."""
        return (self.forward_samples >= MIN_FORWARD_SAMPLES and self.torch_samples >= MIN_COMPUTE_SAMPLES
                and self.share >= SHARE_LIMIT)

    def sentence(self) -> str:
        """What the samples show, for the feedback."""
        named = f" (most often in {', '.join(self.functions)})" if self.functions else ""
        return (f"{self.share:.0%} of ModelNew.forward's sampled time ran in PyTorch's compute libraries{named}: "
                f"{self.torch_samples:.0f} of {self.forward_samples:.0f} samples over {self.calls} calls, beyond what "
                "the harness alone runs there")


def compute_share(calls: Iterable[CodeSample], probes: Iterable[CodeSample], call_count: int, probe_count: int,
                  own: frozenset[str] = frozenset()) -> ComputeShare:
    """Weigh the samples of ``call_count`` calls against those of ``probe_count`` probes (the harness alone);
    ``own``: the paths of the answer's own builds. Samples come one by one or tallied (a ``Counter``).

    Example:
        >>> kernel, copy = CodeSample("/cache/builds/ab/x.so"), CodeSample("/torch/lib/libtorch_cpu.so", "copy_")
        >>> compute_share([kernel] * 60 + [copy] * 40, [copy] * 40, 10, 10).share
        0.0
        >>> gemm = CodeSample("/torch/lib/libtorch_cpu.so", "mkl_sgemm")
        >>> share = compute_share([gemm] * 90 + [copy] * 40 + [kernel] * 30, [copy] * 40, 10, 10, frozenset({kernel.path}))
        >>> share.computed_in_aten, share.own
        (True, 0.25)
    """
    if not call_count or not probe_count:
        return ComputeShare(call_count, probe_count, 0.0, 0.0)
    calls, probes = _tally(calls), _tally(probes)
    ratio = call_count / probe_count
    computing = Counter({s: n for s, n in calls.items() if s.computes})
    torch_part = max(computing.total() - _counted(probes, lambda s: s.computes) * ratio, 0.0)
    own_part = max(_counted(calls, lambda s: s.path in own) - _counted(probes, lambda s: s.path in own) * ratio, 0.0)
    # Kernels run in the forward alone: its samples there are its own, however much the harness's varied meanwhile.
    forward = max(calls.total() - probes.total() * ratio, torch_part + own_part)
    functions: Counter[str] = Counter()
    for s, n in computing.items():
        functions[s.symbol or os.path.basename(s.path)] += n
    return ComputeShare(call_count, probe_count, forward, torch_part, tuple(name for name, _ in functions.most_common(3)),
                        own_samples=own_part)


def _tally(samples: Iterable[CodeSample]) -> Counter[CodeSample]:
    return samples if isinstance(samples, Counter) else Counter(samples)


def _counted(tally: Counter[CodeSample], test: Callable[[CodeSample], bool]) -> int:
    """How many samples of ``tally`` pass ``test`` (asked once per place: a forward's samples repeat a few places)."""
    return sum(n for sample, n in tally.items() if test(sample))


def poisson_bound(count: int, upper: bool, doubt: float = DOUBT) -> float:
    """A one-sided confidence bound on the mean of a Poisson count seen at ``count``: the mean above (``upper``) or
    below which ``count`` would be seen with probability under ``doubt`` (Wilson and Hilferty's approximation,
    within a few percent of the exact bound and on its far side).

    Example:
        >>> round(poisson_bound(0, True), 1), poisson_bound(0, False), round(poisson_bound(30, False), 1)
        (7.1, 0.0, 15.8)
    """
    z = _z_score(doubt)
    if upper:
        n = count + 1
        return n * (1 - 1 / (9 * n) + z / (3 * n**0.5)) ** 3
    if count == 0:
        return 0.0
    return count * max(1 - 1 / (9 * count) - z / (3 * count**0.5), 0.0) ** 3


def _z_score(doubt: float) -> float:
    return NormalDist().inv_cdf(1 - doubt)


def settled(calls: Iterable[CodeSample], probes: Iterable[CodeSample], own: frozenset[str] = frozenset(),
            remaining: float = math.inf) -> bool:
    """Whether samples of as many calls as probes settle the verdict already, either way, at :data:`DOUBT`.

    ``own``: the paths of the answer's own builds (:func:`compute_share`); ``remaining``: how many more calls the
    sampling may still make, per call made so far (unbounded unless told).

    Not ATen's: so few of the calls' samples may be ATen's compute (counting those in code mapped since sampling
    began) that, at the upper bound of their rate, they would stay under :data:`SHARE_LIMIT` of a forward that
    holds :data:`MIN_FORWARD_SAMPLES` already, or under :data:`MIN_COMPUTE_SAMPLES` once the remaining calls are
    made. ATen's: at the lower bound of their rate, beyond the probes', they are :data:`MIN_COMPUTE_SAMPLES` and
    :data:`SHARE_LIMIT` of the forward already. An honest forward, which computes nowhere in ATen, settles at
    about 70 forward samples instead of :data:`ENOUGH_SAMPLES`, or once the calls made are 2/3 of those the
    sampling's time allows.

    Example:
        >>> kernel, gemm = CodeSample("/cache/builds/ab/x.so"), CodeSample("/torch/lib/libtorch_cpu.so", "mkl_sgemm")
        >>> settled([kernel] * 60, []), settled([kernel] * 80, []), settled([kernel] * 70 + [gemm] * 10, [])
        (False, True, False)
        >>> settled([kernel] * 30 + [gemm] * 30, []), settled([kernel] * 5, [], remaining=0.5)
        (True, True)
    """
    calls, probes = _tally(calls), _tally(probes)
    computing = _counted(calls, lambda sample: sample.computes or sample.path == UNMAPPED)
    upper = poisson_bound(computing, upper=True)
    still = upper * remaining  # at most, for the calls still to make
    if computing + still + _z_score(DOUBT) * still**0.5 < MIN_COMPUTE_SAMPLES:
        return True
    forward = compute_share(calls, probes, 1, 1, own).forward_samples
    if forward < MIN_FORWARD_SAMPLES:
        return False
    if upper < SHARE_LIMIT * forward:
        return True
    baseline = _counted(probes, lambda sample: sample.computes)
    return poisson_bound(computing, upper=False) - baseline >= max(MIN_COMPUTE_SAMPLES, SHARE_LIMIT * forward)


def sample_forward(h: Harness, verdict: bool = True) -> ComputeShare:
    """Sample the candidate's threads during untimed calls and probes, alternated, on fresh inputs at the task's shapes.

    The calls are made as timed ones are (eval mode, no grad, the native observer only), each after a probe, until
    the samples settle the verdict (:func:`settled`), the calls hold :data:`ENOUGH_SAMPLES` more samples than the
    probes, or the calls and probes took about :data:`SAMPLING_SECONDS`; their outputs are not compared (the
    checked and timed calls were). The probe comes first: what the forward's threads still run just after it
    returned (an OpenMP team's spin before it sleeps) falls in the call's samples, not the probe's.
    The judge samples after the timing stage: no timed call is sampled, and none follows the sampled
    ones in the candidate's process (hundreds of extra calls there, before the timed ones, moved the
    speedups of small host tasks by a few percent).

    ``verdict=False``: no verdict rests on the samples (a preset that waives ``aten-compute-sampled``), they are
    taken for :attr:`ComputeShare.own` alone: sampling stops instead once the forward's kernels hold four times
    :data:`MIN_KERNEL_SAMPLES`.
    """
    config = h.config
    reference = h.models({}).eval()  # the models at the task's own shapes (the checks end at a variant's)
    assert h.reference is not None
    inputs = draw_inputs(h.reference, h.rng.randrange(2**31), h.device)
    refresher = Refresher(h.reference, inputs, h.device, random.Random(h.rng.randrange(2**63)))
    with torch.no_grad():
        h.bind(inputs, h.reference_call(reference, inputs, False, False))
    per_call = h.reference_seconds[-1]
    h.set_budget(h.stage_budget + config.timeouts.scaled(config.timeouts.check, per_call, 4 * MIN_CALLS))
    store, verified = ExtensionStore(h.build_root), {}

    def own_builds(tally: Counter[CodeSample]) -> frozenset[str]:
        for path in {sample.path for sample in tally} - verified.keys():
            verified[path] = path.startswith("/") and store.verified(Path(path)) is not None
        return frozenset(path for path, built in verified.items() if built)

    def share() -> ComputeShare:
        tally = sampler.tally("call")
        return compute_share(tally, sampler.tally("probe"), calls, calls, own_builds(tally))

    def done() -> bool:
        if not verdict:
            so_far = share()
            return so_far.own_samples + so_far.torch_samples >= 4 * MIN_KERNEL_SAMPLES
        remaining = min((MAX_CALLS - calls) / calls, (SAMPLING_SECONDS - spent) / spent)  # per call made
        tally = sampler.tally("call")
        return settled(tally, sampler.tally("probe"), own_builds(tally), max(remaining, 0.0))

    calls, spent = 0, 0.0  # the seconds of the calls and probes (naming what was sampled is not counted)
    with h.candidate.sampler() as sampler:
        while calls < MAX_CALLS and (calls < MIN_CALLS or spent < SAMPLING_SECONDS) and not sampler.refused:
            start = perf_counter()
            refresher.refresh(inputs)
            with sampler.window("probe"):
                h.measured("probe", False, False)
            with sampler.window("call"):
                h.call(inputs, False, False, python_guard=False)
            calls, spent = calls + 1, spent + perf_counter() - start
            forward = sampler.count("call") - sampler.count("probe")
            # Weighing the samples costs about a tenth of a call: every call once the forward could settle, else every fourth.
            if forward >= ENOUGH_SAMPLES or (calls >= MIN_CALLS and (forward >= MIN_FORWARD_SAMPLES or calls % 4 == 0) and done()):
                break
    if sampler.refused:
        return ComputeShare(calls, calls, 0.0, 0.0, refused=sampler.refused)
    return share()


SAMPLED_FROM_SPEEDUP = 0.5
"""Answers timed at least this fast against eager PyTorch are sampled for ATen's compute (``aten-compute-sampled``):
one slower than half of ATen's own speed gained nothing by calling ATen, and is not sampled (sampling costs a
judgement up to a second of untimed calls)."""


def sample_compute(h: Harness) -> None:
    """ATen's compute in ``forward``, seen by sampling from outside (:mod:`~kernelgym.verifier.sampled_compute`), is
    illegal; the samples also give the host's profiling share (``own_kernel_share``), and are taken for it alone
    where no verdict rests on them only when the reward uses it (``RewardSpec.own_share_weight``)."""
    if h.device.type != "cpu":
        return  # a device, where kernels run off the threads sampled
    timing = h.progress.timing
    waived = "aten-compute-sampled" in h.preset.waived
    slow = timing.get("runtime_ms") and timing["ref_eager_ms"] / timing["runtime_ms"] < SAMPLED_FROM_SPEEDUP
    if waived or slow:  # a preset that allows ATen compute; far slower than ATen's kernels, which it so did not use
        if not (h.config.profile_calls and h.config.reward.own_share_weight > 0 and timing.get("runtime_ms")):
            return
        share = sample_forward(h, verdict=False)
    else:
        share = sample_forward(h)
    if share.refused:
        h.progress.flags.append("compute-not-sampled")
    elif share.computed_in_aten and not (waived or slow):
        raise illegal_verdict("PyTorch's kernels computed ModelNew.forward's outputs.", runtime.aten_compute_sampled(share.sentence()))
    if share.own is not None:
        record_share(h, share.own)

