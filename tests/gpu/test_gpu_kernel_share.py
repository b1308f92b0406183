"""The profiling share on a real GPU: the bundled answers run in their own kernels; a lazy answer is flagged.

Marked ``gpu`` (skipped without CUDA). Under ``--rules kernelbench``: the bundled CUDA and Triton answers of the
``gpu`` suite's ReLU and Matmul spend nearly all their device time in their own kernels; an answer that leaves the
matrix product to ``torch.matmul`` and writes one copy kernel of its own is ``ok``, with a low share and the flag
``lazy-optimization``.
"""

from __future__ import annotations

import pytest

from kernelgym import Verifier
from kernelgym.tasks import load_suite
from kernelgym.verifier import Status, VerifierConfig

pytestmark = pytest.mark.gpu

SUITE = load_suite("gpu")
CONFIG = VerifierConfig(rules="kernelbench", runs=20, warmup=2)

LAZY_MATMUL = r'''
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAStream.h>

__global__ void copy_out(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        y[i] = x[i];
    }
}

torch::Tensor copy_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    copy_out<<<1024, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""

module = load_inline(name="kg_lazy_matmul", cpp_sources="torch::Tensor copy_forward(torch::Tensor x);",
                     cuda_sources=cuda_source, functions=["copy_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return module.copy_forward(torch.matmul(a, b).contiguous())
'''


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    jobs = {"relu-cuda": ("level1/1_ReLU", "cuda", SUITE["level1/1_ReLU"].solution("cuda")),
            "matmul-cuda": ("level1/9_Matmul", "cuda", SUITE["level1/9_Matmul"].solution("cuda")),
            "matmul-lazy": ("level1/9_Matmul", "cuda", LAZY_MATMUL)}
    out = {}
    with Verifier(backend="cuda", config=CONFIG) as verifier:
        for name, (task_id, _backend, code) in jobs.items():
            out[name] = verifier.evaluate(SUITE[task_id], code)
    return out


def test_bundled_answers_run_in_their_own_kernels(results) -> None:
    for name in ("relu-cuda", "matmul-cuda"):
        result = results[name]
        assert result.status is Status.OK, result.feedback
        assert result.own_kernel_share is not None and result.own_kernel_share > 0.9, (name, result.feedback)
        assert "lazy-optimization" not in result.flags


def test_a_lazy_answer_is_flagged(results) -> None:
    result = results["matmul-lazy"]
    assert result.status is Status.OK, result.feedback
    assert result.own_kernel_share is not None and result.own_kernel_share < 0.2, result.feedback
    assert "lazy-optimization" in result.flags
    assert "Your own kernels ran" in result.feedback
