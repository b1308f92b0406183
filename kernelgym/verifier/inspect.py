"""The ``inspect`` stage: static rules over a candidate program (Python and its native sources).

Holds:
    RULES: rule id -> one-line description, for the documentation table.
    NativeSource: one C++/CUDA source text found in the candidate, with its line mapping.
    native_sources: the C++/CUDA sources of a candidate (``load_inline`` arguments and
        string literals that look like C++).
    inspect_program: every static rule the candidate breaks, as
        :class:`~kernelgym.verifier.result.Violation` records.

Both languages are parsed with tree-sitter, which tolerates broken code, so
this stage never raises on garbage and never runs candidate code.

The Python rules look at ``ModelNew.forward`` and at everything it reaches in
the file (helper functions and methods it calls or passes along, lambdas,
entry points such as ``__call__`` and forward hooks), resolving names through
imports and module-level aliases (``F = torch.nn.functional``,
``mm = getattr(torch, "mat" + "mul")``). Other rules (threads, streams, files,
network, processes, monkey-patching, global flags, introspection, dynamic
code) apply to the whole program, because module-level code runs too.
Arithmetic operators count as compute only when an operand is known to be a
tensor (a ``forward`` input, a tensor-valued attribute, the result of a tensor
call); anything the static rules cannot resolve is left to the runtime ATen
guard, which sees every ATen op the forward dispatches.

The C++ rules look at every native source: ``torch::``/``at::`` operators
(only allocation, metadata and device/stream helpers are allowed), tensor
methods and tensor arithmetic, processes and threads, files, extra streams,
timer interposition, L2 persistence, vendor libraries and reduced precision.
"""

from __future__ import annotations

import codecs
import functools
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import tree_sitter
import tree_sitter_cpp
import tree_sitter_python

from kernelgym.verifier.result import Violation

__all__ = ["RULES", "NativeSource", "native_sources", "inspect_program"]

RULES: Mapping[str, str] = MappingProxyType(
    {
        "torch-compute-in-forward": "forward (or code it reaches) computes with PyTorch/NumPy ops, nn submodules "
        "or tensor arithmetic instead of the candidate's own kernel",
        "uses-reference-model": "the reference `Model` is referenced or instantiated",
        "inherits-model": "a class derives from the reference `Model`",
        "try-except-fallback": "try/except or contextlib.suppress in forward or code it reaches (a silent fallback path)",
        "threading": "threads, processes, async tasks or fork",
        "extra-stream": "work is put on a non-default CUDA stream from Python",
        "monkey-patching": "attributes of torch/time/triton/builtins or other modules are replaced, or ATen ops re-registered",
        "global-flags": "process-wide settings are changed (backend flags, thread counts, matmul precision, RNG seeds, env)",
        "precision-downgrade": "fp16/bf16/TF32 is used in a task whose reference is fp32",
        "file-access": "files, pickles, /dev/shm or the OS are accessed",
        "network": "network access",
        "subprocess": "child processes or shell commands",
        "output-cache": "outputs are cached by data_ptr()/id() across calls",
        "harness-introspection": "the call stack, frames, gc, sys.modules or other harness state is inspected",
        "uses-task-inputs": "get_inputs()/get_init_inputs() is called to precompute results",
        "dynamic-code": "eval/exec/compile/__import__/importlib/globals() or getattr on a module with a computed name",
        "forbidden-import": "an import outside the allowed set (torch, triton, math, numpy, typing, ...)",
        "torch-compiler": "torch.compile, TorchScript, CUDA graphs or other PyTorch compilers generate the kernel",
        "private-torch-api": "private torch internals (torch._C, torch._ops, ...) are used",
        "tensor-subclass": "tensor subclasses or __torch_function__/__torch_dispatch__ overrides",
        "no-native-kernel": "the program builds no native kernel for the backend (no load_inline / @triton.jit)",
        "kernel-not-called": "forward never calls the compiled extension or launches a kernel",
        "native-torch-compute": "the C++/CUDA source calls ATen/LibTorch compute ops or tensor arithmetic",
        "native-process": "the C++/CUDA source starts processes or threads (fork, system, std::thread, ...)",
        "native-file": "the C++/CUDA source opens files, maps memory or reads /dev/shm",
        "native-stream": "the C++/CUDA source creates or launches on a non-default stream",
        "native-timer-patch": "the C++/CUDA source interposes or reads timers (dlsym, LD_PRELOAD, cudaEventElapsedTime)",
        "native-python-call": "the C++/CUDA source calls back into Python",
        "native-library": "the C++/CUDA source calls a vendor library (cuBLAS, cuDNN, BLAS, MKL, oneDNN)",
        "l2-persist": "the C++/CUDA source sets an L2 persisting-access window",
    }
)

_MAX_VIOLATIONS = 60


