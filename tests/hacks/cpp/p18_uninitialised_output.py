# task: level1/1_ReLU
# expect: incorrect
# rule: wrong-output
# pattern: 18 — output from uninitialised memory: the kernel returns empty_like(x) without writing it
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    return torch::empty_like(x);
}
"""

module = load_inline(name="hack_p18_uninitialised", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
