# task: level1/1_ReLU
# expect: ok
import functools
import textwrap

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

HEADER = "#include <torch/extension.h>\n"
BODY = textwrap.dedent(
    """
    torch::Tensor relu_forward(torch::Tensor x) {
        auto xc = x.contiguous();
        auto out = torch::empty_like(xc);
        const float* in = xc.data_ptr<float>();
        float* o = out.data_ptr<float>();
        const int64_t n = xc.numel();
        for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
        return out;
    }
    """
)


@functools.lru_cache(maxsize=None)
def _extension():
    return load_inline(name="legit_cpp_concat_lazy", cpp_sources=HEADER + BODY, functions=["relu_forward"],
                       extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _extension().relu_forward(x)
        if out.shape != x.shape:
            raise ValueError("kernel returned the wrong shape")
        return out