def _words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (compact name tables)."""
    return frozenset(text.split())


# --------------------------------------------------------------------------------------------
# Name tables (Python)
# --------------------------------------------------------------------------------------------

# Tensor methods (also C++ Tensor methods) that compute; their in-place forms (trailing "_") too.
_COMPUTE_METHODS = _words("""
    abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all allclose amax amin aminmax angle any
    apply argmax argmin argsort asin asinh atan atan2 atanh baddbmm bernoulli bincount bitwise_and bitwise_not
    bitwise_or bitwise_xor bmm cauchy ceil celu cholesky clamp clamp_max clamp_min clip conv1d conv2d conv3d cos
    cosh count_nonzero cross cummax cummin cumprod cumsum deg2rad det diff digamma dist div divide dot eig elu eq
    equal erf erfc erfinv exp exp2 expm1 exponential fix flip fliplr flipud floor floor_divide fmax fmin fmod frac
    gather gcd ge gelu geometric ger greater greater_equal gt hardshrink hardsigmoid hardswish hardtanh heaviside
    histc hypot i0 index_add index_copy index_fill index_put index_reduce index_select inner inverse isclose
    isfinite isinf isnan kron kthvalue lcm le leaky_relu lerp less less_equal lgamma linear log log10 log1p log2
    log_normal log_softmax logaddexp logcumsumexp logical_and logical_not logical_or logical_xor logit logsumexp
    lt lu map masked_fill masked_scatter masked_select matmul matrix_exp matrix_power max maximum mean median min
    minimum mish mm mode msort mul multinomial multiply mv mvlgamma nan_to_num nanmean nanmedian nanquantile
    nansum ne neg negative nonzero norm normal not_equal numpy outer pinverse polygamma pow prelu prod put
    quantile rad2deg random reciprocal relu relu6 remainder renorm repeat repeat_interleave roll rot90 round rrelu
    rsqrt scatter scatter_add scatter_reduce selu sgn sigmoid sign signbit silu sin sinc sinh slogdet softmax
    softplus softshrink sort sqrt square std sub subtract sum sum_to_size svd take take_along_dim tan tanh
    tensordot threshold tile tolist topk trace tril triu true_divide trunc uniform unique unique_consecutive var
    vdot where xlogy
    __add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __matmul__ __rmatmul__
    __truediv__ __rtruediv__ __itruediv__ __floordiv__ __pow__ __rpow__ __neg__ __abs__ __and__ __or__ __xor__
    __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __mod__
    """)

# Tensor methods that return a tensor without computing (views, copies, allocation, device moves).
_TENSOR_RETURNING = _words("""
    contiguous view view_as reshape reshape_as flatten unflatten unsqueeze squeeze permute transpose t expand
    expand_as narrow select as_strided detach to cpu cuda musa xpu float double clone new_empty new_zeros new_ones
    new_full new_empty_strided zero_ fill_ resize_ copy_ chunk split unbind diagonal movedim swapaxes
    requires_grad_ pin_memory type_as
    """)

# torch names that may appear in forward (allocation, metadata, device/stream queries, dtypes).
_TORCH_ALLOWED = _words("""
    torch.empty torch.empty_like torch.empty_strided torch.zeros torch.zeros_like torch.ones torch.ones_like
    torch.full torch.full_like torch.device torch.Size torch.Tensor torch.dtype torch.is_tensor
    torch.is_floating_point torch.is_complex torch.numel torch.get_default_dtype torch.finfo torch.iinfo
    torch.no_grad torch.inference_mode torch.enable_grad torch.is_grad_enabled torch.is_inference_mode_enabled
    torch.broadcast_shapes torch.promote_types torch.result_type torch.get_num_threads torch.get_num_interop_threads
    torch.as_strided torch.from_dlpack torch.utils.dlpack.from_dlpack torch.utils.dlpack.to_dlpack
    torch.nn.Module torch.nn.Parameter torch.nn.Buffer torch.autograd.Function torch.utils.cpp_extension.load_inline
    torch.utils.cpp_extension.load torch.jit.is_scripting torch.compiler.is_compiling torch.contiguous_format
    torch.channels_last torch.preserve_format torch.strided torch.float32 torch.float torch.float64 torch.double
    torch.int8 torch.int16 torch.short torch.int32 torch.int torch.int64 torch.long torch.uint8 torch.uint16
    torch.uint32 torch.uint64 torch.bool torch.complex64 torch.cfloat torch.complex128 torch.cdouble
    torch.__version__ torch.version
    """) | frozenset(
    f"torch.{dev}.{name}"
    for dev in ("cuda", "musa", "xpu", "mps", "cpu")
    for name in _words(
        "current_device current_stream default_stream is_available device_count get_device_properties "
        "get_device_capability get_device_name synchronize device set_device is_initialized init"
    )
)

# Names that are modules: referencing them alone is not compute.
_MODULE_NAMES = _words("""
    torch torch.nn torch.nn.functional torch.cuda torch.musa torch.utils torch.utils.cpp_extension torch.autograd
    torch.backends torch.library torch.ops torch.nn.init torch.version triton triton.language numpy math
    """)

_NUMPY_CONSTANTS = _words(
    "numpy.float32 numpy.float64 numpy.int32 numpy.int64 numpy.int8 numpy.uint8 numpy.bool_ numpy.dtype "
    "numpy.ndarray numpy.pi numpy.e numpy.inf"
)

_HALF_NAMES = _words("""
    torch.float16 torch.half torch.bfloat16 torch.float8_e4m3fn torch.float8_e5m2 torch.float8_e4m3fnuz
    torch.float8_e5m2fnuz torch.complex32 torch.chalf numpy.float16 numpy.half triton.language.float16
    triton.language.bfloat16 triton.language.float8e4nv triton.language.float8e5 triton.language.float8e4b15
    """)

_ALLOWED_IMPORTS = _words("""
    torch torch.nn torch.nn.functional torch.utils torch.utils.cpp_extension torch.utils.dlpack torch.autograd
    torch.cuda torch.musa torch.nn.init torch.nn.parameter torch.types torch.library
    triton triton.language triton.runtime triton.language.extra triton.language.extra.libdevice
    math cmath typing typing_extensions __future__ functools itertools dataclasses collections collections.abc
    numbers operator enum abc os os.path sys warnings numpy contextlib textwrap string re hashlib time random
    weakref copy types gc logging json struct array bisect heapq statistics fractions decimal
    """)

# Module roots whose import (and use) a dedicated rule names.
_MODULE_RULES: dict[str, str] = {
    **dict.fromkeys(
        ("threading", "_thread", "multiprocessing", "concurrent", "asyncio", "sched", "torch.multiprocessing"),
        "threading",
    ),
    **dict.fromkeys(
        (
            "socket",
            "ssl",
            "urllib",
            "urllib2",
            "urllib3",
            "requests",
            "http",
            "httpx",
            "aiohttp",
            "ftplib",
            "smtplib",
            "telnetlib",
            "xmlrpc",
            "websocket",
            "websockets",
            "paramiko",
            "poplib",
            "imaplib",
        ),
        "network",
    ),
    **dict.fromkeys(("subprocess", "pty", "pexpect", "sh", "plumbum", "signal"), "subprocess"),
    **dict.fromkeys(
        (
            "pickle",
            "cPickle",
            "_pickle",
            "dill",
            "cloudpickle",
            "joblib",
            "shelve",
            "marshal",
            "io",
            "pathlib",
            "shutil",
            "tempfile",
            "glob",
            "mmap",
            "sqlite3",
            "h5py",
            "fileinput",
            "zipfile",
            "tarfile",
            "gzip",
            "bz2",
            "lzma",
            "csv",
            "linecache",
            "posix",
            "fcntl",
            "safetensors",
        ),
        "file-access",
    ),
    **dict.fromkeys(
        ("inspect", "traceback", "__main__", "builtins", "faulthandler", "tracemalloc"), "harness-introspection"
    ),
    **dict.fromkeys(("importlib", "runpy", "code", "codeop", "pkgutil", "zipimport"), "dynamic-code"),
    **dict.fromkeys(
        ("torch._dynamo", "torch._inductor", "torch.jit", "torch.export", "torch.fx", "torch.compiler"),
        "torch-compiler",
    ),
    **dict.fromkeys(("torch.overrides", "torch.utils._python_dispatch", "torch._subclasses"), "monkey-patching"),
}

# Exact (or prefix, ending in ".") dotted names with a dedicated rule, wherever they appear.
_NAME_RULES: dict[str, str] = {
    **dict.fromkeys(
        (
            "torch.cuda.Stream",
            "torch.cuda.stream",
            "torch.cuda.ExternalStream",
            "torch.cuda.set_stream",
            "torch.cuda.StreamContext",
            "torch.Stream",
            "torch.musa.Stream",
            "torch.musa.stream",
            "torch.xpu.Stream",
            "torch.cuda.streams.",
            "cupy.cuda.Stream",
            "cupy.cuda.stream",
        ),
        "extra-stream",
    ),
    **dict.fromkeys(
        (
            "torch.set_num_threads",
            "torch.set_num_interop_threads",
            "torch.set_float32_matmul_precision",
            "torch.set_flush_denormal",
            "torch.use_deterministic_algorithms",
            "torch.set_default_dtype",
            "torch.set_default_device",
            "torch.set_default_tensor_type",
            "torch.set_grad_enabled",
            "torch.autograd.set_grad_enabled",
            "torch.manual_seed",
            "torch.seed",
            "torch.random.",
            "torch.cuda.manual_seed",
            "torch.cuda.manual_seed_all",
            "torch.set_rng_state",
            "torch.cuda.set_rng_state",
            "torch.cuda.set_per_process_memory_fraction",
            "torch.cuda.set_sync_debug_mode",
            "torch.cuda.memory.",
            "torch.cuda.empty_cache",
            "numpy.random.seed",
            "random.seed",
            "torch.backends.cudnn.flags",
            "torch.backends.cuda.sdp_kernel",
            "torch.set_printoptions",
        ),
        "global-flags",
    ),
    **dict.fromkeys(
        (
            "torch.compile",
            "torch.jit.",
            "torch.cuda.graph",
            "torch.cuda.graphs.",
            "torch.cuda.CUDAGraph",
            "torch.cuda.make_graphed_callables",
            "torch.export.",
            "torch._dynamo.",
            "torch._inductor.",
            "torch.compiler.",
            "torch.fx.",
        ),
        "torch-compiler",
    ),
    **dict.fromkeys(
        ("torch.autocast", "torch.cuda.amp.", "torch.amp.", "torch.cpu.amp.", "torch.get_autocast_dtype"),
        "precision-downgrade",
    ),
    **dict.fromkeys(
        (
            "builtins.open",
            "torch.load",
            "torch.save",
            "torch.from_file",
            "torch.ops.load_library",
            "torch.classes.load_library",
            "torch.hub.",
            "numpy.load",
            "numpy.save",
            "numpy.savez",
            "numpy.savez_compressed",
            "numpy.fromfile",
            "numpy.memmap",
            "numpy.loadtxt",
            "numpy.savetxt",
            "numpy.genfromtxt",
            "numpy.lib.format.",
            "torch.utils.data.",
            "torch.storage.",
            "torch.UntypedStorage.from_file",
        ),
        "file-access",
    ),
    **dict.fromkeys(
        (
            "os.system",
            "os.popen",
            "os.execl",
            "os.execle",
            "os.execlp",
            "os.execlpe",
            "os.execv",
            "os.execve",
            "os.execvp",
            "os.execvpe",
            "os.spawnl",
            "os.spawnle",
            "os.spawnlp",
            "os.spawnlpe",
            "os.spawnv",
            "os.spawnve",
            "os.spawnvp",
            "os.spawnvpe",
            "os.posix_spawn",
            "os.posix_spawnp",
            "os.startfile",
            "os.kill",
            "os.killpg",
        ),
        "subprocess",
    ),
    **dict.fromkeys(("os.fork", "os.forkpty", "os.register_at_fork", "torch.futures."), "threading"),
    **dict.fromkeys(
        (
            "sys._getframe",
            "sys._current_frames",
            "sys.modules",
            "sys.settrace",
            "sys.setprofile",
            "sys.gettrace",
            "sys.getprofile",
            "sys.addaudithook",
            "sys.meta_path",
            "sys.path_hooks",
            "gc.get_objects",
            "gc.get_referrers",
            "gc.get_referents",
            "gc.callbacks",
            "builtins.__build_class__",
        ),
        "harness-introspection",
    ),
    **dict.fromkeys(
        (
            "builtins.eval",
            "builtins.exec",
            "builtins.compile",
            "builtins.__import__",
            "builtins.globals",
            "builtins.locals",
            "builtins.vars",
            "builtins.breakpoint",
        ),
        "dynamic-code",
    ),
    **dict.fromkeys(
        (
            "torch.Tensor._make_subclass",
            "torch.Tensor._make_wrapper_subclass",
            "torch.Tensor.as_subclass",
            "torch._C._TensorBase",
            "torch._C.TensorBase",
            "torch.Tensor.__torch_function__",
        ),
        "tensor-subclass",
    ),
}

_ENV_WRITERS = frozenset(
    (
        "os.environ.update",
        "os.environ.setdefault",
        "os.environ.pop",
        "os.environ.clear",
        "os.putenv",
        "os.unsetenv",
        "os.environ.popitem",
    )
)
# Environment variables an answer may set: they only steer its own extension build.
_BUILD_ENV = frozenset(("TORCH_CUDA_ARCH_LIST", "MAX_JOBS"))
_OS_ALLOWED = _words(
    "os os.environ os.environ.get os.getenv os.path os.cpu_count os.sep os.linesep os.name os.getpid os.putenv "
    "os.unsetenv"
)

_BUILTINS = _words("""
    open eval exec compile __import__ globals locals vars breakpoint getattr setattr delattr id hash print len
    range isinstance issubclass super type object int float bool str list dict tuple set frozenset min max sum
    abs pow round divmod map filter zip enumerate sorted reversed any all iter next callable repr format hasattr
    staticmethod classmethod property slice memoryview bytes bytearray input help dir
    """)

_ENTRY_METHODS = ("forward", "__call__", "_call_impl", "__getattr__", "__getattribute__", "_wrapped_call_impl")
_HOOK_METHODS = _words(
    "register_forward_hook register_forward_pre_hook register_full_backward_hook register_backward_hook "
    "register_full_backward_pre_hook register_module_forward_hook register_module_forward_pre_hook"
)
_JIT_DECORATORS = _words(
    "triton.jit triton.autotune triton.heuristics triton.language.jit triton.runtime.jit.jit "
    "triton.runtime.autotuner.autotune"
)
_WRAPPERS = frozenset(
    (
        "functools.partial",
        "builtins.staticmethod",
        "builtins.classmethod",
        "functools.wraps",
        "functools.lru_cache",
        "functools.cache",
    )
)
_LOADERS = frozenset(("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"))
_ARITH_OPS = _words("+ - * / // % ** @ & | ^ << >>")
_COMPARE_OPS = _words("< > <= >= == !=")
_LIBRARY_FLAGS = re.compile(
    r"^-l(cublas|cublasLt|cudnn|mkl\w*|openblas|blas|cblas|dnnl|mkldnn|lapack\w*|cusparse|cufft)$"
)
_PATH_LITERAL = re.compile(r"/dev/shm|/proc/|/sys/|\.(?:pt|pth|pkl|pickle|npy|npz|safetensors)\b")


def _rule_for_name(name: str) -> str | None:
    """The whole-program rule a dotted name triggers wherever it appears (``None``: none)."""
    if name in _TORCH_ALLOWED:
        return None
    rule = _NAME_RULES.get(name)
    if rule is not None:
        return rule
    if name.startswith("builtins."):
        return None
    for prefix, prefix_rule in _NAME_RULES.items():
        if prefix.endswith(".") and name.startswith(prefix):
            return prefix_rule
    root = name.split(".")[0]
    for module, module_rule in _MODULE_RULES.items():
        if name == module or name.startswith(module + "."):
            return module_rule
    if name.startswith("torch.backends.") and name.endswith(
        ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")
    ):
        return "global-flags"
    if name in _HALF_NAMES:
        return "precision-downgrade"
    if root == "os" and name not in _OS_ALLOWED and not name.startswith("os.path."):
        if name.startswith("os.environ"):
            return None
        return "file-access"
    if name.startswith("torch._") and not name.startswith("torch.__"):
        return "private-torch-api"
    return None


_ATEN_NAMESPACES = frozenset(
    ("aten", "prims", "quantized", "_quantized", "mkldnn", "quantized_decomposed", "higher_order", "_c10d_functional")
)


def _compute_name(name: str) -> bool:
    """Whether referencing the dotted ``name`` inside forward means computing with PyTorch/NumPy."""
    if name in _MODULE_NAMES or name in _TORCH_ALLOWED:
        return False
    if name.startswith("torch."):
        parts = name.split(".")
        if parts[1] == "ops" and len(parts) >= 3:
            return parts[2] in _ATEN_NAMESPACES
        return parts[1] not in ("version", "backends")
    if name.startswith("numpy."):
        return name not in _NUMPY_CONSTANTS
    return False


# --------------------------------------------------------------------------------------------
# tree-sitter plumbing
# --------------------------------------------------------------------------------------------


@functools.cache
def _language(language: str) -> tree_sitter.Language:
    grammar = tree_sitter_python if language == "python" else tree_sitter_cpp
    return tree_sitter.Language(grammar.language())


_PARSERS = threading.local()


def _parser(language: str) -> tree_sitter.Parser:
    """A parser for ``language`` owned by the calling thread (parsers are not thread-safe)."""
    parser = getattr(_PARSERS, language, None)
    if parser is None:
        parser = tree_sitter.Parser(_language(language))
        setattr(_PARSERS, language, parser)
    return parser


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Every node under ``node`` (itself included), in source order, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _text(node: tree_sitter.Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def _field(node: tree_sitter.Node | None, name: str) -> tree_sitter.Node | None:
    return None if node is None else node.child_by_field_name(name)


def _line(node: tree_sitter.Node) -> int:
    return node.start_point.row + 1


def _key(node: tree_sitter.Node) -> tuple[int, int, str]:
    return (node.start_byte, node.end_byte, node.type)


# --------------------------------------------------------------------------------------------
# Python: strings
# --------------------------------------------------------------------------------------------

_Lines = list[tuple[str, int]]  # decoded text lines, each with its 0-based row in the code


def _unescape(segment: str) -> str:
    try:
        return codecs.decode(segment.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, UnicodeEncodeError, ValueError):
        return segment


def _string_lines(node: tree_sitter.Node, source: bytes) -> _Lines:
    """Decode one Python ``string`` node into text lines mapped to code rows (interpolations become ``0``)."""
    start = _field(node, "start") or (node.children[0] if node.children else None)
    children = node.children
    if not children or start is None or start.type != "string_start":
        return [(_text(node), node.start_point.row)]
    prefix = _text(children[0]).lower()
    end_node = children[-1] if children[-1].type == "string_end" else None
    body_start = children[0].end_byte
    body_end = end_node.start_byte if end_node is not None else node.end_byte
    is_raw = "r" in prefix
    is_f = "f" in prefix
    pieces: list[str] = []
    cursor = body_start
    if is_f:
        for child in children:
            if child.type == "interpolation":
                pieces.append(source[cursor : child.start_byte].decode("utf-8", "replace"))
                pieces.append("0")
                cursor = child.end_byte
    pieces.append(source[cursor:body_end].decode("utf-8", "replace"))
    raw = "".join(pieces)
    if is_f:
        raw = raw.replace("{{", "{").replace("}}", "}")
    lines: _Lines = [("", children[0].end_point.row)]
    row = children[0].end_point.row
    segments = raw.split("\n")
    for index, segment in enumerate(segments):
        continued = False
        if not is_raw:
            trailing = len(segment) - len(segment.rstrip("\\"))
            if trailing % 2 == 1 and index < len(segments) - 1:
                segment, continued = segment[:-1], True
            segment = _unescape(segment)
        chunks = segment.split("\n")
        lines[-1] = (lines[-1][0] + chunks[0], lines[-1][1])
        lines.extend((chunk, row) for chunk in chunks[1:])
        row += 1
        if index < len(segments) - 1 and not continued:
            lines.append(("", row))
    return lines


def _join_lines(parts: Iterable[_Lines]) -> _Lines:
    """Concatenate decoded strings (the first line of each part continues the last line of the previous)."""
    out: _Lines = []
    for part in parts:
        if not part:
            continue
        if out:
            text, row = out[-1]
            out[-1] = (text + part[0][0], row if text.strip() else part[0][1])
            out.extend(part[1:])
        else:
            out.extend(part)
    return out


# --------------------------------------------------------------------------------------------
# Public data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NativeSource:
    """One C++/CUDA source text found in a candidate program.

    Attributes:
        language: ``"cpp"`` or ``"cuda"``.
        text: the decoded source text (escapes resolved, f-string fields replaced by ``0``).
        line: 1-based line in the candidate program where ``text`` starts.
        lines: for each line of ``text``, its 1-based line in the candidate program.
    """

    language: str
    text: str
    line: int
    lines: tuple[int, ...] = ()

    def code_line(self, text_row: int) -> int:
        """The 1-based program line of the 0-based ``text_row`` of ``text``."""
        if 0 <= text_row < len(self.lines):
            return self.lines[text_row]
        return self.line + max(text_row, 0)


_CPP_HINT = re.compile(
    r"#\s*include\b|__global__|\btorch::|\bat::|\bTORCH_CHECK\b|\bPYBIND11_MODULE\b|\bTORCH_LIBRARY|\bstd::|"
    r'extern\s+"C"|\bAT_DISPATCH_|\bc10::'
)
_CUDA_HINT = re.compile(r"__global__|__device__|<<<|\bthreadIdx\b|\bblockIdx\b|\bcuda[A-Z]\w*\(|\bmusa[A-Z]")


# --------------------------------------------------------------------------------------------
# Python: the program model (imports, aliases, definitions)
# --------------------------------------------------------------------------------------------


@dataclass
class _ClassInfo:
    name: str
    node: tree_sitter.Node
    bases: list[tree_sitter.Node]
    methods: dict[str, tree_sitter.Node]
    attributes: dict[str, tree_sitter.Node]


_REFERENCE_SKIP_PARENTS = frozenset(
    ("import_statement", "import_from_statement", "global_statement", "nonlocal_statement")
)


class _PyProgram:
    """A parsed candidate: imports, definitions, and aliases resolved to dotted names or markers.

    Resolution results are sets of strings: dotted external names (``"torch.matmul"``),
    or markers: ``<ext>`` (a compiled extension module), ``<ext>.f``, ``<func>f``,
    ``<jit>f`` (a Triton kernel), ``<class>C``, ``<inst>C``, ``<method>C.m``,
    ``<selfattr>m``, ``<xinst>torch.nn.Linear`` (an instance of an external class),
    ``<xattr>torch.nn.Linear.forward``, ``<lambda>N``, ``<ref>Model``, ``<dyn>``.
    """

    def __init__(self, code: str) -> None:
        self.source = code.encode("utf-8", "surrogatepass")
        self.root = _parser("python").parse(self.source).root_node
        self.nodes: list[tuple[tree_sitter.Node, bool]] = list(self._walk_roles(self.root))
        self.imports: dict[str, str] = {}
        self.import_sites: list[tuple[str, tree_sitter.Node]] = []
        self.functions: dict[str, tree_sitter.Node] = {}
        self.classes: dict[str, _ClassInfo] = {}
        self.jit_names: set[str] = set()
        self.lambdas: dict[str, tree_sitter.Node] = {}
        self.assignments: list[tuple[str, tree_sitter.Node]] = []
        self.bound: set[str] = set()
        self.aliases: dict[str, set[str]] = {}
        self.ext_functions: set[str] = set()
        self.ext_entry_names: set[str] = set()
        self.docstrings: set[tuple[int, int, str]] = set()
        self._memo: dict[tuple[int, int, str], frozenset[str]] = {}
        self._depth = 0
        self._returns: dict[int, list[tree_sitter.Node]] = {}
        self._loader_calls: list[tree_sitter.Node] | None = None
        self.calls = [node for node, _ in self.nodes if node.type == "call"]
        self._collect()
        self._resolve_aliases()

    # -- traversal -------------------------------------------------------------------------

    @staticmethod
    def _walk_roles(
        root: tree_sitter.Node, prune: Callable[[tree_sitter.Node], bool] | None = None
    ) -> Iterator[tuple[tree_sitter.Node, bool]]:
        """Yield ``(node, is_reference)``; ``is_reference`` marks identifiers/attribute chains used as values.

        Attribute chains are references only at their outermost node; names being
        defined (def/class names, parameters, keyword names, attribute names) are not.
        Subtrees for which ``prune`` is true are skipped (their root is not yielded).
        """
        stack: list[tuple[tree_sitter.Node, bool]] = [(root, False)]
        while stack:
            node, inner = stack.pop()
            kind = node.type
            if kind in _REFERENCE_SKIP_PARENTS:
                yield node, False
                continue
            if prune is not None and node.id != root.id and prune(node):
                continue
            is_ref = not inner and kind in ("identifier", "attribute")
            yield node, is_ref
            children = node.children
            skip: set[int] = set()
            if kind == "attribute":
                obj = _field(node, "object")
                attr = _field(node, "attribute")
                if obj is not None and obj.type in ("identifier", "attribute"):
                    skip.add(obj.id)
                if attr is not None:
                    skip.add(attr.id)
            elif kind in ("function_definition", "class_definition", "keyword_argument"):
                name = _field(node, "name")
                if name is not None:
                    skip.add(name.id)
            elif kind in ("parameters", "lambda_parameters"):
                for child in children:
                    if child.type == "identifier":
                        skip.add(child.id)
            elif kind in (
                "typed_parameter",
                "default_parameter",
                "typed_default_parameter",
                "list_splat_pattern",
                "dictionary_splat_pattern",
            ):
                name = _field(node, "name")
                if name is not None:
                    skip.add(name.id)
                for child in children:
                    if child.type == "identifier" and kind in (
                        "typed_parameter",
                        "list_splat_pattern",
                        "dictionary_splat_pattern",
                    ):
                        skip.add(child.id)
            for child in reversed(children):
                stack.append((child, child.id in skip))

    # -- collection ------------------------------------------------------------------------

    def _collect(self) -> None:
        for node, _ in self.nodes:
            kind = node.type
            if kind == "import_statement":
                self._collect_import(node)
            elif kind == "import_from_statement":
                self._collect_from_import(node)
            elif kind == "class_definition":
                self._collect_class(node)
            elif kind in ("assignment", "augmented_assignment"):
                self._collect_assignment(_field(node, "left"), _field(node, "right"))
            elif kind == "named_expression":
                self._collect_assignment(_field(node, "name"), _field(node, "value"))
            elif kind == "function_definition":
                name = _field(node, "name")
                if name is not None:
                    self.bound.add(_text(name))
            elif kind == "lambda" and node.is_named:
                self.lambdas[str(node.start_byte)] = node
            elif kind in ("parameters", "lambda_parameters"):
                self.bound.update(_text(c) for c in _walk(node) if c.type == "identifier")
            elif kind in ("for_statement", "for_in_clause"):
                left = _field(node, "left")
                if left is not None:
                    self.bound.update(_text(c) for c in _walk(left) if c.type == "identifier")
        for top in self._top_level_definitions(self.root):
            if top.type == "function_definition":
                name = _text(_field(top, "name"))
                self.functions[name] = top
                if self._is_jit(top):
                    self.jit_names.add(name)
        self._collect_docstrings()

    def _collect_docstrings(self) -> None:
        owners = [self.root] + [
            _field(n, "body") for n, _ in self.nodes if n.type in ("function_definition", "class_definition")
        ]
        for owner in owners:
            if owner is None or not owner.named_children:
                continue
            first = owner.named_children[0]
            if first.type == "expression_statement" and first.named_child_count == 1:
                value = first.named_children[0]
                if value.type in ("string", "concatenated_string"):
                    self.docstrings.add(_key(value))

    @staticmethod
    def _top_level_definitions(block: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
        """Function/class definitions directly in ``block`` (also under decorators and module-level if/try)."""
        stack = list(reversed(block.named_children))
        while stack:
            node = stack.pop()
            if node.type == "decorated_definition":
                definition = _field(node, "definition")
                if definition is not None:
                    yield definition
            elif node.type in ("function_definition", "class_definition"):
                yield node
            elif node.type in (
                "if_statement",
                "try_statement",
                "else_clause",
                "elif_clause",
                "except_clause",
                "finally_clause",
                "block",
                "with_statement",
            ):
                stack.extend(reversed(node.named_children))

    def _decorators(self, definition: tree_sitter.Node) -> list[tree_sitter.Node]:
        parent = definition.parent
        if parent is None or parent.type != "decorated_definition":
            return []
        return [c.named_children[0] for c in parent.children if c.type == "decorator" and c.named_children]

    def _is_jit(self, definition: tree_sitter.Node) -> bool:
        for decorator in self._decorators(definition):
            target = _field(decorator, "function") if decorator.type == "call" else decorator
            if target is not None and self._dotted(target) in _JIT_DECORATORS:
                return True
        return False

    def _dotted(self, node: tree_sitter.Node) -> str:
        """Resolve a plain name/attribute chain through imports only (no aliases)."""
        if node.type == "identifier":
            name = _text(node)
            return self.imports.get(name, name)
        if node.type == "attribute":
            obj = _field(node, "object")
            attr = _field(node, "attribute")
            if obj is not None and attr is not None:
                return self._dotted(obj) + "." + _text(attr)
        return ""

    def _collect_import(self, node: tree_sitter.Node) -> None:
        for child in node.named_children:
            if child.type == "dotted_name":
                module = _text(child)
                root = module.split(".")[0]
                self.imports[root] = root
                self.bound.add(root)
                self.import_sites.append((module, node))
            elif child.type == "aliased_import":
                module = _text(_field(child, "name"))
                alias = _text(_field(child, "alias"))
                self.imports[alias] = module
                self.bound.add(alias)
                self.import_sites.append((module, node))

    def _collect_from_import(self, node: tree_sitter.Node) -> None:
        module_node = _field(node, "module_name")
        module = _text(module_node) if module_node is not None else ""
        if module_node is not None and module_node.type == "relative_import":
            self.import_sites.append(("." + module.lstrip("."), node))
            return
        if any(c.type == "wildcard_import" for c in node.children):
            self.import_sites.append((module + ".*", node))
            return
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = _text(_field(child, "name"))
                alias = _text(_field(child, "alias"))
            else:
                name = alias = _text(child)
            self.imports[alias] = f"{module}.{name}"
            self.bound.add(alias)
            self.import_sites.append((f"{module}.{name}", node))

    def _collect_class(self, node: tree_sitter.Node) -> None:
        name = _text(_field(node, "name"))
        supers = _field(node, "superclasses")
        bases = [c for c in supers.named_children if c.type != "keyword_argument"] if supers is not None else []
        info = _ClassInfo(name, node, bases, {}, {})
        body = _field(node, "body")
        if body is not None:
            for definition in self._top_level_definitions(body):
                if definition.type == "function_definition":
                    info.methods[_text(_field(definition, "name"))] = definition
            for statement in body.named_children:
                if statement.type == "expression_statement" and statement.named_children:
                    inner = statement.named_children[0]
                    if inner.type == "assignment":
                        left, right = _field(inner, "left"), _field(inner, "right")
                        if left is not None and right is not None and left.type == "identifier":
                            info.attributes[_text(left)] = right
        self.classes[name] = info
        self.bound.add(name)

    def _collect_assignment(self, left: tree_sitter.Node | None, right: tree_sitter.Node | None) -> None:
        if left is None or right is None:
            return
        if left.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple"):
            targets = left.named_children
            values = right.named_children if right.type in ("expression_list", "tuple", "list") else []
            for index, target in enumerate(targets):
                if len(values) == len(targets):
                    self._collect_assignment(target, values[index])
                elif target.type == "identifier":
                    self.bound.add(_text(target))
            return
        key = self._target_key(left)
        if key is not None:
            self.assignments.append((key, right))
            if left.type == "identifier":
                self.bound.add(key)

    def _target_key(self, node: tree_sitter.Node) -> str | None:
        if node.type == "identifier":
            return _text(node)
        if node.type == "attribute":
            obj = _field(node, "object")
            attr = _field(node, "attribute")
            if obj is not None and attr is not None and obj.type == "identifier":
                owner = _text(obj)
                if owner in ("self", "cls"):
                    return "self." + _text(attr)
                return owner + "." + _text(attr)
        return None

    # -- resolution ------------------------------------------------------------------------

    def _resolve_aliases(self) -> None:
        for _ in range(8):
            changed = False
            self._memo.clear()
            for key, value in self.assignments:
                found = self.resolve(value)
                current = self.aliases.setdefault(key, set())
                if not found <= current:
                    current |= found
                    changed = True
            for name, definition in list(self.functions.items()):
                if name not in self.ext_functions and self._returns_extension(definition):
                    self.ext_functions.add(name)
                    changed = True
            if not changed:
                break
        self._memo.clear()

    def _returns_extension(self, definition: tree_sitter.Node) -> bool:
        returns = self._returns.get(definition.id)
        if returns is None:
            returns = [
                n.named_children[0] for n in _walk(definition) if n.type == "return_statement" and n.named_children
            ]
            self._returns[definition.id] = returns
        return any("<ext>" in self.resolve(value) for value in returns)

    def const_str(self, node: tree_sitter.Node | None, depth: int = 0) -> str | None:
        """The value of a constant string expression (literals, ``+``, ``join``, ``[::-1]``, names bound once)."""
        if node is None or depth > 10:
            return None
        kind = node.type
        if kind == "string":
            if any(c.type == "interpolation" for c in node.children):
                return None
            return "\n".join(text for text, _ in _string_lines(node, self.source))
        if kind == "concatenated_string":
            parts = [self.const_str(c, depth + 1) for c in node.named_children]
            return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
        if kind == "parenthesized_expression" and node.named_children:
            return self.const_str(node.named_children[0], depth + 1)
        if kind == "binary_operator" and _text(_field(node, "operator")) == "+":
            left = self.const_str(_field(node, "left"), depth + 1)
            right = self.const_str(_field(node, "right"), depth + 1)
            return None if left is None or right is None else left + right
        if kind == "identifier":
            values = [v for k, v in self.assignments if k == _text(node)]
            if len(values) == 1:
                return self.const_str(values[0], depth + 1)
            return None
        if kind == "subscript":
            index = _field(node, "subscript")
            if index is not None and _text(index).replace(" ", "") == "::-1":
                inner = self.const_str(_field(node, "value"), depth + 1)
                return None if inner is None else inner[::-1]
            return None
        if kind == "call":
            function = _field(node, "function")
            args = _field(node, "arguments")
            if function is not None and function.type == "attribute" and args is not None:
                method = _text(_field(function, "attribute"))
                receiver = self.const_str(_field(function, "object"), depth + 1)
                if method == "join" and receiver is not None and args.named_children:
                    items = args.named_children[0]
                    if items.type in ("list", "tuple"):
                        parts = [self.const_str(c, depth + 1) for c in items.named_children]
                        if all(p is not None for p in parts):
                            return receiver.join(p for p in parts if p is not None)
                if method in ("lower", "upper", "strip") and receiver is not None and not args.named_children:
                    return getattr(receiver, method)()
        return None

    def resolve(self, node: tree_sitter.Node | None) -> frozenset[str]:
        """What a Python expression may refer to (see the class docstring for the markers)."""
        if node is None:
            return frozenset()
        key = _key(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if self._depth > 120:
            return frozenset()
        self._memo[key] = frozenset()
        self._depth += 1
        try:
            result = frozenset(self._resolve(node))
        finally:
            self._depth -= 1
        self._memo[key] = result
        return result

    def _resolve(self, node: tree_sitter.Node) -> set[str]:
        kind = node.type
        out: set[str] = set()
        if kind == "identifier":
            name = _text(node)
            out |= self.aliases.get(name, set())
            if name in self.imports:
                out.add(self.imports[name])
            if name in self.functions:
                out.add(("<jit>" if name in self.jit_names else "<func>") + name)
            if name in self.classes:
                out.add("<class>" + name)
            if name == "Model":
                out.add("<ref>Model")
            if not out and name in _BUILTINS and name not in self.bound:
                out.add("builtins." + name)
            if name == "__builtins__":
                out.add("builtins")
            return out
        if kind == "attribute":
            obj = _field(node, "object")
            attr = _text(_field(node, "attribute"))
            if obj is None or not attr:
                return out
            if obj.type == "identifier" and _text(obj) in ("self", "cls"):
                out |= self.aliases.get("self." + attr, set())
                out.add("<selfattr>" + attr)
                return out
            if obj.type == "identifier" and _text(obj) + "." + attr in self.aliases:
                out |= self.aliases[_text(obj) + "." + attr]
            return out | self._member(self.resolve(obj), attr)
        if kind == "call":
            return self._resolve_call(node)
        if kind in ("parenthesized_expression", "await") and node.named_children:
            return set(self.resolve(node.named_children[0]))
        if kind == "conditional_expression":
            for child in node.named_children[:1] + node.named_children[2:3]:
                out |= self.resolve(child)
            return out
        if kind == "boolean_operator":
            return set(self.resolve(_field(node, "left"))) | set(self.resolve(_field(node, "right")))
        if kind == "lambda":
            return {"<lambda>" + str(node.start_byte)}
        return out

    def _member(self, bases: Iterable[str], attr: str) -> set[str]:
        out: set[str] = set()
        for base in bases:
            if base == "<ext>":
                out.add("<ext>." + attr)
            elif base.startswith(("<class>", "<inst>")):
                out.add("<method>" + base.split(">", 1)[1] + "." + attr)
            elif base.startswith("<xinst>"):
                out.add("<xattr>" + base[len("<xinst>") :] + "." + attr)
            elif not base.startswith("<"):
                dotted = base + "." + attr
                out.add(dotted)
        return out

    def _resolve_call(self, node: tree_sitter.Node) -> set[str]:
        out: set[str] = set()
        function = _field(node, "function")
        args = _field(node, "arguments")
        positional = [c for c in args.named_children if c.type not in ("keyword_argument", "comment")] if args else []
        for target in self.resolve(function):
            if target in _LOADERS:
                out.add("<ext>")
            elif target in ("builtins.getattr", "operator.attrgetter"):
                if len(positional) >= 2:
                    name = self.const_str(positional[1])
                    if name is None:
                        out.add("<dyn>")
                    else:
                        out |= self._member(self.resolve(positional[0]), name)
            elif target in ("builtins.__import__", "importlib.import_module"):
                name = self.const_str(positional[0]) if positional else None
                out.add(name if name else "<dyn>")
            elif target.startswith("<func>") and target[len("<func>") :] in self.ext_functions:
                out.add("<ext>")
            elif target.startswith("<class>"):
                out.add("<inst>" + target[len("<class>") :])
            elif target in _JIT_DECORATORS:
                out.add("<jit>")
            elif target in _WRAPPERS and positional:
                out |= self.resolve(positional[0])
            elif not target.startswith("<") and target.rsplit(".", 1)[-1][:1].isupper():
                out.add("<xinst>" + target)
        return out

    # -- queries ---------------------------------------------------------------------------

    def mro(self, name: str) -> list[_ClassInfo]:
        """In-file classes in the method resolution order of class ``name`` (depth-first, no repeats)."""
        order: list[_ClassInfo] = []
        stack = [name]
        while stack:
            current = stack.pop(0)
            info = self.classes.get(current)
            if info is None or info in order or len(order) > 50:
                continue
            order.append(info)
            for base in info.bases:
                stack.extend(t[len("<class>") :] for t in self.resolve(base) if t.startswith("<class>"))
        return order

    def method(self, class_name: str, name: str) -> tree_sitter.Node | None:
        for info in self.mro(class_name):
            if name in info.methods:
                return info.methods[name]
        return None

    def owner_class(self, definition: tree_sitter.Node) -> str | None:
        for info in self.classes.values():
            if definition in info.methods.values():
                return info.name
        return None

    def loader_calls(self) -> list[tree_sitter.Node]:
        """Calls of ``load_inline``/``load`` (however they are named)."""
        if self._loader_calls is None:
            self._loader_calls = [node for node in self.calls if self.resolve(_field(node, "function")) & _LOADERS]
        return self._loader_calls


# --------------------------------------------------------------------------------------------
# Findings and messages
# --------------------------------------------------------------------------------------------

_MESSAGES = {
    "threading": "{name} starts threads, processes or asynchronous work; do all work synchronously in forward "
    "with your kernel (OpenMP inside C++ is fine).",
    "network": "{name} is network access, which is not allowed; the answer must be self-contained.",
    "subprocess": "{name} runs other processes or sends signals; remove it and compute in your kernel.",
    "file-access": "{name} accesses files or the operating system; remove it: pass kernel sources to load_inline "
    "as strings and compute every output from the inputs.",
    "harness-introspection": "{name} inspects the evaluation harness (frames, stack, gc, sys.modules); remove it.",
    "dynamic-code": "{name} runs or looks up code dynamically; use direct imports and direct calls.",
    "torch-compiler": "{name} lets a PyTorch compiler generate the kernel; write the kernel yourself "
    "(load_inline or @triton.jit).",
    "monkey-patching": "{name} replaces behaviour of torch/time/triton or another module; do not modify libraries "
    "or the harness.",
    "global-flags": "{name} changes process-wide state (backend flags, threads, precision, RNG seeds, environment); "
    "leave global settings alone.",
    "precision-downgrade": "{name} lowers precision below the task's float32; compute and accumulate in float32.",
    "extra-stream": "{name} puts work on a non-default stream that the timer does not wait for; launch on the "
    "current stream.",
    "private-torch-api": "{name} is a private PyTorch internal; use only public allocation APIs and your own kernel.",
    "tensor-subclass": "{name}: outputs must be plain torch.Tensor objects; do not subclass Tensor or override "
    "__torch_function__/__torch_dispatch__.",
    "forbidden-import": "importing {name} is not allowed; use torch, torch.utils.cpp_extension, triton, math and "
    "standard helpers (typing, functools, ...).",
}


def _message(rule: str, name: str, target: str | None = None) -> str:
    """The sentence for ``rule`` about the code ``name`` (which resolves to ``target``)."""
    shown = f"`{name}`" if target is None or target == name else f"`{name}` (`{target}`)"
    return _MESSAGES[rule].format(name=shown)


class _Findings:
    """Collects violations, one per (rule, line, where)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, int, str], Violation] = {}

    def add(self, rule: str, line: int, message: str, where: str = "python") -> None:
        key = (rule, line, where)
        if key not in self.items:
            self.items[key] = Violation(rule, line, message, where)

    def result(self) -> tuple[Violation, ...]:
        ordered = sorted(self.items.values(), key=lambda v: (v.line, v.where != "python", v.rule))
        return tuple(ordered[:_MAX_VIOLATIONS])


