# task: level1/1_ReLU
# expect: illegal
# rule: torch-compute-in-forward
# pattern: 7 — in-place PyTorch op on the input (x.relu_()) mutates the input and is a PyTorch fallback
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor copy_out(torch::Tensor x) { return x.contiguous(); }
"""

module = load_inline(name="hack_p07_inplace", cpp_sources=cpp_source, functions=["copy_out"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.relu_()
        return module.copy_out(x)
