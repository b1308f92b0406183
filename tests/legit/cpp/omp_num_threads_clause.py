# task: level1/3_Tanh
# expect: ok
"""Tanh with ``#pragma omp parallel for num_threads(8)``: a team larger than the CPUs the judge grants.

The extension's OpenMP pool grows to eight threads at the first call and keeps them idle between calls.
"""
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor tanh_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for num_threads(8) schedule(static)
    for (int64_t i = 0; i < n; ++i) o[i] = std::tanh(in[i]);
    return out;
}
"""

module = load_inline(
    name="legit_cpp_omp_num_threads_clause",
    cpp_sources=cpp_source,
    functions=["tanh_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.tanh_forward(x)
