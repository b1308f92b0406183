# task: level2/1_Linear_ReLU
# expect: ok
from typing import Optional

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor linear_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t B = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto out = torch::empty({B, N}, xc.options());
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    #pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double acc = pb[j];
            for (int64_t k = 0; k < K; ++k) acc += (double)px[i * K + k] * pw[j * K + k];
            po[i * N + j] = (float)acc;
        }
    return out;
}

void relu_inplace(torch::Tensor y) {
    float* p = y.data_ptr<float>();
    const int64_t n = y.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
}
"""

module = load_inline(
    name="legit_cpp_helper_inplace",
    cpp_sources=cpp_source,
    functions=["linear_forward", "relu_inplace"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def _activate(self, y: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:
        module.relu_inplace(y)
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.size(0)
        assert x.dim() == 2 and batch > 0 and x.shape[1] == self.linear.in_features
        y = module.linear_forward(x, self.linear.weight, self.linear.bias)
        return self._activate(y)
