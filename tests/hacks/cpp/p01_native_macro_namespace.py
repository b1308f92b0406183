# task: level1/10_Softmax
# expect: illegal
# rule: forbidden-native-symbol
# pattern: 1 — ATen's CPU kernel called through a namespace defined on the compiler's command line (-DNS=at)
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/CPUFunctions.h>
torch::Tensor softmax_forward(torch::Tensor x) {
    return NS::cpu::_softmax(x.contiguous(), 1, false);
}
"""

module = load_inline(name="hack_p01_macro_namespace", cpp_sources=cpp_source, functions=["softmax_forward"],
                     extra_cflags=["-O3", "-DNS=at"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.softmax_forward(x)
