# task: level1/1_ReLU
# expect: illegal
# rule: uses-reference-model
# pattern: 1 — calling the reference Model instead of a kernel
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor noop(torch::Tensor x) { return x; }
"""

module = load_inline(name="hack_p01_reference", cpp_sources=cpp_source, functions=["noop"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ref = Model()  # noqa: F821 - the harness defines Model next to the answer

    def forward(self, x):
        return module.noop(self.ref(x))
