# task: level1/12_LayerNorm
# expect: ok
# The bias is registered before the weight, under names that are not the reference's: `b` and `g` say which is
# which (the reference's `ln.weight` and `ln.bias` have equal shapes, so registration order alone would swap them).
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layer_norm_affine(torch::Tensor x, torch::Tensor gain, torch::Tensor shift, double eps) {
    auto xc = x.contiguous();
    auto gc = gain.contiguous();
    auto sc = shift.contiguous();
    const int64_t n = gc.numel();
    TORCH_CHECK(n > 0 && sc.numel() == n && xc.numel() % n == 0, "x must end with the gain's shape");
    const int64_t rows = xc.numel() / n;
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    const float* g = gc.data_ptr<float>();
    const float* b = sc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t row = 0; row < rows; ++row) {
        const float* a = in + row * n;
        float* o = po + row * n;
        double mean = 0.0;
        for (int64_t j = 0; j < n; ++j) mean += a[j];
        mean /= (double)n;
        double var = 0.0;
        for (int64_t j = 0; j < n; ++j) var += ((double)a[j] - mean) * ((double)a[j] - mean);
        const double rstd = 1.0 / std::sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; ++j) o[j] = (float)(((double)a[j] - mean) * rstd * g[j] + b[j]);
    }
    return out;
}
"""

module = load_inline(
    name="legit_kg_cpu_layer_norm_bias_first",
    cpp_sources=cpp_source,
    functions=["layer_norm_affine"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.b = nn.Parameter(torch.zeros(normalized_shape))
        self.g = nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        return module.layer_norm_affine(x, self.g, self.b, 1e-5)