# --------------------------------------------------------------------------------------------
# Python: rules over the whole program
# --------------------------------------------------------------------------------------------

_INTROSPECTION_ATTRS = _words(
    "f_back f_globals f_locals f_code f_builtins tb_frame gi_frame cr_frame ag_frame __globals__ __closure__ "
    "__subclasses__ __code__"
)
_LITERALS = frozenset(
    (
        "string",
        "concatenated_string",
        "list",
        "dictionary",
        "set",
        "tuple",
        "integer",
        "float",
        "true",
        "false",
        "none",
        "list_comprehension",
        "dictionary_comprehension",
    )
)
_TORCH_ALLOC = _words(
    "torch.empty torch.empty_like torch.empty_strided torch.zeros torch.zeros_like torch.ones torch.ones_like "
    "torch.full torch.full_like torch.as_strided torch.from_dlpack torch.utils.dlpack.from_dlpack"
)
_TENSOR_CLASSES = frozenset(("torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.Tensor"))
_META_METHODS = _words("""
    size dim ndimension numel nelement stride dtype device is_contiguous data_ptr element_size item is_cuda get
    append extend pop keys values items format join replace startswith endswith setdefault update copy
    register_buffer register_parameter parameters named_parameters buffers modules children train eval
    get_device storage_offset untyped_storage is_floating_point is_complex cuda_stream dim_order
    """)
