"""What a built native extension links against, checked against an allow-list per backend.

Holds:
    ForbiddenSymbol: one symbol an extension must not import (or export), with a sentence saying why.
    FORBIDDEN_SYMBOL_RULE: the rule id such a build is judged ``illegal`` under.
    imported_symbols: the demangled undefined dynamic symbols of a shared object (``nm -D``).
    exported_symbols: the C-linkage functions and objects a shared object defines.
    symbol_entity: the qualified name a demangled symbol refers to, without templates or parameters.
    forbidden_symbols: the symbols of a list that a backend's allow-list does not admit.

Static rules read the source, which macros, ``using`` declarations and ``-D``
flags can disguise; the linker cannot be disguised. Whatever the spelling, a
call into ATen's kernels, the dispatcher, ``dlsym`` or a thread library leaves
an undefined symbol in the built shared object. An honest answer needs only
allocation, tensor metadata, error helpers, its device runtime's launch and
memory calls, pybind11, the C/C++ runtime and read-only queries (CPU counts,
clocks); the allow-lists below were built from the symbols that every honest
answer bundled with kernelgym and every legit sample in the test corpus
imports. Anything else is refused, with a sentence naming the concern when
the symbol belongs to a known one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FORBIDDEN_SYMBOL_RULE",
    "ForbiddenSymbol",
    "exported_symbols",
    "forbidden_symbols",
    "imported_symbols",
    "symbol_entity",
]

FORBIDDEN_SYMBOL_RULE = "forbidden-native-symbol"
"""Rule id of a build whose extension links against symbols outside the allow-list."""


@dataclass(frozen=True)
class ForbiddenSymbol:
    """One symbol of a built extension that its backend does not allow.

    Attributes:
        symbol: the demangled symbol as ``nm`` prints it (version suffix removed).
        concern: short name of what it gives access to (``"ATen compute"``, ``"threads"``, ...).
        advice: what is wrong with it and what to do instead (the sentence without the symbol).
    """

    symbol: str
    concern: str
    advice: str

    @property
    def sentence(self) -> str:
        """A full sentence for the feedback, naming the symbol."""
        return f"`{_short(self.symbol)}` {self.advice}."


# --------------------------------------------------------------------------------------------
# Reading symbols
# --------------------------------------------------------------------------------------------

_VERSION = re.compile(r"@{1,2}[A-Za-z_][\w.]*$")


def _nm(so_path: Path, *options: str) -> list[tuple[str, str]]:
    tool = shutil.which("nm")
    if tool is None:
        raise FileNotFoundError("the `nm` tool (GNU binutils) is needed to inspect built extensions; install binutils")
    out = subprocess.run(
        [tool, "-D", "--demangle", *options, str(so_path)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 2) if not line.startswith(" ") else line.split(None, 1)
        if len(parts) == 2:
            kind, name = parts
        elif len(parts) == 3:
            _address, kind, name = parts
        else:
            continue
        rows.append((kind, _VERSION.sub("", name.strip())))
    return rows


def imported_symbols(so_path: str | Path) -> list[str]:
    """The undefined dynamic symbols of a shared object, demangled, sorted and without version suffixes.

    Raises:
        FileNotFoundError: ``nm`` is not installed.
        subprocess.CalledProcessError: the file is not an ELF shared object.
    """
    return sorted({name for _kind, name in _nm(Path(so_path), "--undefined-only")})


def exported_symbols(so_path: str | Path) -> list[str]:
    """The C-linkage functions and objects a shared object defines (C++ names excluded)."""
    rows = _nm(Path(so_path), "--defined-only", "--no-demangle")
    return sorted({name for kind, name in rows if kind in "TDBRVWGS" and not name.startswith("_Z")})


# --------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------

_SPECIAL_PREFIX = re.compile(
    r"^(vtable for |typeinfo for |typeinfo name for |VTT for |guard variable for |construction vtable for "
    r"|TLS init function for |TLS wrapper function for |non-virtual thunk to |virtual thunk to "
    r"|covariant return thunk to |reference temporary #\d+ for |transaction clone for )"
)
_OPERATOR = re.compile(r"\boperator\s*(new\[\]|delete\[\]|<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|\(\)|\[\]|<|>)")
_OPERATOR_NAMES = {"<=>": "spaceship", "<<=": "lshift_eq", ">>=": "rshift_eq", "->*": "arrow_star", "<<": "lshift",
                   ">>": "rshift", "<=": "le", ">=": "ge", "->": "arrow", "()": "call", "[]": "index", "<": "lt",
                   ">": "gt", "new[]": "new[]", "delete[]": "delete[]"}
_INNER_TEMPLATE = re.compile(r"<[^<>]*>")
_ABI_TAG = re.compile(r"\[abi:\w+\]")


def symbol_entity(symbol: str) -> str:
    """The qualified name a demangled symbol refers to: no return type, template arguments or parameters.

    Example:
        >>> symbol_entity("float* at::TensorBase::data_ptr<float>() const")
        'at::TensorBase::data_ptr'
        >>> symbol_entity("vtable for std::bad_alloc")
        'std::bad_alloc'
        >>> symbol_entity("operator new(unsigned long)")
        'operator new'
        >>> symbol_entity("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)")
        'at::_ops::mm::call'
    """
    special = _SPECIAL_PREFIX.match(symbol.strip()) is not None
    text = _ABI_TAG.sub("", _SPECIAL_PREFIX.sub("", symbol.strip()))
    text = _OPERATOR.sub(lambda m: f"operator@{_OPERATOR_NAMES[m.group(1)]}", text)
    text = re.sub(r"\boperator (?=\w)", "operator@", text)
    previous = None
    while previous != text:
        previous, text = text, _INNER_TEMPLATE.sub("", text)
    head = text.split("(", 1)[0].strip()
    # ``typeinfo for char const*`` names a type, whose spelling may hold spaces.
    name = head.rsplit(" ", 1)[-1] if " " in head and not special else head
    return name.replace("operator@", "operator ").replace("operator lshift", "operator<<")


# --------------------------------------------------------------------------------------------
# Allow-lists
# --------------------------------------------------------------------------------------------


def _alternatives(words: str) -> str:
    return "|".join(sorted(words.split(), key=len, reverse=True))


# ATen operators an answer may reach: allocation, views, copies and metadata (the static rules allow the same).
_ALLOWED_OPS = """
    empty_memory_format empty_like empty_strided empty_names zeros zeros_like ones ones_like full full_like
    new_empty new_zeros new_ones new_full new_empty_strided contiguous view view_dtype view_as reshape reshape_as
    _reshape_alias flatten_using_ints unflatten_int unsqueeze squeeze squeeze_dim squeeze_dims permute transpose_int
    t expand expand_as narrow select_int slice_Tensor as_strided detach to_dtype_layout to_device to_dtype to_other
    _to_copy clone copy_ zero_ fill__Scalar fill__Tensor resize_ chunk split_Tensor split_with_sizes unbind_int
    diagonal movedim_int movedim_intlist swapaxes requires_grad_ pin_memory type_as item _local_scalar_dense
    size_int stride_int sym_size_int sym_stride_int sym_numel is_contiguous is_contiguous_memory_format
    """

_C_BASICS = """
    memcpy memmove memset memcmp memchr strlen strnlen strcmp strncmp strchr strrchr strstr strdup strndup strcpy
    strncpy strcat strncat strtol strtoul strtoll strtoull strtod strtof __isoc23_strtol __isoc23_strtoul
    __isoc23_strtoll __isoc23_strtoull malloc calloc realloc free posix_memalign aligned_alloc memalign abort exit
    __assert_fail __stack_chk_fail __errno_location __tls_get_addr __libc_single_threaded __gmon_start__
    _Unwind_Resume __gxx_personality_v0 __dynamic_cast
    printf fprintf vfprintf puts fputs fputc putc putchar fflush fwrite snprintf sprintf vsnprintf vsprintf
    __printf_chk __fprintf_chk __vfprintf_chk __sprintf_chk __snprintf_chk __vsnprintf_chk __vsprintf_chk
    __memcpy_chk __memmove_chk __memset_chk __strcpy_chk __strncpy_chk __strcat_chk __fdelt_chk stderr stdout
    pthread_mutex_lock pthread_mutex_unlock pthread_mutex_trylock pthread_mutex_init pthread_mutex_destroy
    pthread_once pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific pthread_self
    pthread_equal pthread_cond_wait pthread_cond_signal pthread_cond_broadcast pthread_cond_destroy
    pthread_rwlock_rdlock pthread_rwlock_wrlock pthread_rwlock_unlock qsort bsearch abs labs llabs div ldiv
    sysconf get_nprocs get_nprocs_conf sched_getaffinity sched_getcpu __sched_cpucount
    clock_gettime clock_getres gettimeofday time clock times getrusage
    __cxa_atexit __cxa_finalize __cxa_allocate_exception __cxa_free_exception __cxa_throw __cxa_rethrow
    __cxa_begin_catch __cxa_end_catch __cxa_get_exception_ptr __cxa_current_exception_type __cxa_demangle
    __cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_pure_virtual __cxa_deleted_virtual
    __cxa_call_unexpected __cxa_bad_cast __cxa_bad_typeid __cxa_thread_atexit __cxa_thread_atexit_impl
    __cxa_throw_bad_array_new_length __cxa_init_primary_exception __cxa_call_terminate
    """

_MATH_FUNCTIONS = """
    sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 exp10 expm1 log log2 log10 log1p
    logb pow sqrt cbrt hypot erf erfc tgamma lgamma lgamma_r ceil floor trunc round lround llround nearbyint rint
    lrint llrint fmod remainder remquo fma fmax fmin fdim fabs ldexp scalbn scalbln frexp modf copysign nan sincos
    nextafter ilogb
    """

_COMMON_ALLOWED = [
    rf"(?:{_alternatives(_C_BASICS)})",
    rf"(?:{_alternatives(_MATH_FUNCTIONS)})[fl]?",
    r"__\w+_finite",
    # glibc's libmvec: the vector variants of the math functions above, which GCC calls when it vectorises a loop
    # under -ffast-math (vector-function ABI names: ISA, mask, lanes, parameter kinds, then the scalar name)
    rf"_ZGV[bcdens][NM](?:\d+|x)[vluRLUs\d]*_(?:__)?(?:{_alternatives(_MATH_FUNCTIONS)})[fl]?(?:_finite)?",
    # GCC's transactional-memory runtime (libitm): weak references the C++ runtime's headers leave in every object
    r"_ITM_\w+",
    r"_?Py\w+",
    r"pybind11::.*",
    # type information of fundamental types (exceptions, pybind11 casts)
    r"(?:(?:un)?signed )?(?:bool|char|wchar_t|char8_t|char16_t|char32_t|short|int|long|long long|float|double|"
    r"long double|void|decltype\(nullptr\)|__int128)(?: const)?\**(?: const)?",
    # the C++ runtime: containers, strings, streams, exceptions, allocation
    r"std::.*",
    r"__gnu_cxx::.*",
    r"__cxxabiv1::.*",
    r"operator (new|delete|new\[\]|delete\[\])",
    # tensors: metadata, storage, data pointers, options, scalar types, symbolic sizes
    rf"at::_ops::(?:{_alternatives(_ALLOWED_OPS)})::call",
    r"at::(TensorBase|Tensor|TensorMaker|TensorOptions|OptionalTensorRef|TensorRef)::.*",
    r"at::(TensorBase|Tensor|TensorMaker|TensorOptions|TensorIteratorBase|OptionalTensorRef)",
    r"at::detail::(empty_cpu|empty_strided_cpu|empty_generic|empty_strided_generic|empty_cuda|empty_strided_cuda)",
    r"at::(toString|print|operator<<|get_num_threads|get_thread_num|in_parallel_region|is_expandable_to)",
    r"at::internal::(lazy_init_num_threads|GRAIN_SIZE)",
    r"at::(checkDim|checkSize|checkSize_symint|checkContiguous|checkAllSameGPU|checkAllSameType|checkSameType|"
    r"checkDeviceType|checkScalarType|checkScalarTypes|checkNumel|checkAllContiguous|checkSameGPU|checkDimRange|"
    r"TensorArg|TensorGeometryArg|CheckedFrom)(::.*)?",
    r"at::(NoGradGuard|AutoGradMode|InferenceMode|AutoDispatchBelowADInplaceOrView)(::.*)?",
    r"c10::(TensorImpl|StorageImpl|UndefinedTensorImpl|AutogradMetaInterface|TensorOptions|Storage|DataPtr|"
    r"intrusive_ptr_target|SymInt|SymBool|SymFloat|SymIntArrayRef|SymNode|SymNodeImpl|SymbolicShapeMeta|"
    r"SymDimVector|SmallVectorBase|Scalar|Device|Layout|MemoryFormat|ScalarType|TypeMeta|Half|BFloat16|ArrayRef|IntArrayRef|"
    r"Error|ValueError|IndexError|TypeError|NotImplementedError|LinAlgError|OutOfMemoryError|EnforceFiniteError|"
    r"ErrorAlwaysShowCppStacktrace|OnnxfiBackendSystemError|DistError|Warning|WarningHandler|UserWarning|"
    r"DeprecationWarning|WarningHandlerGuard|SourceLocation|Allocator|GetAllocator|InefficientStdFunctionContext|"
    r"NoGradGuard|AutoGradMode|InferenceMode|GradMode|AutogradState|DispatchKeySet|Dimname|Symbol|"
    r"impl::PyInterpreter|impl::PyObjectSlot|impl::GPUTrace|impl::cow::.*|impl::ExcludeDispatchKeyGuard|"
    r"impl::IncludeDispatchKeyGuard|impl::getGlobalPyInterpreter|impl::tls_local_dispatch_key_set|"
    r"impl::device_guard_impl_registry|impl::getDeviceGuardImpl|impl::DeviceGuardImplInterface|"
    r"impl::VirtualGuardImpl|impl::_force_tls_local_dispatch_key_set|impl::tls_is_dispatch_key_excluded|"
    r"impl::tls_is_dispatch_key_included|impl::tls_set_dispatch_key_excluded|"
    r"impl::tls_set_dispatch_key_included)(::.*)?",
    r"c10::detail::(torchCheckFail|torchInternalAssertFail|torchCheckMsgImpl|maybe_wrap_dim_slow|"
    r"_str_wrapper|deprecated_AT_DISPATCH_ALL_TYPES_AND_HALF|empty_string|StripBasename|"
    r"infer_schema::.*|LogAPIUsageFakeReturn)",
    r"c10::(toString|str|Warning|warn|GetCPUAllocator|GetAllocator|get_default_dtype|get_default_dtype_as_scalartype|"
    r"typeMetaToScalarType|throwNullDataPtrError|warnDeprecatedDataPtr|elementSize|isFloatingType|isIntegralType|operator<<|operator==|toTypeString|"
    r"get_backtrace|demangle|demangle_type|ThrowEnforceNotMet|ThrowEnforceFiniteNotMet|SetUsageLogger|"
    r"LogAPIUsage|detail::getNonDeterministicRandom|memory_format_as_string|DeviceTypeName|isValidDeviceType|"
    r"is_pinned_device|get_fully_qualified_type_name|GetExceptionString|IValue::destroy|"
    r"raw::intrusive_ptr::(incref|decref)|infer_size|IValue::reportToTensorTypeError)",
    r"caffe2::(TypeMeta|detail)(::.*)?",
    r"THPVariable_(Wrap|Unpack|NewWithVar)|THPVariableClass|THPDtypeType|THPLayoutType|THPDeviceType",
    r"torch::(PyWarningHandler|translate_exception_to_python|wrap_pybind_function\w*|autograd::AutogradMeta|"
    r"autograd::impl::(get_autograd_meta|materialize_autograd_meta|grad_accumulator)|autograd::VariableHooks|"
    r"detail::(python_error|PyWarningHandler))(::.*)?",
]

_OPENMP_ALLOWED = [
    r"GOMP_(?!target)\w+",
    r"omp_get_\w+|omp_in_parallel|omp_in_final|omp_(init|set|unset|test|destroy)_(nest_)?lock",
]

_CUDA_RUNTIME = """
    LaunchKernel LaunchKernelExC LaunchCooperativeKernel GetLastError PeekAtLastError GetErrorString GetErrorName
    GetDevice GetDeviceCount GetDeviceProperties GetDeviceProperties_v2 DeviceGetAttribute FuncGetAttributes
    FuncSetAttribute FuncSetCacheConfig OccupancyMaxActiveBlocksPerMultiprocessor
    OccupancyMaxActiveBlocksPerMultiprocessorWithFlags OccupancyMaxPotentialBlockSize OccupancyAvailableDynamicSMemPerBlock
    Malloc Free MallocAsync FreeAsync MallocHost FreeHost HostAlloc Memcpy MemcpyAsync Memset MemsetAsync Memcpy2D
    Memcpy2DAsync MemcpyToSymbol MemcpyToSymbolAsync MemcpyFromSymbol MemcpyFromSymbolAsync GetSymbolAddress
    GetSymbolSize DeviceSynchronize StreamSynchronize PointerGetAttributes MemGetInfo DriverGetVersion
    RuntimeGetVersion GetFuncBySymbol
    """


def _device_allowed(api: str) -> list[str]:
    """The CUDA-like runtime allow-list for ``api`` (``cuda`` or ``musa``)."""
    upper = api.upper()
    return [
        rf"{api}(?:{_alternatives(_CUDA_RUNTIME)})",
        rf"__{api}\w+",  # registration and launch internals nvcc's generated host code calls
        rf"__fatbinwrap\w*|__{api}PrelinkedFatbins|__nv\w*",
        rf"c10::{api}::(getCurrent{upper}Stream|getDefault{upper}Stream|c10_{api}_check_implementation|device_count|"
        rf"device_count_ensure_non_zero|current_device|set_device|MaybeSetDevice|ExchangeDevice|MaybeExchangeDevice|"
        rf"GetDevice|SetDevice|GetDeviceCount|get_{api}_check_suffix|{upper}KernelLaunchRegistry|"
        rf"{upper}Stream::(query|synchronize|stream|id|priority|priority_range|unpack3|pack3|unwrap)|"
        rf"{upper}CachingAllocator::(get|allocator|raw_alloc|raw_alloc_with_stream|raw_delete)|"
        rf"impl::{upper}GuardImpl|warn_or_error_on_sync|get_sync_debug_mode|"
        rf"{upper}Error|memcpy_and_sync|stream_synchronize)(::.*)?",
        rf"at::{api}::(getCurrentDeviceProperties|getDeviceProperties|warp_size|getCurrent{upper}Stream|"
        rf"getDefault{upper}Stream|detail::.*|is_available|device_count|current_device|set_device)(::.*)?",
        rf"at::{api}::(CUDAContext|{upper}Event)?::?$",
    ]


def _device_guard_imports(api: str) -> re.Pattern[str]:
    """What the device guard's implementation class imports (``c10::cuda::CUDAGuard`` and friends).

    Its virtual functions are defined in the header, so every extension that
    constructs a guard carries its vtable and imports all of them: events,
    stream pools and waits included, whether or not the answer uses them. They
    are admitted ahead of the concerns below; streams, events and timers used
    on purpose are the static rules' and the runtime checks' business.
    """
    upper = api.upper()
    return re.compile(
        rf"{api}(EventCreateWithFlags|EventRecord|EventRecordWithFlags|EventQuery|EventSynchronize|EventDestroy|"
        rf"EventElapsedTime|StreamWaitEvent|StreamQuery|StreamIsCapturing|StreamGetCaptureInfo\w*)|"
        rf"c10::{api}::(getStreamFromPool|getStreamFromExternal|setCurrent{upper}Stream|device_synchronize|"
        rf"{upper}CachingAllocator::recordStream|warning_state|currentStreamCaptureStatusMayInitCtx|"
        rf"impl::{upper}GuardImpl)(::.*)?|"
        r"c10::impl::GPUTrace(::.*)?|c10::impl::PyInterpreter(::.*)?"
    )


_GUARD_IMPORTS: dict[str, re.Pattern[str]] = {"cuda": _device_guard_imports("cuda"), "musa": _device_guard_imports("musa")}

ALLOW_LISTS: dict[str, tuple[re.Pattern[str], ...]] = {
    "cpp": tuple(re.compile(p) for p in [*_COMMON_ALLOWED, *_OPENMP_ALLOWED]),
    "cuda": tuple(re.compile(p) for p in [*_COMMON_ALLOWED, *_device_allowed("cuda")]),
    "musa": tuple(re.compile(p) for p in [*_COMMON_ALLOWED, *_device_allowed("musa")]),
}
"""Per backend: patterns an imported symbol's :func:`symbol_entity` must match in full."""


