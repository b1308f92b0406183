"""Tests of kernelgym.verifier.inspect: each static rule, its negatives, line numbers, native sources, corpora."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgym.verifier.extract import FormatError, extract_program
from kernelgym.verifier.inspect import RULES, NativeSource, inspect_program, native_sources
from kernelgym.verifier.result import Violation

ROOT = Path(__file__).resolve().parents[2]
HACKS = sorted((ROOT / "tests" / "hacks").glob("*/*.py"))
# Patterns 1-23 are the known reward hacks (docs/hacks.md); 24-33 the classes of issue 14 and 15 (forging from
# inside the candidate, watched vs timed calls, two readings of one program, process state, assumed weights).
LAST_PATTERN = 42
LEGIT = sorted((ROOT / "tests" / "legit").glob("*/*.py"))
SOLUTIONS = sorted((ROOT / "kernelgym" / "tasks" / "suites").glob("*/solutions/**/*.py"))

CPP_OK = """\
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

FUNCTIONS = '["relu_forward"]'


def program(
    forward: str = "return module.relu_forward(x)",
    prelude: str = "",
    cpp: str = CPP_OK,
    init: str = "",
    methods: str = "",
    functions: str = FUNCTIONS,
    loader: bool = True,
) -> str:
    """A KernelBench-style answer with the given pieces (forward takes ``x``)."""
    build = f'module = load_inline(name="t", cpp_sources=cpp_source, functions={functions})\n' if loader else ""
    return (
        "import torch\nfrom torch import nn\nfrom torch.utils.cpp_extension import load_inline\n"
        + prelude
        + '\ncpp_source = r"""\n'
        + cpp
        + '"""\n'
        + build
        + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        + textwrap.indent(init, " " * 8)
        + "\n"
        + textwrap.indent(methods, " " * 4)
        + "\n    def forward(self, x):\n"
        + textwrap.indent(forward, " " * 8)
        + "\n"
    )


def cpp_program(body: str, prelude: str = "#include <torch/extension.h>\n") -> str:
    """An answer whose C++ source has ``body`` inside ``relu_forward``."""
    cpp = prelude + "torch::Tensor relu_forward(torch::Tensor x) {\n" + textwrap.indent(body, "    ") + "\n}\n"
    return program(cpp=cpp)


def rules_of(code: str, backend: str = "cpp", **kwargs) -> set[str]:
    return {v.rule for v in inspect_program(code, backend, **kwargs)}


def header(path: Path) -> dict[str, str]:
    fields = dict(re.findall(r"^# (task|expect|rule|pattern): (.+)$", path.read_text(), re.MULTILINE))
    return {k: v.strip() for k, v in fields.items()}


# --------------------------------------------------------------------------------------------
# Each rule fires on a small snippet
# --------------------------------------------------------------------------------------------

TRITON_OK = (
    "import torch\nimport triton\nimport triton.language as tl\nfrom torch import nn\n\n\n"
    "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n"
    "        k[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)\n        return y\n"
)

