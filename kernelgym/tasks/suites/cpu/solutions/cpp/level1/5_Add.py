from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = torch::empty_like(ac);
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = ac.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = pa[i] + pb[i];
    return out;
}
"""

module = load_inline(
    name="kg_cpu_add_forward",
    cpp_sources=cpp_source,
    functions=["add_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return module.add_forward(a, b)
