# task: level1/10_Softmax
# expect: illegal
# rule: forbidden-native-symbol
# pattern: 1 — ATen's CPU kernel called directly, its namespace hidden by `using namespace at`
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
using namespace at;
torch::Tensor softmax_forward(torch::Tensor x) {
    return cpu::_softmax(x.contiguous(), 1, false);
}
"""

module = load_inline(name="hack_p01_using_namespace_at", cpp_sources=cpp_source, functions=["softmax_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.softmax_forward(x)