CASES: list[tuple[str, str, str]] = [
    ("torch-compute-in-forward", "torch function", program("return torch.relu(module.relu_forward(x))")),
    ("torch-compute-in-forward", "F alias", program("return F.gelu(x)", prelude="import torch.nn.functional as F\n")),
    ("torch-compute-in-forward", "module-level alias", program("return mm(x, x)", prelude="mm = torch.matmul\n")),
    (
        "torch-compute-in-forward",
        "from-import alias",
        program("return sg(x)", prelude="from torch import sigmoid as sg\n"),
    ),
    (
        "torch-compute-in-forward",
        "getattr with built name",
        program("return act(x)", prelude='act = getattr(torch, "ta" + "nh")\n'),
    ),
    ("torch-compute-in-forward", "getattr reversed string", program("return getattr(torch, 'uler'[::-1])(x)")),
    ("torch-compute-in-forward", "nn.functional via nn", program("return nn.functional.relu(x)")),
    ("torch-compute-in-forward", "tensor method", program("return x.sum(dim=1)")),
    ("torch-compute-in-forward", "in-place tensor method", program("x.relu_()\nreturn module.relu_forward(x)")),
    ("torch-compute-in-forward", "getattr tensor method", program('return getattr(x, "exp")()')),
    ("torch-compute-in-forward", "operator on kernel output", program("y = module.relu_forward(x)\nreturn y * 2")),
    ("torch-compute-in-forward", "operator on input", program("return module.relu_forward(x + 1)")),
    ("torch-compute-in-forward", "unary minus", program("y = module.relu_forward(x)\nreturn -y")),
    ("torch-compute-in-forward", "augmented assignment", program("y = module.relu_forward(x)\ny += 1\nreturn y")),
    ("torch-compute-in-forward", "comparison", program("return module.relu_forward(x) > 0")),
    (
        "torch-compute-in-forward",
        "operator on parameter",
        program("return module.relu_forward(x) * self.w", init="self.w = nn.Parameter(torch.ones(4))"),
    ),
    (
        "torch-compute-in-forward",
        "nn submodule call",
        program("return module.relu_forward(self.lin(x))", init="self.lin = nn.Linear(4, 4)"),
    ),
    (
        "torch-compute-in-forward",
        "submodule forward",
        program("return self.lin.forward(x)", init="self.lin = nn.Linear(4, 4)"),
    ),
    (
        "torch-compute-in-forward",
        "helper method",
        program("return self._helper(x)", methods="def _helper(self, t):\n    return t.exp()\n"),
    ),
    (
        "torch-compute-in-forward",
        "helper function taints its parameter",
        program("return helper(x)", prelude="def helper(t):\n    return t * 3\n"),
    ),
    ("torch-compute-in-forward", "lambda", program("f = lambda t: t.tanh()\nreturn f(x)")),
    (
        "torch-compute-in-forward",
        "module-level lambda",
        program("return f(x)", prelude="f = lambda t: torch.tanh(t)\n"),
    ),
    (
        "torch-compute-in-forward",
        "numpy",
        program("return torch.from_numpy(np.maximum(x.numpy(), 0))", prelude="import numpy as np\n"),
    ),
    ("torch-compute-in-forward", "builtin abs on tensor", program("return abs(x)")),
    ("torch-compute-in-forward", "builtin sum over tensors", program("return sum([x, x])")),
    (
        "torch-compute-in-forward",
        "operator module",
        program("return operator.mul(module.relu_forward(x), 2)", prelude="import operator\n"),
    ),
    ("torch-compute-in-forward", "method through __class__", program("return x.__class__.relu(x)")),
    (
        "torch-compute-in-forward",
        "forward replaced after the class",
        program() + "\nModelNew.forward = lambda self, x: x.relu()\n",
    ),
    (
        "torch-compute-in-forward",
        "functools.partial",
        program(
            "return self.op(x, x)",
            init="self.op = functools.partial(torch.add, alpha=1)",
            prelude="import functools\n",
        ),
    ),
    ("torch-compute-in-forward", "torch.ops.aten", program("return torch.ops.aten.relu(x)")),
    (
        "torch-compute-in-forward",
        "forward assigned in class body",
        program("return module.relu_forward(x)", methods="__call__ = torch.relu\n"),
    ),
    (
        "torch-compute-in-forward",
        "forward hook",
        program("return module.relu_forward(x)", init="self.register_forward_hook(lambda m, i, o: o.exp())"),
    ),
    (
        "torch-compute-in-forward",
        "autograd Function",
        program(
            "return Fn.apply(x)",
            prelude="class Fn(torch.autograd.Function):\n    @staticmethod\n"
            "    def forward(ctx, t):\n        return t.sigmoid()\n",
        ),
    ),
    ("uses-reference-model", "instantiates Model", program("return module.relu_forward(Model()(x))")),
    ("inherits-model", "derives Model", program().replace("class ModelNew(nn.Module)", "class ModelNew(Model)")),
    (
        "inherits-model",
        "derives Model through alias",
        program(prelude="Base = Model\nclass Mid(Base):\n    pass\n").replace("ModelNew(nn.Module)", "ModelNew(Mid)"),
    ),
    (
        "try-except-fallback",
        "try in forward",
        program("try:\n    return module.relu_forward(x)\nexcept Exception:\n    return x"),
    ),
    (
        "try-except-fallback",
        "contextlib.suppress in helper",
        program(
            "return run(x)",
            prelude="import contextlib\ndef run(t):\n    with contextlib.suppress(Exception):\n"
            "        return module.relu_forward(t)\n    return t\n",
        ),
    ),
    ("threading", "import threading", program(prelude="import threading\n")),
    ("threading", "from multiprocessing", program(prelude="from multiprocessing import Pool\n")),
    ("threading", "concurrent.futures", program(prelude="import concurrent.futures as cf\n")),
    ("threading", "os.fork", program("os.fork()\nreturn module.relu_forward(x)", prelude="import os\n")),
    (
        "extra-stream",
        "torch.cuda.Stream",
        program("with torch.cuda.stream(torch.cuda.Stream()):\n    return module.relu_forward(x)"),
    ),
    ("monkey-patching", "time.perf_counter", program(prelude="import time\ntime.perf_counter = lambda: 0.0\n")),
    ("monkey-patching", "torch.cuda.synchronize", program(prelude="torch.cuda.synchronize = lambda: None\n")),
    ("monkey-patching", "setattr on torch", program(prelude='setattr(torch, "allclose", lambda *a, **k: True)\n')),
    ("monkey-patching", "Tensor dunder", program(prelude="torch.Tensor.__eq__ = lambda a, b: True\n")),
    ("monkey-patching", "sys.modules", program(prelude="import sys\nsys.modules['torch'] = None\n")),
    ("monkey-patching", "torch.library on aten", program(prelude='lib = torch.library.Library("aten", "IMPL")\n')),
    (
        "monkey-patching",
        "TORCH_LIBRARY_IMPL(aten)",
        program(cpp=CPP_OK + 'TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl("relu", relu_forward); }\n'),
    ),
    ("global-flags", "cudnn flag", program(prelude="torch.backends.cudnn.benchmark = True\n")),
    ("global-flags", "allow_tf32", program(prelude="torch.backends.cuda.matmul.allow_tf32 = True\n")),
    ("global-flags", "set_num_threads", program(prelude="torch.set_num_threads(1)\n")),
    ("global-flags", "matmul precision", program(prelude="torch.set_float32_matmul_precision('medium')\n")),
    ("global-flags", "manual_seed", program(init="torch.manual_seed(0)")),
    ("global-flags", "environment", program(prelude='import os\nos.environ["OMP_NUM_THREADS"] = "1"\n')),
    ("global-flags", "omp_set_num_threads in C++", cpp_program("omp_set_num_threads(1);\nreturn x;")),
    ("precision-downgrade", ".half()", program("return module.relu_forward(x.half())")),
    ("precision-downgrade", "bfloat16 dtype", program("return module.relu_forward(x.to(torch.bfloat16))")),
    ("precision-downgrade", "autocast", program("with torch.autocast('cpu'):\n    return module.relu_forward(x)")),
    ("precision-downgrade", "at::Half in C++", cpp_program("auto p = x.data_ptr<at::Half>();\nreturn x;")),
    ("precision-downgrade", "__half in CUDA", cpp_program("__half h = __float2half(1.f);\nreturn x;")),
    (
        "precision-downgrade",
        "tl.float16 in Triton",
        TRITON_OK.replace(
            "tl.load(x_ptr + offs, mask=offs < n)", "tl.load(x_ptr + offs, mask=offs < n).to(tl.float16)"
        ),
    ),
    ("file-access", "open", program("open('/tmp/answer')\nreturn module.relu_forward(x)")),
    ("file-access", "pickle import", program(prelude="import pickle\n")),
    ("file-access", "torch.load", program("return torch.load('answer.pt')")),
    ("file-access", "os.listdir", program(prelude="import os\nFILES = os.listdir('.')\n")),
    ("file-access", "/dev/shm path", program(prelude='PATH = "/dev/shm/out"\n')),
    ("network", "socket", program(prelude="import socket\n")),
    ("network", "urllib", program(prelude="import urllib.request\n")),
    ("subprocess", "subprocess", program(prelude="import subprocess\n")),
    ("subprocess", "os.system", program(prelude='import os\nos.system("nvidia-smi")\n')),
    (
        "output-cache",
        "data_ptr key",
        program("return self.c.setdefault(x.data_ptr(), module.relu_forward(x))", init="self.c = {}"),
    ),
    (
        "output-cache",
        "data_ptr via a local",
        program(
            "k = x.data_ptr()\nif k not in self.c:\n    self.c[k] = module.relu_forward(x)\nreturn self.c[k]",
            init="self.c = {}",
        ),
    ),
    ("output-cache", "id key", program("return CACHE.get(id(x)) or module.relu_forward(x)", prelude="CACHE = {}\n")),
    ("output-cache", "data_ptr stored on self", program("self.last = x.data_ptr()\nreturn module.relu_forward(x)")),
    ("harness-introspection", "inspect import", program(prelude="import inspect\n")),
    (
        "harness-introspection",
        "sys._getframe",
        program("sys._getframe(1)\nreturn module.relu_forward(x)", prelude="import sys\n"),
    ),
    ("harness-introspection", "gc.get_objects", program(prelude="import gc\nOBJS = gc.get_objects()\n")),
    ("harness-introspection", "frame attribute", program("f = self.frame.f_back\nreturn module.relu_forward(x)")),
    ("harness-introspection", "__subclasses__", program(prelude="KIDS = nn.Module.__subclasses__()\n")),
    ("uses-task-inputs", "get_inputs in __init__", program(init="self.ans = module.relu_forward(*get_inputs())")),
    ("unresolved-call", "dispatch table", program("return _TABLE['act'](module.relu_forward(x))",
                                                  prelude="_TABLE = {'act': torch.relu}\n")),
    ("unresolved-call", "run-time name", program("for step in self.steps:\n    x = step(x)\nreturn module.relu_forward(x)")),
    ("dynamic-code", "eval", program(prelude='VALUE = eval("1 + 1")\n')),
    ("dynamic-code", "exec", program(prelude='exec("y = 1")\n')),
    ("dynamic-code", "__import__", program(prelude="m = __import__('o' + 's')\n")),
    ("dynamic-code", "importlib", program(prelude="import importlib\n")),
    ("dynamic-code", "computed getattr on module", program("return getattr(torch, self.name)(x)")),
    ("dynamic-code", "globals()", program(prelude="G = globals()\n")),
    ("dynamic-code", "module __dict__", program(prelude='torch.__dict__["set_num_" + "threads"](1)\n')),
    ("forbidden-import", "ctypes", program(prelude="import ctypes\n")),
    ("forbidden-import", "star import", program(prelude="from torch import *\n")),
    ("forbidden-import", "cupy", program(prelude="import cupy\n")),
    ("torch-compiler", "torch.compile", program(init="self.f = torch.compile(lambda t: t)")),
    ("torch-compiler", "torch.jit.script", program(prelude="@torch.jit.script\ndef f(t):\n    return t\n")),
    ("torch-compiler", "CUDA graph", program(init="self.g = torch.cuda.CUDAGraph()")),
    ("private-torch-api", "torch._C", program(prelude="torch._C._set_grad_enabled(False)\n")),
    ("private-torch-compute", "torch._C._nn", program("return torch._C._nn.leaky_relu(x, 0.01)")),
    ("tensor-subclass", "Tensor subclass", program(prelude="class Lazy(torch.Tensor):\n    pass\n")),
    (
        "tensor-subclass",
        "__torch_function__",
        program(
            prelude="class Lazy:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
            "        return f(*a)\n"
        ),
    ),
    ("no-native-kernel", "no load_inline", program("return x.new_empty(x.shape)", loader=False)),
    ("no-native-kernel", "triton backend without @triton.jit", program()),
    ("kernel-not-called", "extension built, never called", program("return x.new_empty(x.shape)")),
    ("native-torch-compute", "torch::matmul", cpp_program("return torch::matmul(x, x);")),
    ("native-torch-compute", "at::relu_", cpp_program("at::relu_(x);\nreturn x;")),
    ("native-torch-compute", "tensor method", cpp_program("return x.sum();")),
    ("native-torch-compute", "tensor method on call result", cpp_program("return x.contiguous().exp();")),
    ("native-torch-compute", "tensor operator", cpp_program("auto y = x.contiguous();\nreturn y + y;")),
    ("native-torch-compute", "tensor compound assignment", cpp_program("auto y = x.clone();\ny += 1;\nreturn y;")),
    (
        "native-torch-compute",
        "using namespace torch",
        cpp_program("return relu(x);", prelude="#include <torch/extension.h>\nusing namespace torch;\n"),
    ),
    (
        "native-torch-compute",
        "using-declaration",
        cpp_program("return softmax(x, 0);", prelude="#include <torch/extension.h>\nusing torch::softmax;\n"),
    ),
    (
        "native-torch-compute",
        "namespace alias",
        cpp_program(
            "return F::relu(x);", prelude="#include <torch/extension.h>\nnamespace F = torch::nn::functional;\n"
        ),
    ),
    (
        "native-torch-compute",
        "macro body",
        cpp_program("return MM(x, x);", prelude="#include <torch/extension.h>\n#define MM(a, b) at::mm(a, b)\n"),
    ),
    ("native-torch-compute", "nn module in C++", cpp_program("torch::nn::Linear lin(4, 4);\nreturn lin->forward(x);")),
    ("native-process", "fork", cpp_program("fork();\nreturn x;")),
    ("native-process", "std::thread", cpp_program("std::thread t([] {});\nt.join();\nreturn x;")),
    ("native-process", "system", cpp_program('system("ls");\nreturn x;')),
    (
        "native-process",
        "std::thread under using namespace std",
        cpp_program("thread t([] {});\nt.join();\nreturn x;",
                    prelude="#include <torch/extension.h>\n#include <thread>\nusing namespace std;\n"),
    ),
    (
        "native-process",
        "#include <future>",
        cpp_program("return x;", prelude="#include <torch/extension.h>\n#include <future>\n"),
    ),
    ("native-file", "fopen", cpp_program('FILE* f = fopen("a.bin", "rb");\nreturn x;')),
    ("native-file", "ifstream", cpp_program('std::ifstream in("a.bin");\nreturn x;')),
    ("native-file", "/dev/shm literal", cpp_program('const char* p = "/dev/shm/answer";\nreturn x;')),
    ("native-file", "mmap", cpp_program("void* p = mmap(nullptr, 4096, 1, 1, -1, 0);\nreturn x;")),
    ("native-stream", "cudaStreamCreate", cpp_program("cudaStream_t s;\ncudaStreamCreate(&s);\nreturn x;")),
    ("native-stream", "getStreamFromPool", cpp_program("auto s = at::cuda::getStreamFromPool();\nreturn x;")),
    (
        "native-stream",
        "launch on another stream",
        cpp_program(
            "k<<<1, 32, 0, other>>>(x.data_ptr<float>());\nreturn x;",
            prelude="#include <torch/extension.h>\n__global__ void k(float* p) {}\n",
        ),
    ),
    (
        "native-timer-patch",
        "cudaEventElapsedTime",
        cpp_program("float ms;\ncudaEventElapsedTime(&ms, a, b);\nreturn x;"),
    ),
    ("native-timer-patch", "dlsym", cpp_program('void* f = dlsym(RTLD_NEXT, "clock_gettime");\nreturn x;')),
    (
        "native-timer-patch",
        "defines a CUDA API function",
        program(cpp=CPP_OK + 'extern "C" int cudaEventRecord(void* e, void* s) { return 0; }\n'),
    ),
    (
        "native-timer-patch",
        "load-time constructor",
        program(cpp=CPP_OK + "__attribute__((constructor)) static void early() {}\n"),
    ),
    (
        "native-python-call",
        "pybind import",
        cpp_program('auto relu = py::module_::import("torch").attr("relu");\nreturn relu(x).cast<torch::Tensor>();'),
    ),
    ("native-python-call", "PyRun", cpp_program('PyRun_SimpleString("import torch");\nreturn x;')),
    ("native-library", "cublas", cpp_program("cublasSgemm(h, a, b, 1, 1, 1, 0, 0, 1, 0, 1, 0, 0, 1);\nreturn x;")),
    (
        "native-library",
        "cblas include",
        cpp_program("return x;", prelude="#include <torch/extension.h>\n#include <cblas.h>\n"),
    ),
    (
        "native-library",
        "-lcublas flag",
        program().replace('functions=["relu_forward"])', 'functions=["relu_forward"], extra_ldflags=["-lcublas"])'),
    ),
    (
        "l2-persist",
        "access policy window",
        cpp_program("cudaStreamAttrValue attr;\nattr.accessPolicyWindow.num_bytes = 1 << 20;\nreturn x;"),
    ),
    (
        "l2-persist",
        "persisting L2 limit",
        cpp_program("cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);\nreturn x;"),
    ),
]


