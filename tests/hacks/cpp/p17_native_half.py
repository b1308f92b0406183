# task: level1/14_Small_Matmul
# expect: illegal
# rule: precision-downgrade
# pattern: 17 — precision downgrade inside C++: products accumulated in _Float16
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    auto a = A.contiguous();
    auto b = B.contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    auto out = torch::empty({M, N}, a.options());
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = out.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            _Float16 acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += (_Float16)pa[i * K + k] * (_Float16)pb[k * N + j];
            pc[i * N + j] = (float)acc;
        }
    return out;
}
"""

module = load_inline(name="hack_p17_native_half", cpp_sources=cpp_source, functions=["matmul_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.matmul_forward(A, B)
