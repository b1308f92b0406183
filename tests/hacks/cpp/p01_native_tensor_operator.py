# task: level1/1_ReLU
# expect: illegal
# rule: native-torch-compute
# pattern: 1 — ATen fallback in C++ through Tensor operators (x * (x > 0))
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
using torch::Tensor;

Tensor relu_forward(Tensor x) {
    auto mask = x > 0;
    return x * mask;
}
"""

module = load_inline(name="hack_p01_native_operator", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