@pytest.mark.parametrize(("rule", "why", "code"), CASES, ids=[f"{r}:{w}" for r, w, _ in CASES])
def test_rule_fires(rule, why, code):
    backend = "triton" if "@triton.jit" in code or why.startswith("triton backend") else "cpp"
    found = inspect_program(code, backend)
    assert rule in {v.rule for v in found}, f"{why}: {found}"
    for violation in found:
        assert isinstance(violation, Violation)
        assert violation.rule in RULES
        assert violation.where in ("python", "cpp")
        assert violation.message.strip() and violation.message[0] not in " ."
        assert 0 <= violation.line <= code.count("\n") + 1


def test_every_rule_has_a_case():
    assert {rule for rule, _, _ in CASES} == set(RULES)


# --------------------------------------------------------------------------------------------
# Honest code that looks suspicious must pass
# --------------------------------------------------------------------------------------------

NEGATIVES: list[tuple[str, str]] = [
    (
        "python comment and docstring mention torch.matmul",
        program(
            '"""Like torch.matmul(a, b) but hand-written; Model is the reference."""\n'
            "# torch.relu(x) would be a fallback\nreturn module.relu_forward(x)"
        ),
    ),
    (
        "C++ comments mention torch::matmul",
        program(
            cpp=CPP_OK + '// torch::matmul(a, b) and x.sum()\n/* at::relu(x); std::thread t; fopen("/dev/shm/x") */\n'
        ),
    ),
    (
        "extension functions named like tensor ops",
        program(
            "y = module.sum(x)\nreturn module.relu(y)",
            cpp=CPP_OK.replace("relu_forward", "relu") + "torch::Tensor sum(torch::Tensor x) { return relu(x); }\n",
            functions='["relu", "sum"]',
        ),
    ),
    (
        "shape arithmetic",
        program(
            "n = x.numel()\nblocks = (n + 255) // 256 * 2 - 1\nrows = x.size(0) * x.shape[1] // x.dim()\n"
            "assert blocks > 0 and rows == n // x.dim()\nreturn module.relu_forward(x.view(-1)).view(x.shape)"
        ),
    ),
    (
        "reads parameters of a submodule",
        program("return module.relu_forward(self.lin.weight.t().contiguous())", init="self.lin = nn.Linear(4, 4)"),
    ),
    (
        "math on scalars",
        program("s = math.exp(1.0) * math.sqrt(4)\nreturn module.relu_forward(x)", prelude="import math\n"),
    ),
    (
        "allocation, views and device helpers",
        program(
            "out = torch.empty_like(x)\nbuf = torch.zeros(x.shape, dtype=torch.float32, device=x.device)\n"
            "s = torch.cuda.current_stream() if torch.cuda.is_available() else None\n"
            "y = module.relu_forward(x.contiguous().view(-1).reshape(x.shape).to(x.device))\n"
            "out.copy_(y)\nbuf.zero_()\nreturn out"
        ),
    ),
    (
        "dtype checks",
        program(
            "if x.dtype != torch.float32 or x.device.type != 'cpu':\n    raise ValueError('x')\n"
            "return module.relu_forward(x)"
        ),
    ),
    ("extension held on self", program("return self.ext.relu_forward(x)", init="self.ext = module")),
    (
        "C++ locals named like rules",
        cpp_program(
            "int half = (int)x.numel() / 2;\nint64_t stream = 0, system_size = half;\n"
            "std::vector<float> v(half);\nv.push_back(std::max(1.f, std::exp(0.f)));\n"
            'TORCH_CHECK(x.scalar_type() == at::kFloat && x.size(0) * 2 > 0, "bad");\n'
            "auto acc = x.accessor<float, 2>();\nreturn torch::empty_like(x);"
        ),
    ),
    (
        "C++ lambda and OpenMP",
        cpp_program(
            "auto out = torch::empty_like(x);\nfloat* o = out.data_ptr<float>();\n"
            "auto f = [&](int64_t i) { o[i] = 0.f; };\n#pragma omp parallel for\n"
            "for (int64_t i = 0; i < out.numel(); ++i) f(i);\nreturn out;"
        ),
    ),
    (
        "CPU and thread counts, an OpenMP team size, a clock",
        cpp_program(
            "unsigned cpus = std::thread::hardware_concurrency();\nlong online = sysconf(_SC_NPROCESSORS_ONLN);\n"
            "int most = omp_get_max_threads();\nauto t0 = std::chrono::steady_clock::now();\n"
            "#pragma omp parallel for num_threads(8)\nfor (int i = 0; i < most; ++i) {}\n"
            "return torch::empty_like(x);",
            prelude="#include <torch/extension.h>\n#include <chrono>\n#include <omp.h>\n#include <thread>\n#include <unistd.h>\n",
        ),
    ),
    (
        "a local named thread under using namespace std",
        cpp_program(
            "int thread = omp_get_thread_num();\nunsigned n = thread::hardware_concurrency();\nreturn x;",
            prelude="#include <torch/extension.h>\n#include <thread>\nusing namespace std;\n",
        ),
    ),
    (
        "CUDA launch on the current stream",
        cpp_program(
            "k<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>());\n"
            "auto s = at::cuda::getCurrentCUDAStream();\nk<<<1, 32, 0, s>>>(x.data_ptr<float>());\n"
            "k<<<dim3(1), dim3(32)>>>(x.data_ptr<float>());\nreturn x;",
            prelude="#include <torch/extension.h>\n__global__ void k(float* __restrict__ p) { p[threadIdx.x] = 0.f; }\n",
        ),
    ),
    ("triton kernel launch", TRITON_OK),
]


