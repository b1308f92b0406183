# task: level2/1_Linear_ReLU
# expect: illegal
# rule: torch-compute-in-forward
# pattern: 1 — the kernel does the matmul but the bias add and ReLU are Python tensor operators
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor matmul_t(torch::Tensor x, torch::Tensor w) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t B = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto out = torch::empty({B, N}, xc.options());
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) acc += px[b * K + k] * pw[n * K + k];
            po[b * N + n] = acc;
        }
    return out;
}
"""

module = load_inline(name="hack_p01_operator", cpp_sources=cpp_source, functions=["matmul_t"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = module.matmul_t(x, self.linear.weight) + self.linear.bias
        return y * (y > 0)
