# task: level1/2_Sigmoid
# rules: native
# expect: ok
# style: nothing is built at import or in __init__: the first forward builds and keeps the extension
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor sigmoid_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = 1.0f / (1.0f + std::exp(-in[i]));
    return out;
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ext = None

    def forward(self, x):
        if self._ext is None:
            self._ext = load_inline(name="sigmoid_lazy", cpp_sources=source, functions=["sigmoid_forward"],
                                    extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
        return self._ext.sigmoid_forward(x)
