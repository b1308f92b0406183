# task: level2/2_Scale_Tanh_Add
# rules: native
# expect: ok
# style: the source is specialised to the constructor's arguments (the feature count and the scale are compile-time
#        constants), so every shape with another feature count asks for another build, in __init__
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

template = r"""
#include <torch/extension.h>
#include <cmath>
constexpr int64_t DIM = {dim};
constexpr float SCALE = {scale}f;
torch::Tensor scale_tanh_add(torch::Tensor x, torch::Tensor bias) {{
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    const float* b = bias.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t rows = xc.numel() / DIM;
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < DIM; ++j) o[r * DIM + j] = std::tanh(in[r * DIM + j] * SCALE) + b[j];
    return out;
}}
"""


class ModelNew(nn.Module):
    def __init__(self, dim, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.ext = load_inline(name=f"sta_{dim}", cpp_sources=template.format(dim=dim, scale=repr(float(scale))),
                               functions=["scale_tanh_add"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])

    def forward(self, x):
        return self.ext.scale_tanh_add(x, self.bias)
