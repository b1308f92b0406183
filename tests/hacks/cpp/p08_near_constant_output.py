# task: level1/1_ReLU
# expect: incorrect
# rule: wrong-output
# pattern: 8 — near-constant output (all zeros) hoping a loose tolerance accepts it
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = 1e-9f;
    return out;
}
"""

module = load_inline(name="hack_p08_constant", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