_SCALAR_ANNOTATIONS = frozenset(("int", "float", "bool", "str", "tuple", "list", "dict", "None"))
_OPERATOR_NON_COMPUTE = frozenset(
    ("operator.attrgetter", "operator.itemgetter", "operator.methodcaller", "operator.index", "operator.length_hint")
)
_CACHE_METHODS = frozenset(("get", "setdefault", "pop", "__getitem__", "__contains__", "__setitem__", "add"))


class _PythonRules:
    """Runs every Python rule of a parsed program into a :class:`_Findings`."""

    def __init__(
        self,
        program: _PyProgram,
        backend: str,
        half_ok: bool,
        native_keys: set[tuple[int, int, str]],
        findings: _Findings,
    ) -> None:
        self.p = program
        self.backend = backend
        self.half_ok = half_ok
        self.native_keys = native_keys
        self.findings = findings
        self.hook_seeds: list[tree_sitter.Node] = []
        self.kernel_uses = 0
        self._identity_names: set[str] = set()
        self.self_tensors = self._self_tensors()

    def add(self, rule: str, node: tree_sitter.Node | int, message: str) -> None:
        if rule == "precision-downgrade" and self.half_ok:
            return
        line = node if isinstance(node, int) else _line(node)
        self.findings.add(rule, line, message)

    def run(self) -> None:
        self._imports()
        self._everywhere()
        self._classes()
        self._reach()
        self._kernel_presence()

    # -- imports ---------------------------------------------------------------------------

    def _imports(self) -> None:
        for module, node in self.p.import_sites:
            if module.endswith(".*"):
                self.add(
                    "forbidden-import",
                    node,
                    f"`from {module[:-2]} import *` hides where names come from; import the names you use explicitly.",
                )
                continue
            if module.startswith("."):
                self.add("forbidden-import", node, "relative imports are not available; the answer is one file.")
                continue
            rule = _rule_for_name(module)
            if rule is not None:
                self.add(rule, node, _message(rule, module))
            elif not self._import_allowed(module):
                self.add("forbidden-import", node, _message("forbidden-import", module))

    @staticmethod
    def _import_allowed(module: str) -> bool:
        parts = module.split(".")
        if parts[0] in ("torch", "triton"):
            return True
        return any(".".join(parts[:i]) in _ALLOWED_IMPORTS for i in range(1, len(parts) + 1))

    # -- names, calls, assignments, strings anywhere ---------------------------------------

    def _everywhere(self) -> None:
        for node, is_ref in self.p.nodes:
            kind = node.type
            if is_ref:
                self._reference_anywhere(node)
            if kind == "attribute":
                attr = _text(_field(node, "attribute"))
                if attr in _INTROSPECTION_ATTRS:
                    self.add("harness-introspection", node, _message("harness-introspection", attr))
                elif attr == "__dict__" and any(not t.startswith("<") for t in self.p.resolve(_field(node, "object"))):
                    self.add("dynamic-code", node, _message("dynamic-code", _text(node)))
            elif kind == "call":
                self._call_anywhere(node)
            elif kind in ("assignment", "augmented_assignment"):
                self._assignment_target(_field(node, "left"))
            elif kind == "delete_statement":
                for target in node.named_children:
                    for item in target.named_children if target.type in ("expression_list", "tuple") else [target]:
                        self._assignment_target(item)
            elif kind in ("string", "concatenated_string") and (
                node.parent is None or node.parent.type != "concatenated_string"
            ):
                self._string_anywhere(node)

    def _reference_anywhere(self, node: tree_sitter.Node) -> None:
        text = _text(node)
        if node.type == "identifier":
            if text == "Model" and not self._is_class_base(node):
                self.add(
                    "uses-reference-model",
                    node,
                    "The answer must not use the reference `Model` (no instance, "
                    "call or reference); implement ModelNew's computation in your own kernel.",
                )
            if text == "__builtins__":
                self.add("harness-introspection", node, _message("harness-introspection", text))
        for target in self.p.resolve(node):
            if target.startswith("<"):
                continue
            rule = _rule_for_name(target)
            if rule is not None:
                self.add(rule, node, _message(rule, text, target))

    @staticmethod
    def _is_class_base(node: tree_sitter.Node) -> bool:
        parent = node.parent
        return (
            parent is not None
            and parent.type == "argument_list"
            and parent.parent is not None
            and parent.parent.type == "class_definition"
        )

    def _call_anywhere(self, node: tree_sitter.Node) -> None:
        function = _field(node, "function")
        args = _field(node, "arguments")
        arg_nodes = args.named_children if args is not None else []
        positional = [a for a in arg_nodes if a.type not in ("keyword_argument", "comment")]
        targets = self.p.resolve(function)
        fname = _text(function)
        if function is not None and function.type == "identifier" and fname in ("get_inputs", "get_init_inputs"):
            self.add(
                "uses-task-inputs",
                node,
                f"`{fname}()` must not be called by the answer (it would precompute "
                "results from the harness's inputs); compute from the arguments forward receives.",
            )
        for target in targets:
            if target in (
                "builtins.setattr",
                "builtins.delattr",
                "builtins.object.__setattr__",
                "builtins.type.__setattr__",
                "builtins.object.__delattr__",
            ):
                for base in self.p.resolve(positional[0]) if positional else ():
                    if not base.startswith("<"):
                        name = self.p.const_str(positional[1]) if len(positional) > 1 else None
                        full = f"{base}.{name}" if name else base
                        rule = "global-flags" if full.startswith("torch.backends.") else "monkey-patching"
                        self.add(rule, node, _message(rule, f"{fname}({full}, ...)"))
            elif target == "builtins.getattr" and len(positional) >= 2 and self.p.const_str(positional[1]) is None:
                if any(not b.startswith("<") for b in self.p.resolve(positional[0])):
                    self.add("dynamic-code", node, _message("dynamic-code", "getattr(<module>, <computed name>)"))
            elif target in _ENV_WRITERS:
                key = self.p.const_str(positional[0]) if positional else None
                if key not in _BUILD_ENV:
                    self.add("global-flags", node, _message("global-flags", fname))
            elif target.startswith("torch.library."):
                if any((self.p.const_str(a) or "").startswith(("aten", "prims")) for a in _walk_args(arg_nodes)):
                    self.add(
                        "monkey-patching",
                        node,
                        "Re-registering ATen/prims operators changes what the "
                        "reference computes; register your own namespace or call your extension directly.",
                    )
            elif target in _LOADERS:
                for arg in _walk_args(arg_nodes):
                    flag = self.p.const_str(arg)
                    if flag is not None and _LIBRARY_FLAGS.match(flag.strip()):
                        self.add(
                            "native-library",
                            arg,
                            f"linking `{flag.strip()}` pulls in a vendor library; "
                            "write the computation in your own kernel.",
                        )
        if function is not None and function.type == "attribute":
            method = _text(_field(function, "attribute"))
            receiver = _field(function, "object")
            if method in ("half", "bfloat16") and not any(not t.startswith("<") for t in self.p.resolve(receiver)):
                self.add("precision-downgrade", node, _message("precision-downgrade", f".{method}()"))
            if method in ("as_subclass", "_make_subclass", "_make_wrapper_subclass"):
                self.add("tensor-subclass", node, _message("tensor-subclass", f".{method}()"))
            if method in _HOOK_METHODS and positional:
                self.hook_seeds.append(positional[0])
        for arg in arg_nodes:
            if arg.type != "keyword_argument":
                continue
            key = _text(_field(arg, "name"))
            value = _field(arg, "value")
            if key in ("allow_tf32", "allow_fp16_reduced_precision_reduction") and _text(value) == "True":
                self.add("precision-downgrade", arg, _message("precision-downgrade", f"{key}=True"))
            elif key in ("input_precision", "dtype", "out_dtype") and (self.p.const_str(value) or "").lower() in (
                "tf32",
                "tf32x3",
                "bf16x3",
                "float16",
                "half",
                "bfloat16",
                "fp16",
                "bf16",
            ):
                self.add("precision-downgrade", arg, _message("precision-downgrade", _text(arg)))

    def _assignment_target(self, target: tree_sitter.Node | None) -> None:
        if target is None:
            return
        if target.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple"):
            for item in target.named_children:
                self._assignment_target(item)
            return
        if target.type == "attribute":
            attr = _text(_field(target, "attribute"))
            for base in self.p.resolve(_field(target, "object")):
                if base.startswith("<"):
                    continue
                full = f"{base}.{attr}"
                rule = "global-flags" if full.startswith("torch.backends.") else "monkey-patching"
                self.add(rule, target, _message(rule, f"{_text(target)} = ..."))
        elif target.type == "subscript":
            value = _field(target, "value")
            bases = self.p.resolve(value)
            text = _text(value)
            if "os.environ" in bases:
                if self.p.const_str(_field(target, "subscript")) not in _BUILD_ENV:
                    self.add("global-flags", target, _message("global-flags", f"{_text(target)} = ..."))
            elif "sys.modules" in bases or text.endswith("__dict__") or text == "__builtins__" or "builtins" in bases:
                self.add("monkey-patching", target, _message("monkey-patching", f"{_text(target)} = ..."))

    def _string_anywhere(self, node: tree_sitter.Node) -> None:
        key = _key(node)
        if key in self.native_keys or key in self.p.docstrings:
            return
        value = self.p.const_str(node)
        if value is None:
            value = _text(node)
        if "LD_PRELOAD" in value:
            self.add("monkey-patching", node, "LD_PRELOAD interposes library functions; remove it.")
        match = _PATH_LITERAL.search(value)
        if match and len(value) < 500 and not _CPP_HINT.search(value):
            self.add("file-access", node, _message("file-access", value.strip()[:60]))

    # -- classes ---------------------------------------------------------------------------

    def _classes(self) -> None:
        derived: set[str] = set()
        for _ in range(len(self.p.classes) + 1):
            before = len(derived)
            for info in self.p.classes.values():
                for base in info.bases:
                    targets = self.p.resolve(base)
                    if "<ref>Model" in targets or any(t.startswith("<class>") and t[7:] in derived for t in targets):
                        derived.add(info.name)
            if len(derived) == before:
                break
        for name in derived:
            self.add(
                "inherits-model",
                self.p.classes[name].node,
                f"`class {name}` derives from the reference "
                "`Model`; derive from nn.Module and implement forward with your own kernel.",
            )
        for info in self.p.classes.values():
            for base in info.bases:
                targets = self.p.resolve(base)
                if targets & {"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"}:
                    self.add("tensor-subclass", info.node, _message("tensor-subclass", f"class {info.name}"))
            for name in ("__torch_function__", "__torch_dispatch__"):
                if name in info.methods or name in info.attributes:
                    self.add("tensor-subclass", info.methods.get(name, info.node), _message("tensor-subclass", name))

    # -- presence of a native kernel ---------------------------------------------------------

    def _kernel_presence(self) -> None:
        has_loader = bool(self.p.loader_calls())
        has_jit = bool(self.p.jit_names) or any("<jit>" in v for v in self.p.aliases.values())
        if self.backend == "triton":
            ok, wanted = has_jit, "a Triton kernel (@triton.jit) launched from forward"
        elif self.backend in ("cpp", "cuda", "musa"):
            ok, wanted = has_loader, "a native extension built with torch.utils.cpp_extension.load_inline"
        else:
            ok, wanted = has_loader or has_jit, "a native kernel (load_inline or @triton.jit)"
        if not ok:
            info = self.p.classes.get("ModelNew")
            self.add(
                "no-native-kernel",
                info.node if info else 0,
                f"The answer builds no kernel for the {self.backend!r} backend; it must contain {wanted}.",
            )

    # -- forward and everything it reaches ---------------------------------------------------

    def _self_tensors(self) -> set[str]:
        found: set[str] = set()
        for key, value in self.p.assignments:
            if key.startswith("self.") and self._is_tensor(value, frozenset()):
                found.add(key)
        for node, _ in self.p.nodes:
            if node.type == "call":
                function = _field(node, "function")
                if (
                    function is not None
                    and function.type == "attribute"
                    and _text(_field(function, "attribute")) in ("register_buffer", "register_parameter")
                ):
                    args = _field(node, "arguments")
                    name = (
                        self.p.const_str(args.named_children[0]) if args is not None and args.named_children else None
                    )
                    if name:
                        found.add("self." + name)
        return found

    def _is_tensor(self, node: tree_sitter.Node | None, taint: frozenset[str], depth: int = 0) -> bool:
        """Whether an expression is known to be a tensor (so operators on it dispatch ATen ops)."""
        if node is None or depth > 25:
            return False
        kind = node.type
        if kind == "identifier":
            return _text(node) in taint
        if kind == "attribute":
            obj = _field(node, "object")
            attr = _text(_field(node, "attribute"))
            if obj is not None and obj.type == "identifier" and _text(obj) in ("self", "cls"):
                return "self." + attr in getattr(self, "self_tensors", ())
            return attr in ("T", "mT", "H", "mH", "data", "grad", "real", "imag") and self._is_tensor(
                obj, taint, depth + 1
            )
        if kind == "subscript":
            return self._is_tensor(_field(node, "value"), taint, depth + 1)
        if kind in ("parenthesized_expression", "unary_operator") and node.named_children:
            return self._is_tensor(node.named_children[-1], taint, depth + 1)
        if kind == "conditional_expression":
            return any(self._is_tensor(c, taint, depth + 1) for c in node.named_children[:1] + node.named_children[2:3])
        if kind == "binary_operator":
            return self._is_tensor(_field(node, "left"), taint, depth + 1) or self._is_tensor(
                _field(node, "right"), taint, depth + 1
            )
        if kind != "call":
            return False
        function = _field(node, "function")
        if function is None or function.type == "subscript":
            return False
        for target in self.p.resolve(function):
            if target.startswith("<ext>.") or target.startswith("<xinst>torch.nn.") or target in _TENSOR_CLASSES:
                return True
            if target.startswith("torch.") and (
                target in _TORCH_ALLOC or (_compute_name(target) and not target.rsplit(".", 1)[-1][:1].isupper())
            ):
                return True
        if function.type == "attribute":
            method = _text(_field(function, "attribute"))
            if method in _TENSOR_RETURNING or _method_computes(method):
                return self._is_tensor(_field(function, "object"), taint, depth + 1)
        return False

    def _local_taint(self, body: tree_sitter.Node, seeds: frozenset[str]) -> frozenset[str]:
        pairs: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
        for node in _walk(body):
            if node.type in ("assignment", "for_statement", "for_in_clause"):
                left, right = _field(node, "left"), _field(node, "right")
                if left is not None and right is not None:
                    pairs.append((left, right))
        taint = set(seeds)
        for _ in range(4):
            before = len(taint)
            frozen = frozenset(taint)
            for left, right in pairs:
                if left.type == "identifier":
                    if self._is_tensor(right, frozen):
                        taint.add(_text(left))
                elif left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
                    values = right.named_children if right.type in ("expression_list", "tuple") else []
                    targets = left.named_children
                    for index, target in enumerate(targets):
                        value = values[index] if len(values) == len(targets) else right
                        if target.type == "identifier" and self._is_tensor(value, frozen):
                            taint.add(_text(target))
            if len(taint) == before:
                break
        return frozenset(taint)

    @staticmethod
    def _parameters(definition: tree_sitter.Node) -> list[tuple[str, bool]]:
        """Parameter names in order (``self``/``cls`` dropped), each with "could be a tensor input"."""
        params = _field(definition, "parameters")
        out: list[tuple[str, bool]] = []
        if params is None:
            return out
        for child in params.named_children:
            kind = child.type
            if kind == "identifier":
                out.append((_text(child), True))
            elif kind in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
                names = [c for c in child.named_children if c.type == "identifier"]
                annotation = _text(_field(child, "type"))
                if names:
                    out.append((_text(names[0]), annotation.split("[")[0] not in _SCALAR_ANNOTATIONS))
            elif kind in ("default_parameter", "typed_default_parameter"):
                value = _field(child, "value")
                annotation = _text(_field(child, "type"))
                tensorish = (value is None or value.type == "none") and annotation.split("[")[
                    0
                ] not in _SCALAR_ANNOTATIONS
                out.append((_text(_field(child, "name")), tensorish))
        if out and out[0][0] in ("self", "cls"):
            out = out[1:]
        return out

    def _reach(self) -> None:
        if "ModelNew" not in self.p.classes:
            return
        mro = [info.name for info in self.p.mro("ModelNew")]
        work: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        forward = None
        for name in _ENTRY_METHODS:
            definition = self.p.method("ModelNew", name)
            if definition is not None:
                inputs = frozenset(n for n, tensorish in self._parameters(definition) if tensorish)
                work.append((definition, self.p.owner_class(definition), inputs))
                forward = forward or (definition if name == "forward" else None)
            for cls in mro:
                value = self.p.classes[cls].attributes.get(name)
                if value is not None:
                    work.append((value, "ModelNew", frozenset()))
        entry_keys = {f"self.{n}" for n in _ENTRY_METHODS} | {f"{c}.{n}" for c in mro for n in _ENTRY_METHODS}
        work.extend((value, "ModelNew", frozenset()) for key, value in self.p.assignments if key in entry_keys)
        work.extend((seed, "ModelNew", frozenset()) for seed in self.hook_seeds)
        seen: dict[tuple[int, int, str], frozenset[str]] = {}
        while work and len(seen) < 400:
            node, cls, taint = work.pop()
            key = _key(node)
            if key in seen and taint <= seen[key]:
                continue
            taint = taint | seen.get(key, frozenset())
            seen[key] = taint
            work.extend(self._scan(node, cls, taint))
        if forward is not None and self.kernel_uses == 0:
            self.add(
                "kernel-not-called",
                forward,
                "forward never calls your compiled extension or launches your "
                "kernel; the output must be computed by the kernel you wrote, called from forward.",
            )

    def _callee(self, target: str, cls: str | None) -> tuple[tree_sitter.Node, str | None] | None:
        if target.startswith("<func>"):
            definition = self.p.functions.get(target[len("<func>") :])
            return (definition, None) if definition is not None else None
        if target.startswith("<method>"):
            owner, _, name = target[len("<method>") :].rpartition(".")
            definition = self.p.method(owner, name)
            if definition is None and name == "apply":
                definition = self.p.method(owner, "forward")  # torch.autograd.Function.apply runs forward
            return (definition, self.p.owner_class(definition)) if definition is not None else None
        if target.startswith("<selfattr>") and cls is not None:
            definition = self.p.method(cls, target[len("<selfattr>") :])
            return (definition, self.p.owner_class(definition)) if definition is not None else None
        if target.startswith("<lambda>"):
            lam = self.p.lambdas.get(target[len("<lambda>") :])
            return (lam, cls) if lam is not None else None
        return None

    def _scan(
        self, root: tree_sitter.Node, cls: str | None, seeds: frozenset[str]
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        """Apply the reach rules to one function, lambda or expression; return the callees it reaches."""
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        taint = self._local_taint(root, seeds) if root.type in ("function_definition", "lambda") else seeds
        self._identity_names = self._identity_keys(root)

        def prune(node: tree_sitter.Node) -> bool:
            return node.type == "function_definition" and self.p._is_jit(node)

        for node, is_ref in self.p._walk_roles(root, prune):
            kind = node.type
            if is_ref:
                out.extend(self._reference_in_reach(node, cls))
            if kind == "call":
                out.extend(self._call_in_reach(node, cls, taint))
            elif kind == "binary_operator":
                op = _text(_field(node, "operator"))
                if op in _ARITH_OPS and (
                    self._is_tensor(_field(node, "left"), taint) or self._is_tensor(_field(node, "right"), taint)
                ):
                    self._operator(node, op)
            elif kind == "comparison_operator":
                ops = [_text(c) for c in node.children_by_field_name("operators")]
                if any(op in _COMPARE_OPS for op in ops) and any(
                    self._is_tensor(c, taint) for c in node.named_children
                ):
                    self._operator(node, next(op for op in ops if op in _COMPARE_OPS))
            elif kind == "unary_operator":
                op = _text(_field(node, "operator"))
                if op in ("-", "~") and self._is_tensor(_field(node, "argument"), taint):
                    self._operator(node, op)
            elif kind == "augmented_assignment":
                op = _text(_field(node, "operator"))
                if self._is_tensor(_field(node, "left"), taint) or self._is_tensor(_field(node, "right"), taint):
                    self._operator(node, op)
            elif kind == "identifier" and is_ref and _text(node) in self._identity_names:
                self._data_ptr_use(node)
            elif kind == "try_statement":
                self.add(
                    "try-except-fallback",
                    node,
                    "try/except in forward (or code it reaches) hides a fallback "
                    "path; remove it and let errors surface: the kernel must always run.",
                )
            elif kind == "with_item":
                value = _field(node, "value")
                inner = value.named_children[0] if value is not None and value.type == "as_pattern" else value
                if (
                    inner is not None
                    and inner.type == "call"
                    and "contextlib.suppress" in self.p.resolve(_field(inner, "function"))
                ):
                    self.add(
                        "try-except-fallback",
                        node,
                        "contextlib.suppress in forward hides a fallback path; remove it and let errors surface.",
                    )
        return out

    def _operator(self, node: tree_sitter.Node, op: str) -> None:
        self.add(
            "torch-compute-in-forward",
            node,
            f"the Python operator `{op}` on tensors in forward runs a PyTorch "
            "op; fuse this arithmetic into your kernel.",
        )

    def _reference_in_reach(
        self, node: tree_sitter.Node, cls: str | None
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        text = _text(node)
        for target in self.p.resolve(node):
            if not target.startswith("<"):
                if _rule_for_name(target) is None and _compute_name(target):
                    shown = f"`{text}`" if text == target else f"`{text}` (`{target}`)"
                    if target.startswith("numpy."):
                        message = f"{shown} computes with NumPy in forward; compute it in your kernel."
                    else:
                        message = (
                            f"{shown} in forward runs a PyTorch op; compute it in your kernel (forward may "
                            "only allocate outputs, e.g. torch.empty_like, reshape/view and call the kernel)."
                        )
                    self.add("torch-compute-in-forward", node, message)
                elif target.startswith("torch.ops."):
                    self.kernel_uses += 1
                continue
            if target.startswith(("<ext>.", "<jit>")):
                self.kernel_uses += 1
            elif target.startswith(("<class>", "<inst>")):
                owner = target.split(">", 1)[1]
                for name in ("__init__",) + _ENTRY_METHODS if target.startswith("<class>") else _ENTRY_METHODS:
                    definition = self.p.method(owner, name)
                    if definition is not None:
                        out.append((definition, self.p.owner_class(definition), frozenset()))
            else:
                callee = self._callee(target, cls)
                if callee is not None:
                    out.append((callee[0], callee[1], frozenset()))
        return out

    def _call_in_reach(
        self, node: tree_sitter.Node, cls: str | None, taint: frozenset[str]
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        function = _field(node, "function")
        args = _field(node, "arguments")
        arg_nodes = args.named_children if args is not None else []
        if function is None:
            return out
        if function.type == "subscript":
            self.kernel_uses += 1
            return out
        targets = self.p.resolve(function)
        known = bool(targets - {t for t in targets if t.startswith("<selfattr>")})
        for target in targets:
            if (
                target.startswith("<xinst>torch.nn.")
                or target.startswith("<xattr>torch.nn.")
                and target.endswith((".forward", ".__call__", "._call_impl"))
            ):
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"calling the PyTorch module `{_text(function)}` in "
                    "forward runs PyTorch's kernel; pass its parameters (e.g. self.linear.weight, "
                    "self.linear.bias) to your own kernel instead.",
                )
            elif target in ("builtins.id", "builtins.hash"):
                self.add(
                    "output-cache",
                    node,
                    f"`{_text(function)}()` in forward suggests caching outputs by object "
                    "identity; compute the output from the inputs on every call.",
                )
            elif target in (
                "builtins.abs",
                "builtins.sum",
                "builtins.max",
                "builtins.min",
                "builtins.pow",
                "builtins.round",
                "builtins.divmod",
            ) or (target.startswith("operator.") and target not in _OPERATOR_NON_COMPUTE):
                if not any(self._is_tensor(a, taint) for a in _walk_args(arg_nodes)):
                    continue
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"`{_text(function)}()` on a tensor runs a PyTorch op; compute it in your kernel.",
                )
            elif target == "builtins.getattr":
                positional = [a for a in arg_nodes if a.type != "keyword_argument"]
                name = self.p.const_str(positional[1]) if len(positional) > 1 else None
                receiver = positional[0] if positional else None
                if (
                    receiver is not None
                    and _text(receiver) not in ("self", "cls")
                    and not any(t == "<ext>" or t.startswith(("<class>", "<inst>")) for t in self.p.resolve(receiver))
                ):
                    if name is None:
                        self.add("dynamic-code", node, _message("dynamic-code", _text(node)))
                    elif _method_computes(name):
                        self.add(
                            "torch-compute-in-forward",
                            node,
                            f"`{_text(node)}` looks up the tensor method "
                            f"`{name}`, which runs a PyTorch op; compute it in your kernel.",
                        )
            callee = self._callee(target, cls)
            if callee is not None:
                out.append((callee[0], callee[1], self._argument_taint(callee[0], arg_nodes, taint)))
        if function.type == "attribute":
            self._method_call(node, function, targets, known, taint)
        elif function.type == "identifier" and not known:
            self.kernel_uses += 1
        if function.type == "attribute" and _text(_field(function, "attribute")) == "data_ptr":
            self._data_ptr_use(node)
        return out

    def _method_call(
        self,
        node: tree_sitter.Node,
        function: tree_sitter.Node,
        targets: frozenset[str],
        known: bool,
        taint: frozenset[str],
    ) -> None:
        method = _text(_field(function, "attribute"))
        receiver = _field(function, "object")
        if receiver is None:
            return
        receiver_targets = {t for t in self.p.resolve(receiver) if not t.startswith("<selfattr>")}
        if _text(receiver) in ("self", "cls") or receiver.type in _LITERALS:
            return
        if receiver_targets and all(
            not t.startswith("<xinst>")
            and (
                not t.startswith("<")
                or t == "<ext>"
                or t.startswith(("<class>", "<inst>", "<func>", "<jit>", "<lambda>", "<ext>", "<method>"))
            )
            for t in receiver_targets
        ):
            if "<ext>" in receiver_targets:
                self.kernel_uses += 1
            return
        if _method_computes(method):
            if self._is_tensor(receiver, taint) or method not in self.p.ext_entry_names:
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"`.{method}()` on a tensor runs a PyTorch op; do this computation inside your kernel.",
                )
            else:
                self.kernel_uses += 1
        elif method not in _TENSOR_RETURNING and method not in _META_METHODS and not known:
            self.kernel_uses += 1

    def _argument_taint(
        self, callee: tree_sitter.Node, args: list[tree_sitter.Node], taint: frozenset[str]
    ) -> frozenset[str]:
        params = (
            [name for name, _ in self._parameters(callee)]
            if callee.type == "function_definition"
            else [
                _text(c)
                for c in (_field(callee, "parameters").named_children if _field(callee, "parameters") else [])
                if c.type == "identifier"
            ]
        )
        found: set[str] = set()
        positional = 0
        for arg in args:
            if arg.type == "keyword_argument":
                if self._is_tensor(_field(arg, "value"), taint):
                    found.add(_text(_field(arg, "name")))
            elif arg.type == "list_splat":
                continue
            else:
                if positional < len(params) and self._is_tensor(arg, taint):
                    found.add(params[positional])
                positional += 1
        return frozenset(found)

    def _identity_keys(self, root: tree_sitter.Node) -> set[str]:
        """Local names assigned from ``x.data_ptr()`` or ``id(x)`` (candidate cache keys)."""
        names: set[str] = set()
        for node in _walk(root):
            if node.type != "assignment":
                continue
            left, right = _field(node, "left"), _field(node, "right")
            if left is None or right is None or left.type != "identifier" or right.type != "call":
                continue
            function = _field(right, "function")
            if function is None:
                continue
            if (function.type == "attribute" and _text(_field(function, "attribute")) == "data_ptr") or (
                self.p.resolve(function) & {"builtins.id", "builtins.hash"}
            ):
                names.add(_text(left))
        return names

    def _data_ptr_use(self, node: tree_sitter.Node) -> None:
        """Flag ``data_ptr()``/``id()`` values used as keys, compared, or kept on ``self``."""
        parent = node.parent
        child = node
        while parent is not None and parent.type in ("tuple", "expression_list", "parenthesized_expression"):
            child, parent = parent, parent.parent
        if parent is not None and _is_key_position(parent, child):
            self.add(
                "output-cache",
                node,
                "`data_ptr()`/`id()` used as a cache key or stored across calls suggests "
                "caching outputs; compute the output from the inputs on every call.",
            )


