# task: level1/1_ReLU
# expect: illegal
# rule: try-except-fallback
# pattern: 2 — fallback hidden in a helper reached from forward, using contextlib.suppress
import contextlib

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

module = load_inline(name="hack_p02_suppress", cpp_sources=cpp_source, functions=["relu_forward"])


def _run(x):
    out = x
    with contextlib.suppress(Exception):
        out = module.relu_forward(x)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _run(x)
