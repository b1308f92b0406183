"""How much of a forward's device time ran in the answer's own kernels: the profiling reward against lazy optimization.

Holds:
    LAZY_SHARE: the share below which an ``ok`` answer is flagged ``lazy-optimization`` (the config's default).
    own_kernel_names: the kernels an answer defines (CUDA/MUSA ``__global__`` functions, Triton ``@triton.jit`` ones).
    kernel_base_name: a profiler's kernel name reduced to its namespace path (``void ns::f<float>(float*)`` -> ``ns::f``).
    KernelShare / kernel_share: the answer's own device time against every kernel's, from a profile of its calls.
    profile_kernels / profiles: profile a judged answer's forwards on its device and record the share (after the time
        stage), and whether it does so now.
    record_share: a measured share into a judgement's progress, with its flag.

Under ``--rules kernelbench`` an answer may call PyTorch's operators in ``ModelNew``; one that writes one trivial
kernel and leaves the heavy work (the GEMM, the convolution) to PyTorch is "lazily optimized" (Dr. Kernel's term):
correct, maybe even fast, but not what a kernel writer was asked for. The judge profiles a few untimed, watched calls
of ``forward`` on the device (PyTorch's profiler, CUPTI underneath) and sums each kernel's device time; a kernel is
the answer's own when its name is one the answer's source defines and it lies in no namespace of PyTorch or its
libraries. On a host the same share comes from where sampled threads ran
(:mod:`~kernelgym.verifier.sampled_compute`).

The profile is taken in the candidate's process, as its device events are: the answer's Python could rewrite it, so
an answer naming the profiler (``torch.profiler``, ``torch.autograd.profiler``) breaks ``harness-introspection``, and
``torch._C``'s profiler is ``private-torch-api``. Copies and fills PyTorch launches for the answer
(``.contiguous()``, ``torch.zeros``) are PyTorch's time; so are Inductor's generated Triton kernels
(``triton_poi_*``, ...), whatever the answer names its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelgym.verifier.harness import Harness

__all__ = ["LAZY_SHARE", "KernelShare", "kernel_base_name", "kernel_share", "own_kernel_names", "profile_kernels", "profiles",
           "record_share"]

LAZY_SHARE = 0.5
"""An ``ok`` answer whose own kernels ran less than this share of its forward's device time is ``lazy-optimization``."""

_CUDA_KERNEL = re.compile(r"__global__\s+(?:(?:static|inline|__launch_bounds__\s*\([^)]*\)|__noinline__|__forceinline__)\s+)*"
                          r"(?:void|auto)\s+(?:__launch_bounds__\s*\([^)]*\)\s+)?(\w+)\s*\(")
_TRITON_KERNEL = re.compile(r"@(?:triton\.)?jit\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)\s*\(")
_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>]*>")
# Namespaces of PyTorch and the libraries its operators call: a kernel there is never the answer's.
_FOREIGN_NAMESPACES = frozenset({"at", "c10", "native", "cuda", "cutlass", "cub", "thrust", "cudnn", "cublas", "cublasLt",
                                 "flash", "pytorch_flash", "mem_efficient_attention", "fmha", "torch"})
_INDUCTOR_KERNEL = re.compile(r"triton_(?:poi|red|per|tem|for|spl|mm|bmm|conv)_")


def own_kernel_names(code: str) -> frozenset[str]:
    """The kernels ``code`` defines: ``__global__`` functions (CUDA, MUSA) and Triton ``@triton.jit`` functions.

    Example:
        >>> sorted(own_kernel_names('''
        ... __global__ void __launch_bounds__(256) relu_kernel(const float* x, float* y, int n) {}
        ... template <typename T> __global__ void scale(T* y) {}
        ... @triton.jit
        ... def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        ...     pass
        ... '''))
        ['add_kernel', 'relu_kernel', 'scale']
    """
    return frozenset(_CUDA_KERNEL.findall(code)) | frozenset(_TRITON_KERNEL.findall(code))


def kernel_base_name(name: str) -> str:
    """A profiler's kernel name without return type, template arguments and parameters: its namespace path.

    Example:
        >>> kernel_base_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)")
        'at::native::vectorized_elementwise_kernel'
        >>> kernel_base_name("void relu_kernel<c10::Half>(c10::Half const*, c10::Half*, int)"), kernel_base_name("add_kernel")
        ('relu_kernel', 'add_kernel')
    """
    head = name.replace("(anonymous namespace)", "anonymous").split("(", 1)[0]
    while True:
        stripped = _TEMPLATE_ARGUMENTS.sub("", head)
        if stripped == head:
            break
        head = stripped
    words = head.split()
    return words[-1] if words else ""