def _is_key_position(parent: tree_sitter.Node, child: tree_sitter.Node) -> bool:
    """Whether ``child`` is used as a key: an index, a dict key, compared, a cache-method argument, or stored."""
    if parent.type in ("comparison_operator", "pair"):
        return True
    if parent.type == "subscript":
        return _field(parent, "subscript") is not None and _field(parent, "value") != child
    if parent.type == "argument_list" and parent.parent is not None:
        function = _field(parent.parent, "function")
        return (
            function is not None
            and function.type == "attribute"
            and _text(_field(function, "attribute")) in _CACHE_METHODS
        )
    if parent.type == "assignment":
        left = _field(parent, "left")
        return left is not None and _text(left).startswith(("self.", "cls."))
    return False


def _method_computes(method: str) -> bool:
    if method.startswith("__"):
        return method in _COMPUTE_METHODS
    return method in _COMPUTE_METHODS or method.rstrip("_") in _COMPUTE_METHODS


def _walk_args(args: Iterable[tree_sitter.Node]) -> Iterator[tree_sitter.Node]:
    """Argument values, with keyword values and list/tuple elements flattened."""
    stack = list(args)
    while stack:
        node = stack.pop()
        if node.type == "keyword_argument":
            value = _field(node, "value")
            if value is not None:
                stack.append(value)
        elif node.type in ("list", "tuple", "parenthesized_expression"):
            stack.extend(node.named_children)
        else:
            yield node


