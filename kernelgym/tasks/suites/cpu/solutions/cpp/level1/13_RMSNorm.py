from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rms_norm_forward(torch::Tensor x, double eps) {
    auto xc = x.contiguous();
    TORCH_CHECK(xc.dim() >= 1 && xc.numel() > 0, "expected a non-empty tensor");
    const int64_t n = xc.size(-1);
    const int64_t rows = xc.numel() / n;
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t row = 0; row < rows; ++row) {
        const float* a = in + row * n;
        float* o = po + row * n;
        double ss = 0.0;
        for (int64_t j = 0; j < n; ++j) ss += (double)a[j] * (double)a[j];
        const double inv = 1.0 / std::sqrt(ss / (double)n + eps);
        for (int64_t j = 0; j < n; ++j) o[j] = (float)(a[j] * inv);
    }
    return out;
}
"""

module = load_inline(
    name="kg_cpu_rms_norm_forward",
    cpp_sources=cpp_source,
    functions=["rms_norm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return module.rms_norm_forward(x, self.eps)
