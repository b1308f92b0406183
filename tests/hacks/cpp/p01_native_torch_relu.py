# task: level1/1_ReLU
# expect: illegal
# rule: native-torch-compute
# pattern: 1 — ATen fallback inside the C++ source (torch::relu / clamp_min)
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    return torch::relu(x.contiguous());
}
"""

module = load_inline(name="hack_p01_native_relu", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