# --------------------------------------------------------------------------------------------
# Known concerns (they are refused anyway; these give the sentence)
# --------------------------------------------------------------------------------------------

_CONCERNS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (concern, re.compile(pattern), advice)
    for concern, pattern, advice in (
        ("ATen compute", r"at::_ops::(\w+)::(call|redispatch)",
         "runs the ATen operator aten::{op}; write the computation in your own loop or kernel"),
        ("ATen compute", r"(at|torch)::(cpu|native|compositeexplicitautograd|compositeimplicitautograd|"
         r"compositeexplicitautogradnonfunctional|meta|mkldnn|linalg|fft|special|nn|functional|autograd)::.*",
         "calls an ATen/LibTorch kernel directly; write the computation in your own loop or kernel"),
        ("dispatcher", r"(c10::(Dispatcher|OperatorHandle|OperatorName|KernelFunction|BoxedKernel|OperatorKernel|"
         r"RegisterOperators|Library|DispatchKeyExtractor|FunctionSchema|impl::OperatorEntry|impl::BoxedKernelWrapper|"
         r"RegistrationHandleRAII)|torch::(jit|Library|detail::TorchLibraryInit|class_|CppFunction))(::.*)?",
         "looks up or calls operators through the dispatcher; write the computation in your own loop or kernel"),
        ("dynamic loading", r"dlopen|dlmopen|dlsym|dlvsym|dladdr1?|dlinfo|dl_iterate_phdr|cuGetProcAddress\w*|"
         r"cudaGetDriverEntryPoint\w*|musaGetDriverEntryPoint\w*|cuModuleLoad\w*|cuLibraryLoad\w*",
         "loads or looks up code at run time; call only code you compiled"),
        # ``std::thread::hardware_concurrency`` only counts CPUs (the way C++ asks how many threads to use).
        ("threads", r"pthread_create|pthread_detach|pthread_join|thrd_create|clone3?|"
         r"std::thread(?!::hardware_concurrency$)(::.*)?|"
         r"std::__future_base(::.*)?|std::jthread(::.*)?|c10::(ThreadPool|TaskThreadPool\w*|TaskThreadPoolBase|"
         r"PThreadPool|ThreadPoolRegistry)(::.*)?|caffe2::PThreadPool(::.*)?|at::(launch|intraop_launch|"
         r"intraop_launch_future|internal::launch_no_thread_state|set_num_threads|set_num_interop_threads|"
         r"get_thread_pool)|at::internal::(invoke_parallel|_parallel_run)",
         "starts threads or uses a thread pool; use OpenMP (C++) or the GPU's own parallelism inside the call"),
        ("process settings", r"mallopt|mallinfo2?|malloc_trim|malloc_stats|malloc_info|sched_setaffinity|"
         r"sched_setscheduler|sched_setparam|pthread_setaffinity_np|pthread_setschedparam|setrlimit|prlimit(64)?|"
         r"setpriority|nice|setenv|putenv|unsetenv|clearenv|mlockall|munlockall|personality|prctl|"
         r"omp_set_\w+|kmp_set_\w+|omp_pause_resource\w*|\w+DeviceSetLimit|\w+DeviceSetCacheConfig|"
         r"\w+DeviceSetSharedMemConfig|\w+StreamSetAttribute|\w+CtxResetPersistingL2Cache|\w+DeviceReset|"
         r"\w+SetDeviceFlags|\w+CtxSetLimit|at::globalContext|at::Context::.*",
         "changes process-wide settings that also affect the reference and the timer; leave them alone"),
        ("signals", r"signal|sigaction|raise|kill|killpg|tgkill|alarm|ualarm|setitimer|timer_create|timer_settime|"
         r"sigprocmask|pthread_kill|pthread_sigmask|bsd_signal|sysv_signal|__sysv_signal|sigaltstack",
         "installs signal handlers or sends signals; an answer must not interfere with the judge's process"),
        ("processes", r"fork|vfork|_Fork|exec[lv]p?e?|execvpe|fexecve|system|popen|posix_spawnp?|ptrace|syscall|"
         r"daemon|setsid|setuid|setgid|chroot|unshare|setns",
         "starts processes or makes raw system calls; compute inside the call"),
        ("network", r"socket|socketpair|connect|bind|listen|accept4?|send|sendto|sendmsg|recv|recvfrom|recvmsg|"
         r"getaddrinfo|gethostbyname\w*|inet_\w+|curl_\w+",
         "uses the network; the answer must be self-contained"),
        ("files", r"open(64|at|at64)?|__open\w*|fopen(64)?|freopen(64)?|fdopen|creat(64)?|mmap(64)?|shm_open|"
         r"shm_unlink|unlink|unlinkat|remove|rename|opendir|readdir(64)?|mkdir|stat(64)?|fstat\w*|lstat\w*|"
         r"__x?stat\w*|readlink|getcwd|chdir|dup2?|dup3|pipe2?|memfd_create|std::(filesystem|__fs::filesystem)"
         r"(::.*)?|std::basic_(ifstream|ofstream|fstream|filebuf)(::.*)?|std::__basic_file(::.*)?",
         "accesses files or shared memory; compute every output from the inputs"),
        # Reading a clock is allowed (``std::chrono::steady_clock::now``, ``clock_gettime``): the verdict never rests
        # on the candidate's clock (docs/hacks.md, "Clocks, CPU counts and thread counts").
        ("timers", r"\w+Event\w*|nanosleep|usleep|sleep|clock_nanosleep|std::this_thread::.*",
         "sleeps or records device events; the harness times the kernel"),
        ("vendor library", r"(cublas|cublasLt|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|mkl|cblas|dnnl|"
         r"mublas|mudnn|mccl)\w*|at::cuda::(getCurrentCUDABlasHandle|getCurrentCUDASparseHandle|"
         r"getCurrentCUDASolverDnHandle|blas::.*)|at::native::cudnn\w*",
         "calls a vendor library (BLAS/DNN/FFT/RNG); write the computation in your own kernel"),
        ("streams and graphs", r"\w+Stream(Create\w*|Destroy|BeginCapture\w*|EndCapture|WaitEvent|AddCallback|"
         r"GetCaptureInfo\w*|IsCapturing|Query|AttachMemAsync)|\w+Graph\w*|\w+LaunchHostFunc|"
         r"c10::(cuda|musa)::(getStreamFromPool|getStreamFromExternal|setCurrent(CUDA|MUSA)Stream)|"
         r"at::(cuda|musa)::(CUDAGraph|MUSAGraph|getStreamFromPool|setCurrentCUDAStream)(::.*)?",
         "uses a stream or graph other than the current one; launch on the current stream"),
        # ``PyObject_Call``/``PyObject_CallObject`` stay allowed: pybind11's own glue, which torch's headers
        # instantiate in every binding unit, calls through them. Python that a callback would run is still seen
        # by the ATen observer at run time, and importing or compiling code from C++ is refused here.
        ("Python", r"PyRun_\w+|PyImport_\w+|Py_CompileString\w*|PyEval_EvalCode\w*|PyEval_EvalFrame\w*|"
         r"PyObject_CallMethod\w*|PyObject_Vectorcall\w*|PyObject_CallOneArg|"
         r"PyObject_CallNoArgs|PyCFunction_Call|PyMarshal_\w+|PySys_SetObject|PyOS_\w+",
         "runs Python code from C++; do the work in C++ or the kernel"),
    )
)

