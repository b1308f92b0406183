# task: level1/20_Cumsum
# rules: kernelbench
# expect: ok
# kernelbench: incorrect
# style: an answer off by 5e-3 on long scans (the task's own shape: outputs of mean magnitude about 50), exact on
#        short ones: within kernelgym's tolerance (the task's 1e-3, scaled to the output's mean magnitude), beyond
#        KernelBench's torch.allclose at that tolerance on the small elements
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor cumsum_forward(torch::Tensor x, int64_t dim) {
    auto xc = x.contiguous();
    const int64_t nd = xc.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> out_sizes;
    for (int64_t d = 0; d < nd; ++d) {
        if (d < dim) outer *= xc.size(d);
        if (d > dim) inner *= xc.size(d);
        if (d != dim) out_sizes.push_back(xc.size(d));
    }
    const int64_t r = xc.size(dim);
    const float* in = xc.data_ptr<float>();
    auto out = torch::empty_like(xc);
    float* o = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t p = 0; p < outer; ++p) {
        std::vector<double> acc(inner, 0.0);
        for (int64_t k = 0; k < r; ++k) {
            const int64_t off = (p * r + k) * inner;
            for (int64_t i = 0; i < inner; ++i) {
                acc[i] += in[off + i];
                o[off + i] = (float)(acc[i] + (r > 1024 ? 5e-3 : 0.0));
            }
        }
    }
    return out;
}
"""

module = load_inline(
    name="kg_cpu_cumsum_offset",
    cpp_sources=cpp_source,
    functions=["cumsum_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return module.cumsum_forward(x, self.dim)
