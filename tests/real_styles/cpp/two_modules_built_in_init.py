# task: level1/6_Scale_Shift
# rules: native
# expect: ok
# style: two extensions, each built in __init__ (none at import), one scaling and one shifting
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

scale_source = r"""
#include <torch/extension.h>
torch::Tensor scale(torch::Tensor x, double s) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float f = (float)s;
    #pragma omp parallel for
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] * f;
    return out;
}
"""

shift_source = r"""
#include <torch/extension.h>
torch::Tensor shift_(torch::Tensor x, double b) {
    float* p = x.data_ptr<float>();
    const float f = (float)b;
    #pragma omp parallel for
    for (int64_t i = 0; i < x.numel(); ++i) p[i] += f;
    return x;
}
"""


class ModelNew(nn.Module):
    def __init__(self, scale, shift):
        super().__init__()
        self.scale, self.shift = scale, shift
        self.scaler = load_inline(name="scale_ext", cpp_sources=scale_source, functions=["scale"],
                                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
        self.shifter = load_inline(name="shift_ext", cpp_sources=shift_source, functions=["shift_"],
                                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])

    def forward(self, x):
        return self.shifter.shift_(self.scaler.scale(x, self.scale), self.shift)
