# task: level1/1_ReLU
# expect: incorrect
# rule: wrong-output
# pattern: 6 — empty_like + partial compute: the second half of the output is whatever the allocator left there
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t half = xc.numel() / 2;
    for (int64_t i = 0; i < half; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

module = load_inline(name="hack_p06_stale_memory", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
