"""Python name tables: which torch/numpy/stdlib names compute, allocate, or fall under a rule.

Holds:
    words: the whitespace-separated words of a text (compact tables).
    the tables (``COMPUTE_METHODS``, ``TORCH_ALLOWED``, ``MODULE_RULES``, ``NAME_RULES``, ...).
    rule_for_name: the rule a dotted name falls under.
    is_compute_name: whether a resolved dotted name is a compute op.
"""

from __future__ import annotations

import re


def words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (compact name tables)."""
    return frozenset(text.split())



# --------------------------------------------------------------------------------------------
# Name tables (Python)
# --------------------------------------------------------------------------------------------

# Tensor methods (also C++ Tensor methods) that compute; their in-place forms (trailing "_") too.
COMPUTE_METHODS = words("""
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
TENSOR_RETURNING = words("""
    contiguous view view_as reshape reshape_as flatten unflatten unsqueeze squeeze permute transpose t expand
    expand_as narrow select as_strided detach to cpu cuda musa xpu float double clone new_empty new_zeros new_ones
    new_full new_empty_strided zero_ fill_ resize_ copy_ chunk split unbind diagonal movedim swapaxes
    requires_grad_ pin_memory type_as
    """)

# torch names that may appear in forward (allocation, metadata, device/stream queries, dtypes).
_TORCH_ALLOWED = words("""
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
    for name in words(
        "current_device current_stream default_stream is_available device_count get_device_properties "
        "get_device_capability get_device_name synchronize device set_device is_initialized init"
    )
)

# Names that are modules: referencing them alone is not compute.
_MODULE_NAMES = words("""
    torch torch.nn torch.nn.functional torch.cuda torch.musa torch.utils torch.utils.cpp_extension torch.autograd
    torch.backends torch.library torch.ops torch.nn.init torch.version triton triton.language numpy math
    """)

_NUMPY_CONSTANTS = words(
    "numpy.float32 numpy.float64 numpy.int32 numpy.int64 numpy.int8 numpy.uint8 numpy.bool_ numpy.dtype "
    "numpy.ndarray numpy.pi numpy.e numpy.inf"
)

_HALF_NAMES = words("""
    torch.float16 torch.half torch.bfloat16 torch.float8_e4m3fn torch.float8_e5m2 torch.float8_e4m3fnuz
    torch.float8_e5m2fnuz torch.complex32 torch.chalf numpy.float16 numpy.half triton.language.float16
    triton.language.bfloat16 triton.language.float8e4nv triton.language.float8e5 triton.language.float8e4b15
    """)

ALLOWED_IMPORTS = words("""
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
    # The judge profiles the answer's calls in its process (kernelgym.verifier.kernel_share): the profiler is the harness's.
    **dict.fromkeys(("torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util"), "harness-introspection"),
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

ENV_WRITERS = frozenset(
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
BUILD_ENV = frozenset(("TORCH_CUDA_ARCH_LIST", "MAX_JOBS"))
_OS_ALLOWED = words(
    "os os.environ os.environ.get os.getenv os.path os.cpu_count os.sep os.linesep os.name os.getpid os.putenv "
    "os.unsetenv"
)

BUILTINS = words("""
    open eval exec compile __import__ globals locals vars breakpoint getattr setattr delattr id hash print len
    range isinstance issubclass super type object int float bool str list dict tuple set frozenset min max sum
    abs pow round divmod map filter zip enumerate sorted reversed any all iter next callable repr format hasattr
    staticmethod classmethod property slice memoryview bytes bytearray input help dir
    """)

ENTRY_METHODS = ("forward", "__call__", "_call_impl", "__getattr__", "__getattribute__", "_wrapped_call_impl")
HOOK_METHODS = words(
    "register_forward_hook register_forward_pre_hook register_full_backward_hook register_backward_hook "
    "register_full_backward_pre_hook register_module_forward_hook register_module_forward_pre_hook"
)
JIT_DECORATORS = words(
    "triton.jit triton.autotune triton.heuristics triton.language.jit triton.runtime.jit.jit "
    "triton.runtime.autotuner.autotune"
)
WRAPPERS = frozenset(
    (
        "functools.partial",
        "builtins.staticmethod",
        "builtins.classmethod",
        "functools.wraps",
        "functools.lru_cache",
        "functools.cache",
    )
)
LOADERS = frozenset(("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"))
ARITH_OPS = words("+ - * / // % ** @ & | ^ << >>")
COMPARE_OPS = words("< > <= >= == !=")
LIBRARY_FLAGS = re.compile(
    r"^-l(cublas|cublasLt|cudnn|mkl\w*|openblas|blas|cblas|dnnl|mkldnn|lapack\w*|cusparse|cufft)$"
)
PATH_LITERAL = re.compile(r"/dev/shm|/proc/|/sys/|\.(?:pt|pth|pkl|pickle|npy|npz|safetensors)\b")


def rule_for_name(name: str) -> str | None:
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
    if name.startswith(_PRIVATE_COMPUTE):
        return "private-torch-compute"
    if name.startswith("torch._") and not name.startswith("torch.__"):
        return "private-torch-api"
    return None


_PRIVATE_COMPUTE = ("torch._C._nn.", "torch._C._VariableFunctions.", "torch._C._fft.", "torch._C._linalg.", "torch._C._special.")
"""Private modules that hold only PyTorch's operators (``torch._C._nn.leaky_relu`` is ``F.leaky_relu``): compute, not a
way into PyTorch's state, so a preset that allows PyTorch's operators allows these too."""

_ATEN_NAMESPACES = frozenset(
    ("aten", "prims", "quantized", "_quantized", "mkldnn", "quantized_decomposed", "higher_order", "_c10d_functional")
)


def is_compute_name(name: str) -> bool:
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



INTROSPECTION_ATTRS = words(
    "f_back f_globals f_locals f_code f_builtins tb_frame gi_frame cr_frame ag_frame __globals__ __closure__ "
    "__subclasses__ __code__"
)
LITERALS = frozenset(
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
TORCH_ALLOC = words(
    "torch.empty torch.empty_like torch.empty_strided torch.zeros torch.zeros_like torch.ones torch.ones_like "
    "torch.full torch.full_like torch.as_strided torch.from_dlpack torch.utils.dlpack.from_dlpack"
)
TENSOR_CLASSES = frozenset(("torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer", "torch.Tensor"))
META_METHODS = words("""
    size dim ndimension numel nelement stride dtype device is_contiguous data_ptr element_size item is_cuda get
    append extend pop keys values items format join replace startswith endswith setdefault update copy
    register_buffer register_parameter parameters named_parameters buffers modules children train eval
    get_device storage_offset untyped_storage is_floating_point is_complex cuda_stream dim_order
    """)
SCALAR_ANNOTATIONS = frozenset(("int", "float", "bool", "str", "tuple", "list", "dict", "None"))
OPERATOR_NON_COMPUTE = frozenset(
    ("operator.attrgetter", "operator.itemgetter", "operator.methodcaller", "operator.index", "operator.length_hint")
)
CACHE_METHODS = frozenset(("get", "setdefault", "pop", "__getitem__", "__contains__", "__setitem__", "add"))