# Concerns that only word the refusal of a symbol the allow-list does not admit; every other concern also
# carves its symbols out of the broad allow-list patterns (``std::thread`` out of ``std::``, ``PyRun_*`` out of ``Py*``).
_EXPLAIN_ONLY = frozenset({"ATen compute", "dispatcher"})

# The module's init function, the linker's markers, the device toolchain's registration glue, and the C++ and
# compiler runtime's own entry points, which a toolchain that links its runtime statically defines in every
# extension (libsupc++'s ``__cxa_*``, libgcc's unwinder and helpers, libitm's clones).
_EXPORT_OK = re.compile(
    r"PyInit_\w+|_init|_fini|_edata|_end|__bss_start|__fatbinwrap\w*|__nv\w*|__cuda\w*|__musa\w*"
    r"|__cxa_\w+|__gxx_\w+|__gcclibcxx_\w+|__dynamic_cast|_Unwind_\w+|_ITM_\w+|__(?:de)?register_frame\w*|__frame_state_for"
)


def _concern(entity: str) -> tuple[str, str] | None:
    for concern, pattern, advice in _CONCERNS:
        match = pattern.fullmatch(entity)
        if match:
            if concern == "ATen compute" and match.re.pattern.startswith("at::_ops"):
                return concern, advice.format(op=match.group(1))
            return concern, advice
    return None