# --------------------------------------------------------------------------------------------
# Native sources inside the Python program
# --------------------------------------------------------------------------------------------


class _SourceFinder:
    """Finds C++/CUDA text: ``load_inline`` source arguments first, then C++-looking string literals."""

    def __init__(self, program: _PyProgram) -> None:
        self.p = program
        self.consumed: set[tuple[int, int, str]] = set()

    def find(self) -> list[NativeSource]:
        found: list[NativeSource] = []
        for call in self.p.loader_calls():
            args = _field(call, "arguments")
            if args is None:
                continue
            positional = [a for a in args.named_children if a.type not in ("keyword_argument", "comment")]
            for index, arg in enumerate(positional[1:3], start=1):
                found.extend(self._sources(arg, "cpp" if index == 1 else "cuda"))
            for arg in args.named_children:
                if arg.type == "keyword_argument":
                    name = _text(_field(arg, "name"))
                    if name.endswith("_sources") or name == "sources":
                        language = "cpp" if name == "cpp_sources" else "cuda"
                        found.extend(self._sources(_field(arg, "value"), language))
        for node, _ in self.p.nodes:
            if node.type not in ("string", "concatenated_string") or _key(node) in self.consumed:
                continue
            if _key(node) in self.p.docstrings or (
                node.parent is not None and node.parent.type == "concatenated_string"
            ):
                continue
            pieces = node.named_children if node.type == "concatenated_string" else [node]
            part = _join_lines(_string_lines(c, self.p.source) for c in pieces if c.type == "string")
            text = "\n".join(t for t, _ in part)
            if _CPP_HINT.search(text):
                self.consumed.update(_key(c) for c in [node, *pieces])
                found.append(self._native(part, "cuda" if _CUDA_HINT.search(text) else "cpp"))
        unique: dict[tuple[str, str, int], NativeSource] = {}
        for source in found:
            unique.setdefault((source.language, source.text, source.line), source)
        return sorted(unique.values(), key=lambda s: (s.line, s.language))

    def _sources(self, node: tree_sitter.Node | None, language: str) -> list[NativeSource]:
        if node is None:
            return []
        out = []
        for part in self._fragments(node, 0):
            text = "\n".join(t for t, _ in part)
            if text.strip():
                out.append(self._native(part, "cuda" if language == "cuda" or _CUDA_HINT.search(text) else "cpp"))
        return out

    @staticmethod
    def _native(part: _Lines, language: str) -> NativeSource:
        rows = tuple(row + 1 for _, row in part)
        return NativeSource(language, "\n".join(t for t, _ in part), rows[0] if rows else 1, rows)

    def _fragments(self, node: tree_sitter.Node | None, depth: int) -> list[_Lines]:
        """Decoded string values an expression may build (each element one source text)."""
        if node is None or depth > 8:
            return []
        kind = node.type
        if kind == "string":
            self.consumed.add(_key(node))
            return [_string_lines(node, self.p.source)]
        if kind == "concatenated_string":
            self.consumed.add(_key(node))
            for child in node.named_children:
                self.consumed.add(_key(child))
            return [_join_lines(_string_lines(c, self.p.source) for c in node.named_children if c.type == "string")]
        if kind == "parenthesized_expression" and node.named_children:
            return self._fragments(node.named_children[0], depth + 1)
        if kind == "binary_operator" and _text(_field(node, "operator")) == "+":
            left = self._fragments(_field(node, "left"), depth + 1)
            right = self._fragments(_field(node, "right"), depth + 1)
            if len(left) == 1 and len(right) == 1:
                return [_join_lines([left[0], right[0]])]
            return left + right
        if kind in ("list", "tuple", "expression_list"):
            return [f for child in node.named_children for f in self._fragments(child, depth + 1)]
        if kind == "identifier":
            name = _text(node)
            return [f for key, value in self.p.assignments if key == name for f in self._fragments(value, depth + 1)]
        if kind == "call":
            function = _field(node, "function")
            args = _field(node, "arguments")
            positional = [a for a in args.named_children if a.type != "keyword_argument"] if args is not None else []
            is_module_function = any(not t.startswith("<") for t in self.p.resolve(_field(function, "object")))
            if function is not None and function.type == "attribute" and not is_module_function:
                receiver = self._fragments(_field(function, "object"), depth + 1)
                if _text(_field(function, "attribute")) == "join" and positional:
                    items = self._fragments(positional[0], depth + 1)
                    if len(receiver) == 1:
                        separator = receiver[0]
                        joined: list[_Lines] = []
                        for item in items:
                            joined.extend([separator, item] if joined else [item])
                        return [_join_lines(joined)] if joined else []
                    return items
                return receiver
            if positional:
                return self._fragments(positional[0], depth + 1)
        return []


def native_sources(code: str) -> list[NativeSource]:
    """Return the C++/CUDA sources of a candidate program.

    Sources passed to ``load_inline`` (``cpp_sources=``/``cuda_sources=``, directly,
    through variables, lists, ``+``, ``join`` or ``textwrap.dedent``) come first in
    meaning; any other string literal that looks like C++/CUDA (``#include``,
    ``__global__``, ``torch::``, ``TORCH_CHECK``, ...) is returned too. Docstrings
    are not sources.

    Args:
        code: the candidate program.

    Returns:
        The sources in program order, each with its line mapping.

    Example:
        >>> src = "cpp = '''\\n#include <torch/extension.h>\\nint f() { return 1; }\\n'''\\n"
        >>> [(s.language, s.line, s.code_line(2)) for s in native_sources(src)]
        [('cpp', 1, 3)]
    """
    return _SourceFinder(_PyProgram(code)).find()


# --------------------------------------------------------------------------------------------
# C++/CUDA rules
# --------------------------------------------------------------------------------------------

