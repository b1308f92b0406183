# task: level1/1_ReLU
# expect: illegal
# rule: torch-compute-in-forward
# pattern: 1 — PyTorch fallback hidden behind module aliases and a getattr with a built name
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor touch(torch::Tensor x) { return x; }
"""

module = load_inline(name="hack_p01_alias", cpp_sources=cpp_source, functions=["touch"])
act = getattr(torch, "re" + "lu")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = act

    def forward(self, x):
        return self.fn(module.touch(x))