def forbidden_symbols(symbols: Iterable[str], backend: str, exported: Iterable[str] = ()) -> list[ForbiddenSymbol]:
    """The imported ``symbols`` that ``backend``'s allow-list does not admit, and the ``exported`` ones that interpose.

    Args:
        symbols: demangled undefined symbols, as :func:`imported_symbols` returns them.
        backend: ``cpp``, ``cuda`` or ``musa``.
        exported: C-linkage symbols the extension defines (:func:`exported_symbols`); any
            besides the module's init function could shadow a system or runtime function.

    Raises:
        KeyError: no allow-list for ``backend``.

    Example:
        >>> [f.concern for f in forbidden_symbols(["at::cpu::_softmax(at::Tensor const&, long, bool)"], "cpp")]
        ['ATen compute']
        >>> forbidden_symbols(["float* at::TensorBase::data_ptr<float>() const", "expf", "GOMP_parallel"], "cpp")
        []
    """
    allowed = ALLOW_LISTS[backend]
    guard = _GUARD_IMPORTS.get(backend)
    found: list[ForbiddenSymbol] = []
    for symbol in symbols:
        entity = symbol_entity(symbol)
        if guard is not None and guard.fullmatch(entity):
            continue
        known = _concern(entity)
        if (known is None or known[0] in _EXPLAIN_ONLY) and any(p.fullmatch(entity) for p in allowed):
            continue
        if known is None:
            known = ("not allowed", f"is not on the {backend} backend's allow-list of native symbols "
                     "(allocation, tensor metadata, error helpers, the device runtime, the C/C++ runtime)")
        concern, advice = known
        found.append(ForbiddenSymbol(symbol, concern, advice))
    for name in exported:
        if not _EXPORT_OK.fullmatch(name):
            found.append(ForbiddenSymbol(
                name, "interposition",
                "is defined with C linkage, which can shadow a system or runtime function; "
                "drop `extern \"C\"` or make it `static`",
            ))
    return found


def describe_findings(findings: Sequence[ForbiddenSymbol], limit: int = 12) -> str:
    """Findings grouped by what is wrong with them, naming at most ``limit`` symbols in all.

    Example:
        >>> found = forbidden_symbols(["dlopen", "dlsym", "at::cpu::_softmax(at::Tensor const&, long, bool)"], "cpp")
        >>> describe_findings(found, limit=2)
        '`dlopen`, `dlsym`: loads or looks up code at run time; call only code you compiled. (1 more)'
    """
    groups: dict[str, list[str]] = {}
    for finding in findings:
        groups.setdefault(finding.advice, []).append(finding.symbol)
    parts, shown = [], 0
    for advice, symbols in groups.items():
        names = symbols[: max(0, limit - shown)]
        if not names:
            break
        shown += len(names)
        parts.append(", ".join(f"`{_short(s)}`" for s in names) + f": {advice}.")
    more = f" ({len(findings) - shown} more)" if len(findings) > shown else ""
    return " ".join(parts) + more


def _short(symbol: str, limit: int = 120) -> str:
    return symbol if len(symbol) <= limit else symbol[: limit - 3] + "..."
