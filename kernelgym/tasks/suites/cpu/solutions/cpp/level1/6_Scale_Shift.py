from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor scale_shift_forward(torch::Tensor x, double scale, double shift) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float s = (float)scale, t = (float)shift;
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] * s + t;
    return out;
}
"""

module = load_inline(
    name="kg_cpu_scale_shift_forward",
    cpp_sources=cpp_source,
    functions=["scale_shift_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, scale, shift):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        return module.scale_shift_forward(x, self.scale, self.shift)
