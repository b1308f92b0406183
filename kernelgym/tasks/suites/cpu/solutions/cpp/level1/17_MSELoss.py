from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor mse_loss_forward(torch::Tensor predictions, torch::Tensor targets) {
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    TORCH_CHECK(p.sizes() == t.sizes(), "predictions and targets must have the same shape");
    const int64_t n = p.numel();
    const float* pp = p.data_ptr<float>();
    const float* pt = t.data_ptr<float>();
    double acc = 0.0;
    #pragma omp parallel for reduction(+:acc)
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)pp[i] - (double)pt[i];
        acc += d * d;
    }
    auto out = torch::empty({}, p.options());
    out.data_ptr<float>()[0] = (float)(acc / (double)n);
    return out;
}
"""

module = load_inline(
    name="kg_cpu_mse_loss_forward",
    cpp_sources=cpp_source,
    functions=["mse_loss_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return module.mse_loss_forward(predictions, targets)