@pytest.mark.parametrize(("why", "code"), NEGATIVES, ids=[w for w, _ in NEGATIVES])
def test_honest_code_passes(why, code):
    backend = "triton" if "@triton.jit" in code else "cpp"
    assert inspect_program(code, backend) == (), why


def test_half_is_allowed_when_the_reference_uses_it():
    code = program("return module.relu_forward(x.half())")
    assert "precision-downgrade" in rules_of(code)
    reference = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x.half())\n"
    assert "precision-downgrade" not in rules_of(code, reference=reference)


# --------------------------------------------------------------------------------------------
# Line numbers
# --------------------------------------------------------------------------------------------


def line_of(code: str, marker: str) -> int:
    return next(i for i, text in enumerate(code.splitlines(), start=1) if marker in text)


def test_python_violation_points_at_the_line():
    code = program("y = module.relu_forward(x)\nz = y.contiguous()\nreturn torch.sigmoid(z)")
    (violation,) = [v for v in inspect_program(code, "cpp") if v.rule == "torch-compute-in-forward"]
    assert violation.line == line_of(code, "torch.sigmoid")
    assert violation.where == "python"


def test_cpp_violation_points_at_the_line_in_the_program():
    code = cpp_program("auto y = x.contiguous();\nauto z = torch::matmul(y, y);\nreturn z;")
    (violation,) = inspect_program(code, "cpp")
    assert (violation.rule, violation.where) == ("native-torch-compute", "cpp")
    assert violation.line == line_of(code, "torch::matmul")