def _is_own(name: str, own: frozenset[str]) -> bool:
    path = kernel_base_name(name).split("::")
    return (path[-1] in own and not any(part in _FOREIGN_NAMESPACES for part in path[:-1])
            and not _INDUCTOR_KERNEL.match(path[-1]))


@dataclass(frozen=True)
class KernelShare:
    """The device time of a forward's kernels, the answer's own against all (microseconds, over the profiled calls).

    Attributes:
        own_us: time in kernels the answer defines.
        total_us: time in every kernel, copy and fill the calls ran.
        foreign: the kernels that were not the answer's, the longest first, with their time (at most five).
    """

    own_us: float
    total_us: float
    foreign: tuple[tuple[str, float], ...] = ()

    @property
    def share(self) -> float | None:
        """``own_us / total_us``: 1.0 where every kernel is the answer's (``None`` where nothing ran on the device)."""
        return self.own_us / self.total_us if self.total_us > 0 else None

    def sentence(self) -> str:
        """One line for the feedback: the share, and where the rest of the time went."""
        share = self.share
        if share is None:
            return "No kernel ran on the device during the profiled calls."
        rest = ", ".join(f"{kernel_base_name(name) or name} {us / self.total_us:.0%}" for name, us in self.foreign[:3])
        return (f"Your own kernels ran {share:.0%} of the forward's device time"
                + (f"; PyTorch's kernels the rest ({rest})." if rest else "."))


def kernel_share(kernels: Mapping[str, float] | Iterable[tuple[str, float]], own: frozenset[str]) -> KernelShare:
    """Sum a profile's kernel times (name -> microseconds, or pairs) into the answer's own and everything's.

    Example:
        >>> s = kernel_share({"void relu_kernel(float*)": 30.0, "ampere_sgemm_128x64_nn": 90.0}, frozenset({"relu_kernel"}))
        >>> (s.share, s.foreign)
        (0.25, (('ampere_sgemm_128x64_nn', 90.0),))
    """
    items = kernels.items() if isinstance(kernels, Mapping) else kernels
    own_us = total_us = 0.0
    foreign: dict[str, float] = {}
    for name, us in items:
        us = max(float(us), 0.0)
        total_us += us
        if _is_own(str(name), own):
            own_us += us
        else:
            foreign[str(name)] = foreign.get(str(name), 0.0) + us
    longest = tuple(sorted(foreign.items(), key=lambda item: -item[1])[:5])
    return KernelShare(own_us=own_us, total_us=total_us, foreign=longest)


def profile_kernels(h: Harness) -> KernelShare | None:
    """Profile ``config.profile_calls`` watched forwards of a timed answer on its device; record the share in ``h.progress``.

    Only on a device, after the time stage credited a time (the answer is right so far). The calls are watched
    as every call is (an operator the preset forbids is still ``illegal``); a profile that fails (a profiler the
    process cannot start) leaves the share unknown and says so, and never changes the verdict. Returns the share
    (``None``: not profiled).
    """
    from kernelgym.verifier.harness import require_ok

    if not profiles(h):
        return None
    reply, _ = h.measured("profile", h.config.profile_calls)
    if not reply.get("ok") and reply.get("error") != "illegal":
        h.progress.notes.append(f"Your kernels' device time could not be profiled: {str(reply.get('message', ''))[:200]}")
        return None
    require_ok(reply)
    h.check_watched(reply)
    h.observe_state(reply, "during a profiled ModelNew.forward")
    share = kernel_share(((str(name), float(us)) for name, us in reply.get("kernels", [])), own_kernel_names(h.job.code))
    if share.share is None:
        return None
    record_share(h, share.share)
    h.progress.notes.append(share.sentence())
    return share


def profiles(h: Harness) -> bool:
    """Whether :func:`profile_kernels` profiles ``h``'s answer now: profiling is on, the answer runs on a device, and the
    time stage credited it a time. The profile measures its kernels' device time, so no other work may share the
    device meanwhile (:meth:`~kernelgym.verifier.harness.Harness.stage` holds the device alone for it)."""
    return bool(h.config.profile_calls) and h.device.type != "cpu" and bool(h.progress.timing.get("runtime_ms"))


def record_share(h: Harness, share: float) -> None:
    """The answer's own share of its forward (a device's profile, a host's samples) into ``h.progress``, flagged
    ``lazy-optimization`` below ``config.lazy_share``."""
    h.progress.timing["own_kernel_share"] = share
    if share < h.config.lazy_share:
        h.progress.flags.append("lazy-optimization")
