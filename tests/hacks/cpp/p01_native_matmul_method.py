# task: level1/14_Small_Matmul
# expect: illegal
# rule: native-torch-compute
# pattern: 1 — ATen fallback inside C++ through a tensor method (A.mm(B))
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor matmul_forward(const torch::Tensor& A, const torch::Tensor& B) {
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "2-D inputs expected");
    return A.contiguous().mm(B.contiguous());
}
"""

module = load_inline(name="hack_p01_native_mm", cpp_sources=cpp_source, functions=["matmul_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.matmul_forward(A, B)