_CPP_TORCH_ALLOWED = _words("""
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob TensorOptions Tensor
    Scalar ScalarType IntArrayRef Device DeviceType Layout MemoryFormat dtype device layout requires_grad
    memory_format pinned_memory optional nullopt irange parallel_for parallel_reduce get_num_threads get_thread_num
    in_parallel_region getCurrentCUDAStream getDefaultCUDAStream getCurrentMUSAStream getDefaultMUSAStream
    CUDAGuard OptionalCUDAGuard DeviceGuard OptionalDeviceGuard CUDAStreamGuard getCurrentDeviceProperties
    getDeviceProperties current_device device_count NoGradGuard InferenceMode AutoGradMode checkDim checkSize
    checkContiguous checkAllSameGPU checkSameType checkDeviceType checkScalarType CheckedFrom TensorArg toString
    elementSize typeMetaToScalarType isFloatingType isIntegralType ArrayRef TensorAccessor PackedTensorAccessor
    PackedTensorAccessor32 PackedTensorAccessor64 RestrictPtrTraits DefaultPtrTraits Float Double Int Long Short
    Char Byte Bool ComplexFloat ComplexDouble Undefined numel is_available
    """)
_CPP_ALLOWED_NAMESPACES = ("at::vec::", "torch::indexing::", "at::indexing::", "torch::stable::", "at::cuda::detail::")
_CPP_NAME_RULES: dict[str, str] = {
    **dict.fromkeys(
        (
            "fork",
            "vfork",
            "system",
            "popen",
            "execl",
            "execle",
            "execlp",
            "execv",
            "execve",
            "execvp",
            "execvpe",
            "posix_spawn",
            "posix_spawnp",
            "pthread_create",
            "std::thread",
            "std::jthread",
            "std::async",
            "thrd_create",
            "clone3",
            "kill",
        ),
        "native-process",
    ),
    **dict.fromkeys(
        (
            "fopen",
            "fopen64",
            "freopen",
            "open",
            "open64",
            "openat",
            "creat",
            "mmap",
            "mmap64",
            "shm_open",
            "fdopen",
            "unlink",
            "remove",
            "rename",
            "opendir",
            "readlink",
            "std::ifstream",
            "std::ofstream",
            "std::fstream",
            "std::filebuf",
            "std::filesystem",
            "memfd_create",
            "fread",
            "fwrite",
        ),
        "native-file",
    ),
    **dict.fromkeys(
        (
            "cudaStreamCreate",
            "cudaStreamCreateWithFlags",
            "cudaStreamCreateWithPriority",
            "getStreamFromPool",
            "getStreamFromExternal",
            "setCurrentCUDAStream",
            "cudaStreamPerThread",
            "musaStreamCreate",
            "musaStreamCreateWithFlags",
            "setCurrentMUSAStream",
            "cudaStreamBeginCapture",
            "cudaGraphLaunch",
            "cuStreamCreate",
            "hipStreamCreate",
        ),
        "native-stream",
    ),
    **dict.fromkeys(
        (
            "cudaEventElapsedTime",
            "cuEventElapsedTime",
            "musaEventElapsedTime",
            "dlsym",
            "dlopen",
            "dlvsym",
            "RTLD_NEXT",
            "LD_PRELOAD",
            "cudaEventQuery",
            "cudaGetDriverEntryPoint",
            "cuGetProcAddress",
        ),
        "native-timer-patch",
    ),
    **dict.fromkeys(
        (
            "cudaStreamAttrValue",
            "accessPolicyWindow",
            "cudaAccessPropertyPersisting",
            "cudaLimitPersistingL2CacheSize",
            "cudaStreamAttributeAccessPolicyWindow",
            "cudaAccessPolicyWindow",
            "cudaStreamSetAttribute",
            "cudaKernelNodeAttributeAccessPolicyWindow",
            "cudaLaunchAttributeAccessPolicyWindow",
            "musaLimitPersistingL2CacheSize",
            "hitRatio",
            "hitProp",
        ),
        "l2-persist",
    ),
    **dict.fromkeys(
        (
            "omp_set_num_threads",
            "omp_set_dynamic",
            "omp_set_max_active_levels",
            "set_num_threads",
            "set_num_interop_threads",
            "mkl_set_num_threads",
            "openblas_set_num_threads",
            "setenv",
            "putenv",
            "unsetenv",
            "globalContext",
            "manual_seed",
            "cudaDeviceSetLimit",
            "cudaDeviceSetCacheConfig",
            "cudaDeviceSetSharedMemConfig",
            "cudaSetDeviceFlags",
        ),
        "global-flags",
    ),
    **dict.fromkeys(
        (
            "PyImport_ImportModule",
            "PyImport_Import",
            "PyRun_SimpleString",
            "PyRun_String",
            "PyObject_Call",
            "PyObject_CallObject",
            "PyObject_CallFunction",
            "PyObject_CallMethod",
            "PyEval_EvalCode",
            "Py_CompileString",
            "py::module::import",
            "py::module_::import",
            "pybind11::module::import",
            "pybind11::module_::import",
            "py::eval",
            "py::exec",
            "pybind11::eval",
            "pybind11::exec",
            "py::globals",
            "pybind11::globals",
        ),
        "native-python-call",
    ),
    **dict.fromkeys(
        (
            "__half",
            "__half2",
            "half2",
            "__nv_bfloat16",
            "__nv_bfloat162",
            "nv_bfloat16",
            "_Float16",
            "__fp16",
            "__bf16",
            "kHalf",
            "kFloat16",
            "kBFloat16",
            "__float2half",
            "__float2half_rn",
            "__half2float",
            "__float2bfloat16",
            "__float2bfloat16_rn",
            "__bfloat162float",
            "__floats2half2_rn",
            "CUBLAS_TF32_TENSOR_OP_MATH",
            "__float_to_tf32",
            "std::float16_t",
            "std::bfloat16_t",
            "c10::Half",
            "at::Half",
            "c10::BFloat16",
            "at::BFloat16",
            "cublasSetMathMode",
        ),
        "precision-downgrade",
    ),
}
# Generic names that only count as a rule when called as free functions.
_CPP_CALL_ONLY = frozenset(
    (
        "system",
        "open",
        "open64",
        "remove",
        "rename",
        "kill",
        "unlink",
        "fork",
        "set_num_threads",
        "manual_seed",
        "fread",
        "fwrite",
        "setenv",
    )
)
_CPP_LIBRARY = re.compile(
    r"^(cublas\w*|cublasLt\w*|cudnn\w*|cblas_\w+|mkl_\w+|dnnl_\w+|cusparse\w*|cufft\w*|"
    r"cusolver\w*|LAPACKE_\w+|sgemm_|dgemm_|getCurrentCUDABlasHandle|getCurrentCUDASparseHandle)$"
)
_CPP_INCLUDE_RULES = (
    (
        re.compile(r"cublas|cudnn|mkl|cblas|dnnl|oneapi|cusparse|cufft|cusolver|lapack|openblas|ATen/native/"),
        "native-library",
    ),
    (re.compile(r"^(thread|pthread\.h|future|sys/wait\.h|spawn\.h)$"), "native-process"),
    (re.compile(r"^(fstream|sys/mman\.h|filesystem|fcntl\.h|dirent\.h|sys/shm\.h)$"), "native-file"),
    (re.compile(r"^(dlfcn\.h)$"), "native-timer-patch"),
    (re.compile(r"^(cuda_fp16\.h|cuda_bf16\.h|musa_fp16\.h|mma\.h)$"), "precision-downgrade"),
    (re.compile(r"^(Python\.h|pybind11/embed\.h|pybind11/eval\.h)$"), "native-python-call"),
)
_INTERPOSABLE = re.compile(
    r"^(cuda[A-Z]\w+|cu[A-Z]\w+|musa[A-Z]\w+|clock_gettime|gettimeofday|clock|time|"
    r"omp_get_wtime|dlsym|pthread_create)$"
)
_CUDA_BLANK = re.compile(
    r"__global__|__device__|__host__|__forceinline__|__noinline__|__shared__|__constant__|__managed__|"
    r"__restrict__|__grid_constant__|__launch_bounds__\s*\([^()]*\)"
)
_LAUNCH = re.compile(r"<<<(.*?)>>>", re.DOTALL)
_GOOD_STREAM = re.compile(
    r"^(0|0[uU]?|nullptr|NULL|cudaStreamLegacy|cudaStreamDefault|"
    r"(::)?(at|c10)::(cuda|musa)::getCurrent(CUDA|MUSA)Stream\(\s*\w*\s*\)(\.stream\(\))?|"
    r"getCurrent(CUDA|MUSA)Stream\(\s*\w*\s*\)(\.stream\(\))?)$"
)
_CPP_MESSAGES = {
    "native-torch-compute": "{name} in the C++ source runs an ATen/LibTorch op; compute it in your own loop or "
    "kernel (only allocation like torch::empty, metadata like size()/data_ptr() and device/stream helpers are "
    "allowed).",
    "native-process": "{name} starts processes or threads from C++; use OpenMP or CUDA parallelism inside the "
    "call instead.",
    "native-file": "{name} accesses files or shared memory from C++; compute every output from the inputs.",
    "native-stream": "{name} uses a non-default stream the timer does not wait for; launch on "
    "at::cuda::getCurrentCUDAStream().",
    "native-timer-patch": "{name} interposes or reads timers/symbols; remove it, the harness times the kernel.",
    "native-python-call": "{name} calls back into Python from C++; do the work in C++/CUDA.",
    "native-library": "{name} calls a vendor library (BLAS/DNN); write the computation in your own kernel.",
    "l2-persist": "{name} sets an L2 persisting-access window, which defeats the cache flush between timed runs; "
    "remove it.",
    "global-flags": "{name} changes process-wide settings from C++ (threads, environment, device limits); leave "
    "them alone.",
    "precision-downgrade": "{name} lowers precision below the task's float32; compute and accumulate in float32.",
    "monkey-patching": "{name} re-registers ATen operators, which changes what the reference computes; "
    "expose your function with PYBIND11/functions=[...] instead.",
}
_CPP_SCALAR_METHODS = frozenset(
    (
        "size",
        "sizes",
        "numel",
        "dim",
        "stride",
        "strides",
        "data_ptr",
        "item",
        "options",
        "scalar_type",
        "dtype",
        "device",
        "is_contiguous",
        "defined",
        "element_size",
    )
)


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


