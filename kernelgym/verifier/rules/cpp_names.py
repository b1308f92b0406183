"""C++/CUDA name tables: LibTorch names that are allowed, names under a rule, patterns and messages.

Holds:
    the tables (``CPP_TORCH_ALLOWED``, ``CPP_NAME_RULES``, ``CPP_INCLUDE_RULES``, ...), ``CPP_MESSAGES``.
    blank_out: replace the matches of a pattern by spaces, keeping line breaks.
"""

from __future__ import annotations

import re

from kernelgym.verifier.rules.names import words

# --------------------------------------------------------------------------------------------
# C++/CUDA rules
# --------------------------------------------------------------------------------------------

CPP_TORCH_ALLOWED = words("""
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
CPP_ALLOWED_NAMESPACES = ("at::vec::", "torch::indexing::", "at::indexing::", "torch::stable::", "at::cuda::detail::")
CPP_NAME_RULES: dict[str, str] = {
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
CPP_CALL_ONLY = frozenset(
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
CPP_LIBRARY = re.compile(
    r"^(cublas\w*|cublasLt\w*|cudnn\w*|cblas_\w+|mkl_\w+|dnnl_\w+|cusparse\w*|cufft\w*|"
    r"cusolver\w*|LAPACKE_\w+|sgemm_|dgemm_|getCurrentCUDABlasHandle|getCurrentCUDASparseHandle)$"
)
CPP_INCLUDE_RULES = (
    (
        re.compile(r"cublas|cudnn|mkl|cblas|dnnl|oneapi|cusparse|cufft|cusolver|lapack|openblas|ATen/native/"),
        "native-library",
    ),
    # Not <thread>: it is also where ``std::thread::hardware_concurrency`` lives; ``std::thread`` itself is a name rule.
    (re.compile(r"^(pthread\.h|future|sys/wait\.h|spawn\.h)$"), "native-process"),
    (re.compile(r"^(fstream|sys/mman\.h|filesystem|fcntl\.h|dirent\.h|sys/shm\.h)$"), "native-file"),
    (re.compile(r"^(dlfcn\.h)$"), "native-timer-patch"),
    (re.compile(r"^(cuda_fp16\.h|cuda_bf16\.h|musa_fp16\.h|mma\.h)$"), "precision-downgrade"),
    (re.compile(r"^(Python\.h|pybind11/embed\.h|pybind11/eval\.h)$"), "native-python-call"),
)
INTERPOSABLE = re.compile(
    r"^(cuda[A-Z]\w+|cu[A-Z]\w+|musa[A-Z]\w+|clock_gettime|gettimeofday|clock|time|"
    r"omp_get_wtime|dlsym|pthread_create)$"
)
CUDA_BLANK = re.compile(
    r"__global__|__device__|__host__|__forceinline__|__noinline__|__shared__|__constant__|__managed__|"
    r"__restrict__|__grid_constant__|__launch_bounds__\s*\([^()]*\)"
)
LAUNCH = re.compile(r"<<<(.*?)>>>", re.DOTALL)
GOOD_STREAM = re.compile(
    r"^(0|0[uU]?|nullptr|NULL|cudaStreamLegacy|cudaStreamDefault|"
    r"(::)?(at|c10)::(cuda|musa)::getCurrent(CUDA|MUSA)Stream\(\s*\w*\s*\)(\.stream\(\))?|"
    r"getCurrent(CUDA|MUSA)Stream\(\s*\w*\s*\)(\.stream\(\))?)$"
)
CPP_MESSAGES = {
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
CPP_SCALAR_METHODS = frozenset(
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


def blank_out(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


