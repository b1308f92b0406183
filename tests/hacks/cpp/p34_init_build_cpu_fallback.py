# task: level1/1_ReLU
# expect: illegal
# rule: forbidden-native-symbol
# pattern: 34 — load_inline called from __init__ (after import), its C++ computing with an at::cpu:: kernel
"""The extension is built when ModelNew is constructed, not at import, from a source put together at run time.

Builds were once checked only while the module was imported: this one then built with no symbol check.
"""
import torch
from torch import nn
from torch.utils import cpp_extension

NAMESPACE = "".join(map(chr, [97, 116, 58, 58, 99, 112, 117]))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        source = (
            "#include <torch/extension.h>\n#include <ATen/CPUFunctions.h>\n"
            "torch::Tensor relu_forward(torch::Tensor x) { return " + NAMESPACE + "::clamp_min(x, 0); }\n"
        )
        self.ext = cpp_extension.load_inline(name="p34_init", cpp_sources=source, functions=["relu_forward"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.relu_forward(x)
