from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor cross_entropy_forward(torch::Tensor predictions, torch::Tensor targets) {
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    TORCH_CHECK(p.dim() == 2 && t.dim() == 1 && t.size(0) == p.size(0), "logits (B, C), targets (B,)");
    const int64_t B = p.size(0), C = p.size(1);
    const float* pp = p.data_ptr<float>();
    const int64_t* pt = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < B; ++i) TORCH_CHECK(pt[i] >= 0 && pt[i] < C, "target out of range");
    double total = 0.0;
    #pragma omp parallel for reduction(+:total)
    for (int64_t i = 0; i < B; ++i) {
        const float* a = pp + i * C;
        float m = a[0];
        for (int64_t j = 1; j < C; ++j) m = a[j] > m ? a[j] : m;
        double s = 0.0;
        for (int64_t j = 0; j < C; ++j) s += std::exp((double)(a[j] - m));
        total += (double)m + std::log(s) - (double)a[pt[i]];
    }
    auto out = torch::empty({}, p.options());
    out.data_ptr<float>()[0] = (float)(total / (double)B);
    return out;
}
"""

module = load_inline(
    name="kg_cpu_cross_entropy_forward",
    cpp_sources=cpp_source,
    functions=["cross_entropy_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return module.cross_entropy_forward(predictions, targets)
