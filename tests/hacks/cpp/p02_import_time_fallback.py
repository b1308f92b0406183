# task: level1/1_ReLU
# expect: illegal
# rule: torch-compute-in-forward
# pattern: 2 — the fallback is chosen at import time (try around load_inline); forward calls an alias that may be torch.relu
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

try:
    impl = load_inline(name="hack_p02_import_time", cpp_sources=cpp_source, functions=["relu_forward"]).relu_forward
except Exception:
    impl = torch.relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return impl(x)