class _CppRules:
    """Runs the C++/CUDA rules over one native source."""

    def __init__(
        self, source: NativeSource, findings: _Findings, half_ok: bool, depth: int = 0, row_offset: int = 0
    ) -> None:
        self.source = source
        self.findings = findings
        self.half_ok = half_ok
        self.depth = depth
        self.row_offset = row_offset
        self.tensor_names: dict[int, set[str]] = {}
        self.other_names: dict[int, set[str]] = {}
        self.scope: dict[int, int] = {}
        self.using_namespaces: set[str] = set()
        self.namespace_alias: dict[str, str] = {}
        self.using_names: dict[str, str] = {}
        self.defined_functions: set[str] = set()

    def add(self, rule: str, row: int, name: str) -> None:
        if rule == "precision-downgrade" and self.half_ok:
            return
        line = self.source.code_line(row + self.row_offset)
        self.findings.add(rule, line, _CPP_MESSAGES[rule].format(name=f"`{name}`"), "cpp")

    def run(self) -> None:
        text = self.source.text
        if len(text) > 2_000_000:
            return
        if self.source.language == "cuda" or _CUDA_HINT.search(text):
            for match in _LAUNCH.finditer(text):
                parts = _split_top_level(match.group(1))
                if len(parts) >= 4 and not self._default_stream(parts[3].strip(), text):
                    self.add("native-stream", text.count("\n", 0, match.start()), f"<<<..., {parts[3].strip()}>>>")
            text = _blank(_blank(text, _LAUNCH), _CUDA_BLANK)
        root = _parser("cpp").parse(text.encode("utf-8", "replace")).root_node
        nodes = self._scoped_nodes(root)
        self._declarations(nodes)
        for node in nodes:
            self._check(node)

    def _scoped_nodes(self, root: tree_sitter.Node) -> list[tree_sitter.Node]:
        """All nodes; records for each the function definition it is in (``-1``: file scope)."""
        nodes: list[tree_sitter.Node] = []
        stack: list[tuple[tree_sitter.Node, int]] = [(root, -1)]
        while stack:
            node, scope = stack.pop()
            if node.type == "function_definition":
                scope = node.start_byte
            nodes.append(node)
            self.scope[node.id] = scope
            stack.extend((child, scope) for child in reversed(node.children))
        return nodes

    def _declared(self, name: str, node: tree_sitter.Node) -> str | None:
        """``"tensor"``, ``"other"`` or ``None`` (undeclared) for ``name`` as seen from ``node``."""
        for scope in (self.scope.get(node.id, -1), -1):
            if name in self.tensor_names.get(scope, ()):
                return "tensor"
            if name in self.other_names.get(scope, ()):
                return "other"
        return None

    @staticmethod
    def _default_stream(arg: str, text: str) -> bool:
        compact = re.sub(r"\s+", "", arg)
        if _GOOD_STREAM.match(compact):
            return True
        if re.fullmatch(r"\w+", compact):
            decl = re.search(rf"\b{re.escape(compact)}\s*=\s*([^;]*);", text)
            return (
                decl is not None
                and re.search(r"getCurrent(CUDA|MUSA)Stream|getDefault(CUDA|MUSA)Stream", decl.group(1)) is not None
            )
        return False

    # -- declarations (which names hold tensors) ----------------------------------------------

    def _declarations(self, nodes: list[tree_sitter.Node]) -> None:
        decls: list[tuple[str, tree_sitter.Node | None, str, int]] = []
        for node in nodes:
            kind = node.type
            scope = self.scope.get(node.id, -1)
            if kind in ("declaration", "parameter_declaration", "optional_parameter_declaration", "field_declaration"):
                type_text = _text(_field(node, "type"))
                for declarator in node.children_by_field_name("declarator"):
                    name, value = _declarator_name(declarator)
                    if name:
                        decls.append((name, value, type_text, scope))
            elif kind == "for_range_loop":
                name, _ = _declarator_name(_field(node, "declarator"))
                if name:
                    decls.append((name, _field(node, "right"), "auto-element", scope))
            elif kind == "function_declarator":
                inner = _field(node, "declarator")
                if inner is not None:
                    self.defined_functions.add(_text(inner).split("::")[-1])
            elif kind == "using_declaration":
                self._using(node)
            elif kind == "namespace_alias_definition":
                name = _field(node, "name")
                target = [c for c in node.named_children if c.id != (name.id if name else -1)]
                if name is not None and target:
                    self.namespace_alias[_text(name)] = re.sub(r"\s+", "", _text(target[-1])).lstrip(":")
        for _ in range(3):
            for name, value, type_text, scope in decls:
                tensors = self.tensor_names.setdefault(scope, set())
                others = self.other_names.setdefault(scope, set())
                if re.search(r"\bTensor\b", type_text):
                    tensors.add(name)
                elif type_text in ("auto", "auto-element", "decltype(auto)") or type_text.startswith("const auto"):
                    if value is not None and self._is_tensor(value):
                        tensors.add(name)
                    elif value is not None:
                        others.add(name)
                else:
                    others.add(name)
        for scope, others in self.other_names.items():
            others -= self.tensor_names.get(scope, set())

    def _using(self, node: tree_sitter.Node) -> None:
        text = re.sub(r"\s+", " ", _text(node)).strip().rstrip(";")
        if text.startswith("using namespace "):
            self.using_namespaces.add(self._qualify(text[len("using namespace ") :].replace(" ", "")).split("::")[0])
        elif text.startswith("using "):
            target = self._qualify(text[len("using ") :].replace(" ", ""))
            if "::" in target:
                self.using_names[target.rsplit("::", 1)[-1]] = target

    def _qualify(self, name: str) -> str:
        """Normalize a qualified name: no spaces/templates/leading ``::``, namespace aliases expanded."""
        name = re.sub(r"\s+", "", name)
        for _ in range(5):
            stripped = re.sub(r"<[^<>]*>", "", name)
            if stripped == name:
                break
            name = stripped
        name = name.lstrip(":")
        head, sep, rest = name.partition("::")
        if head in self.namespace_alias:
            name = self.namespace_alias[head] + (sep + rest if sep else "")
        return name

    def _is_tensor(self, node: tree_sitter.Node | None, depth: int = 0) -> bool:
        if node is None or depth > 25:
            return False
        kind = node.type
        if kind == "identifier":
            return self._declared(_text(node), node) == "tensor"
        if kind in ("parenthesized_expression", "unary_expression", "pointer_expression") and node.named_children:
            return self._is_tensor(node.named_children[-1], depth + 1)
        if kind == "subscript_expression":
            return self._is_tensor(_field(node, "argument"), depth + 1)
        if kind == "conditional_expression":
            return self._is_tensor(_field(node, "consequence"), depth + 1) or self._is_tensor(
                _field(node, "alternative"), depth + 1
            )
        if kind == "binary_expression":
            return self._is_tensor(_field(node, "left"), depth + 1) or self._is_tensor(_field(node, "right"), depth + 1)
        if kind == "call_expression":
            function = _field(node, "function")
            if function is None:
                return False
            if function.type in ("qualified_identifier", "template_function"):
                name = self._qualify(_text(function))
                if name.split("::")[0] in ("torch", "at"):
                    last = name.rsplit("::", 1)[-1]
                    return (
                        last
                        in (
                            "empty",
                            "empty_like",
                            "empty_strided",
                            "zeros",
                            "zeros_like",
                            "ones",
                            "ones_like",
                            "full",
                            "full_like",
                            "from_blob",
                        )
                        or last not in _CPP_TORCH_ALLOWED
                    )
            if function.type == "field_expression":
                method = _method_name(function)
                if method in _TENSOR_RETURNING or _method_computes(method):
                    return self._is_tensor(_field(function, "argument"), depth + 1)
        return False

    # -- rules -----------------------------------------------------------------------------

    def _check(self, node: tree_sitter.Node) -> None:
        kind = node.type
        row = node.start_point.row
        if (
            kind in ("identifier", "type_identifier", "field_identifier", "namespace_identifier", "primitive_type")
            and node.child_count == 0
        ):
            self._name(node, _text(node))
        elif kind == "qualified_identifier" and (node.parent is None or node.parent.type != "qualified_identifier"):
            self._qualified(node)
        elif kind == "call_expression":
            self._call(node)
        elif (
            kind in ("string_literal", "raw_string_literal", "system_lib_string")
            and node.parent is not None
            and node.parent.type != "preproc_include"
        ):
            value = _text(node)
            for marker, rule in (
                ("/dev/shm", "native-file"),
                ("/proc/", "native-file"),
                ("LD_PRELOAD", "native-timer-patch"),
            ):
                if marker in value:
                    self.add(rule, row, marker)
        elif kind == "preproc_include":
            path = _text(_field(node, "path")).strip('<>"')
            for pattern, rule in _CPP_INCLUDE_RULES:
                if pattern.search(path):
                    self.add(rule, row, f"#include <{path}>")
                    break
        elif kind in ("preproc_def", "preproc_function_def"):
            self._macro(node)
        elif kind == "function_definition":
            self._function_definition(node)
        elif kind == "binary_expression":
            op = _text(_field(node, "operator"))
            if op in _ARITH_OPS | _COMPARE_OPS and (
                self._is_tensor(_field(node, "left")) or self._is_tensor(_field(node, "right"))
            ):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind == "assignment_expression":
            op = _text(_field(node, "operator"))
            if op != "=" and self._is_tensor(_field(node, "left")):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind == "unary_expression":
            op = _text(_field(node, "operator"))
            if op in ("-", "~", "!") and self._is_tensor(_field(node, "argument")):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind in ("attribute_specifier", "attribute_declaration") and "constructor" in _text(node):
            self.add("native-timer-patch", row, "__attribute__((constructor))")

    def _name(self, node: tree_sitter.Node, name: str) -> None:
        rule = _CPP_NAME_RULES.get(name)
        if rule is not None and name in _CPP_CALL_ONLY:
            rule = rule if _is_called(node) else None
        if (
            rule is None
            and name in ("half", "half2", "bfloat16", "nv_bfloat16")
            and node.type == "type_identifier"
            and not any(name in names for names in (*self.other_names.values(), *self.tensor_names.values()))
        ):
            rule = "precision-downgrade"
        if rule is None and name == "tf32" and node.parent is not None and "precision" in _text(node.parent):
            rule = "precision-downgrade"
        if rule is None and _CPP_LIBRARY.match(name):
            rule = "native-library"
        if rule is not None:
            self.add(rule, node.start_point.row, name)

    def _qualified(self, node: tree_sitter.Node) -> None:
        name = self._qualify(_text(node))
        row = node.start_point.row
        rule = _CPP_NAME_RULES.get(name)
        if rule is None and name.startswith("std::filesystem"):
            rule = "native-file"
        if rule is not None:
            self.add(rule, row, name)
            return
        root = name.split("::")[0]
        last = name.rsplit("::", 1)[-1]
        if root not in ("torch", "at") or name.startswith(_CPP_ALLOWED_NAMESPACES):
            return
        final = node
        while final.type == "qualified_identifier" and _field(final, "name") is not None:
            final = _field(final, "name")
        if "::nn::" in name or "::jit::" in name or "::native::" in name or "::autograd::" in name:
            if last not in _CPP_TORCH_ALLOWED:
                self.add("native-torch-compute", row, name)
            return
        if final.type in ("type_identifier", "template_type"):
            return
        if last in _CPP_NAME_RULES:
            self.add(_CPP_NAME_RULES[last], row, name)
        elif last in _CPP_TORCH_ALLOWED or re.fullmatch(r"k[A-Z]\w*", last):
            return
        else:
            self.add("native-torch-compute", row, name)

    def _call(self, node: tree_sitter.Node) -> None:
        function = _field(node, "function")
        if function is None:
            return
        row = node.start_point.row
        if function.type == "identifier":
            name = _text(function)
            target = self.using_names.get(name)
            if target is not None and target.split("::")[0] in ("torch", "at"):
                if name not in _CPP_TORCH_ALLOWED:
                    self.add("native-torch-compute", row, target)
            elif (
                self.using_namespaces & {"torch", "at"}
                and _method_computes(name)
                and name not in self.defined_functions
                and any(self._is_tensor(a) for a in _cpp_arguments(node))
            ):
                self.add("native-torch-compute", row, f"{name} (via using namespace)")
        elif function.type == "field_expression":
            method = _method_name(function)
            receiver = _field(function, "argument")
            if (_method_computes(method) or method == "forward") and receiver is not None:
                receiver_name = _text(receiver) if receiver.type == "identifier" else None
                declared = self._declared(receiver_name, receiver) if receiver_name is not None else "other"
                called = receiver.type == "call_expression" and not self._non_tensor_call(receiver)
                if self._is_tensor(receiver) or declared != "other" or called:
                    self.add("native-torch-compute", row, f".{method}()")

    def _non_tensor_call(self, node: tree_sitter.Node) -> bool:
        function = _field(node, "function")
        if function is None:
            return True
        if function.type == "field_expression":
            return _method_name(function) in _CPP_SCALAR_METHODS or not self._is_tensor(node)
        return not self._is_tensor(node)

    def _macro(self, node: tree_sitter.Node) -> None:
        value = _field(node, "value")
        body = _text(value)
        row = node.start_point.row
        if "##" in body and re.search(r"\b(torch|at)\s*::", body):
            self.add("native-torch-compute", row, "token pasting with torch::/at:: names")
        if self.depth == 0 and body.strip() and value is not None:
            nested = NativeSource(
                self.source.language,
                "void __kg_macro() { " + body.replace("\\\n", "  \n") + "; }",
                self.source.line,
                self.source.lines,
            )
            rules = _CppRules(
                nested, self.findings, self.half_ok, self.depth + 1, value.start_point.row + self.row_offset
            )
            rules.tensor_names = {-1: set().union(*self.tensor_names.values())}
            rules.run()

    def _function_definition(self, node: tree_sitter.Node) -> None:
        declarator = _field(node, "declarator")
        while (
            declarator is not None
            and declarator.type not in ("function_declarator",)
            and _field(declarator, "declarator") is not None
        ):
            declarator = _field(declarator, "declarator")
        if declarator is None:
            return
        name_node = _field(declarator, "declarator")
        name = self._qualify(_text(name_node)) if name_node is not None else ""
        row = node.start_point.row
        if name in ("TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT", "TORCH_LIBRARY"):
            params = _field(declarator, "parameters")
            first = params.named_children[0] if params is not None and params.named_children else None
            if first is not None and _text(first).strip() in ("aten", "prims", "_", "c10d"):
                self.add("monkey-patching", row, f"{name}({_text(first).strip()}, ...)")
        elif _INTERPOSABLE.match(name.rsplit("::", 1)[-1]):
            self.add("native-timer-patch", row, f"a definition of {name}()")


def _cpp_arguments(call: tree_sitter.Node) -> list[tree_sitter.Node]:
    arguments = _field(call, "arguments")
    return list(arguments.named_children) if arguments is not None else []


def _split_top_level(text: str) -> list[str]:
    """Split a launch configuration on commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _declarator_name(node: tree_sitter.Node | None) -> tuple[str, tree_sitter.Node | None]:
    """Declared name and initial value of a C++ declarator (``""`` when none)."""
    value = None
    for _ in range(10):
        if node is None:
            return "", value
        if node.type == "init_declarator":
            value = _field(node, "value")
            if value is not None and value.type in ("argument_list", "initializer_list") and value.named_children:
                value = value.named_children[0] if len(value.named_children) == 1 else None
        if node.type in ("identifier", "field_identifier"):
            return _text(node), value
        inner = _field(node, "declarator")
        if inner is None:
            named = [c for c in node.named_children if c.type in ("identifier", "field_identifier")]
            return (_text(named[0]), value) if named else ("", value)
        node = inner
    return "", value


def _method_name(field_expression: tree_sitter.Node) -> str:
    field = _field(field_expression, "field")
    if field is None:
        return ""
    if field.type == "template_method":
        inner = _field(field, "name")
        return _text(inner) if inner is not None else _text(field).split("<")[0]
    return _text(field)


def _is_called(node: tree_sitter.Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in ("qualified_identifier", "template_function"):
        node, parent = parent, parent.parent
    return parent is not None and parent.type == "call_expression" and _field(parent, "function") == node


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

_HALF_IN_REFERENCE = re.compile(r"float16|bfloat16|\.half\(\)|torch\.half\b|autocast")
_PYBIND_DEF = re.compile(r"""\.def\(\s*"(\w+)""")


def inspect_program(code: str, backend: str, *, reference: str | None = None) -> tuple[Violation, ...]:
    """Return every static rule the candidate program breaks.

    Args:
        code: the extracted candidate program (see :func:`~kernelgym.verifier.extract.extract_program`).
        backend: the backend the candidate targets (``"cpp"``, ``"cuda"``, ``"triton"``, ``"musa"``).
        reference: the task's reference program; when it uses fp16/bf16 itself, reduced
            precision is not a violation.

    Returns:
        Violations sorted by line; empty when the program passes every static rule.
        Garbage input never raises: tree-sitter parses what it can.

    Example:
        >>> bad = "import torch\\nclass ModelNew(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.relu(x)\\n"
        >>> sorted({v.rule for v in inspect_program(bad, "cpp")})
        ['kernel-not-called', 'no-native-kernel', 'torch-compute-in-forward']
    """
    findings = _Findings()
    if not isinstance(code, str) or not code.strip():
        return ()
    half_ok = bool(reference and _HALF_IN_REFERENCE.search(reference))
    program = _PyProgram(code)
    finder = _SourceFinder(program)
    sources = finder.find()
    for call in program.loader_calls():
        args = _field(call, "arguments")
        for arg in args.named_children if args is not None else []:
            if arg.type == "keyword_argument" and _text(_field(arg, "name")) == "functions":
                for item in _walk_args([_field(arg, "value")] if _field(arg, "value") is not None else []):
                    name = program.const_str(item)
                    if name:
                        program.ext_entry_names.add(name)
    for source in sources:
        program.ext_entry_names.update(_PYBIND_DEF.findall(source.text))
        _CppRules(source, findings, half_ok).run()
    _PythonRules(program, backend, half_ok, finder.consumed, findings).run()
    return findings.result()