def test_cpp_lines_through_concatenated_escaped_strings():
    code = (
        "from torch import nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "src = (\n"
        '    "#include <torch/extension.h>\\n"\n'
        '    "torch::Tensor f(torch::Tensor x) {\\n"\n'
        '    "    return x.exp();\\n"\n'
        '    "}\\n"\n'
        ")\n"
        'module = load_inline(name="t", cpp_sources=src, functions=["f"])\n\n\n'
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return module.f(x)\n"
    )
    (violation,) = inspect_program(code, "cpp")
    assert violation.rule == "native-torch-compute"
    assert violation.line == line_of(code, "x.exp()")


# --------------------------------------------------------------------------------------------
# native_sources
# --------------------------------------------------------------------------------------------


def assert_lines_map_back(code: str, source: NativeSource) -> None:
    code_lines = code.splitlines()
    for row, text in enumerate(source.text.split("\n")):
        if text.strip():
            assert text.strip() in code_lines[source.code_line(row) - 1], (row, text)


def test_native_sources_by_name_raw_triple_quoted():
    code = program()
    (source,) = native_sources(code)
    assert source.language == "cpp"
    assert "relu_forward" in source.text and "#include <torch/extension.h>" in source.text
    assert source.line == line_of(code, 'cpp_source = r"""')
    assert_lines_map_back(code, source)


def test_native_sources_lists_concatenation_and_cuda():
    code = (
        "import textwrap\nfrom torch.utils.cpp_extension import load_inline\n"
        'HEAD = "#include <torch/extension.h>\\n"\n'
        'BODY = textwrap.dedent("""\n    torch::Tensor f(torch::Tensor x);\n""")\n'
        'KERNEL = r"""\n__global__ void k(float* p) { p[0] = 1.f; }\n"""\n'
        'EXTRA = """\ntorch::Tensor g(torch::Tensor x) { return x; }\n"""\n'
        'm = load_inline("t", [HEAD + BODY], cuda_sources=[KERNEL, EXTRA], functions=["f"])\n'
    )
    sources = native_sources(code)
    assert [s.language for s in sources] == ["cpp", "cuda", "cuda"]
    assert sources[0].text.startswith("#include <torch/extension.h>\n")
    assert "torch::Tensor f" in sources[0].text
    assert "__global__" in sources[1].text and "torch::Tensor g" in sources[2].text
    assert sources[1].line == line_of(code, "KERNEL = ")
    for source in sources[1:]:
        assert_lines_map_back(code, source)


def test_native_sources_escapes_fstrings_and_fallback():
    code = (
        "N = 4\n"
        'SRC = f"#include <torch/extension.h>\\nconstexpr int N = {N};\\nint g() {{ return N; }}\\n"\n'
        'LOOSE = "torch::Tensor h(torch::Tensor x) { return x; }"\n'
        'NOT_CODE = "just words"\n'
        'def f():\n    """#include <docstrings are not sources> torch::matmul"""\n'
    )
    sources = native_sources(code)
    texts = [s.text for s in sources]
    assert "#include <torch/extension.h>\nconstexpr int N = 0;\nint g() { return N; }\n" in texts
    assert "torch::Tensor h(torch::Tensor x) { return x; }" in texts
    assert not any("docstrings" in t or "just words" in t for t in texts)
    escaped = next(s for s in sources if "constexpr" in s.text)
    assert {escaped.code_line(r) for r in range(3)} == {line_of(code, "SRC = ")}


# --------------------------------------------------------------------------------------------
# Corpora: hacks, legit samples, bundled reference solutions
# --------------------------------------------------------------------------------------------


def backend_of(path: Path) -> str:
    return path.parent.name


@pytest.mark.parametrize("path", HACKS, ids=[f"{p.parent.name}/{p.name}" for p in HACKS])
def test_hack_sample(path):
    fields = header(path)
    assert set(fields) == {"task", "expect", "rule", "pattern"}, fields
    assert fields["expect"] in ("illegal", "incorrect", "ok", "format_error")
    assert 1 <= int(fields["pattern"].split()[0]) <= LAST_PATTERN
    if fields["expect"] == "format_error":  # refused by extraction, before any rule reads it
        with pytest.raises(FormatError):
            extract_program(path.read_text())
        return
    found = inspect_program(path.read_text(), backend_of(path))
    if fields["rule"] in RULES:
        assert fields["expect"] == "illegal"
        assert fields["rule"] in {v.rule for v in found}, found
    else:
        # Deliberate static evasions: static inspection must stay silent so the runtime check is what fires.
        assert found == (), found


def test_hack_corpus_covers_every_pattern():
    patterns = {int(header(p)["pattern"].split()[0]) for p in HACKS}
    assert patterns == set(range(1, LAST_PATTERN + 1))
    assert any(header(p)["rule"] not in RULES for p in HACKS)


@pytest.mark.parametrize("path", LEGIT, ids=[f"{p.parent.name}/{p.name}" for p in LEGIT])
def test_legit_sample(path):
    fields = header(path)
    assert fields.get("expect") == "ok" and fields.get("task")
    assert inspect_program(path.read_text(), backend_of(path)) == ()


@pytest.mark.skipif(not SOLUTIONS, reason="no bundled reference solutions yet")
@pytest.mark.parametrize("path", SOLUTIONS, ids=[str(p.relative_to(ROOT)) for p in SOLUTIONS] or None)
def test_bundled_solution_passes(path):
    backend = path.parts[path.parts.index("solutions") + 1]
    assert inspect_program(path.read_text(), backend) == ()


# --------------------------------------------------------------------------------------------
# Robustness
# --------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_garbage_never_raises(text):
    result = inspect_program(text, "cpp")
    assert isinstance(result, tuple) and all(isinstance(v, Violation) for v in result)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_truncated_and_spliced_programs_never_raise(data):
    source = data.draw(st.sampled_from([p.read_text() for p in HACKS[:6] + LEGIT[:3]]))
    start = data.draw(st.integers(0, len(source)))
    stop = data.draw(st.integers(start, len(source)))
    junk = data.draw(st.text(alphabet="()[]{}\"'\\#:<>;=\n abc", max_size=20))
    mutated = source[:start] + junk + source[stop:]
    assert all(isinstance(v, Violation) for v in inspect_program(mutated, "cuda"))
    assert all(isinstance(s, NativeSource) for s in native_sources(mutated))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "x = " + "(" * 3000 + "y" + ")" * 3000,
        "a" + ".b" * 3000,
        'src = """' + "{" * 3000 + '"""\nload_inline(cpp_sources=src)',
        "\x00\x01\ufffe",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return " + "-" * 3000 + "x\n",
    ],
)
def test_pathological_inputs_never_raise(text):
    assert isinstance(inspect_program(text, "cpp"), tuple)
    assert isinstance(native_sources(text), list)


def test_calls_that_resolve_are_admitted() -> None:
    """Builtins, nested helpers and a Triton launch resolve; none of them is an unresolved call."""
    helper = "def clamp_then(t):\n    return module.relu_forward(t)\nif x.dim() != 2:\n    raise ValueError('2-D input')\nreturn clamp_then(x)"
    assert "unresolved-call" not in {v.rule for v in inspect_program(program(helper), "cpp")}


def test_the_kernelbench_preset_waives_unresolved_calls() -> None:
    from kernelgym.verifier.presets import get_preset

    assert "unresolved-call" in get_preset("kernelbench").waived and not get_preset("native").waived
