# task: level1/1_ReLU
# expect: illegal
# rule: unverified-library
# pattern: 34 — loads a native library it wrote itself (a copy of its own build, under another name) with dlopen
"""The judge built and checked one library; the answer copies it into its own directory and loads the copy.

A file the candidate wrote is never trusted code, whatever its bytes: it could hold anything.
"""
import logging

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (long i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""

module = load_inline(name="p34_ctypes", cpp_sources=cpp_source, functions=["relu_forward"])
# A copy of the checked library, written through logging's file handler and loaded with ctypes.
data = module.__loader__.get_data(module.__file__)
handler = logging.FileHandler("own_library.bin", mode="w", encoding="latin-1")
handler.stream.write(data.decode("latin-1"))
handler.close()
torch.ctypes.CDLL("./own_library.bin")  # ctypes, reached through torch, which imports it


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.relu_forward(x.contiguous())
