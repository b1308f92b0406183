# task: level1/6_Scale_Shift
# expect: ok
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = (
    "#include <torch/extension.h>\n"
    "torch::Tensor scale_shift(torch::Tensor x, double scale, double shift) {\n"
    "    auto xc = x.contiguous();\n"
    "    auto out = torch::empty_like(xc);\n"
    "    const float* in = xc.data_ptr<float>();\n"
    "    float* o = out.data_ptr<float>();\n"
    "    const int64_t n = xc.numel();\n"
    "    #pragma omp parallel for\n"
    "    for (int64_t i = 0; i < n; ++i) o[i] = (float)(in[i] * scale + shift);\n"
    "    return out;\n"
    "}\n"
)

ext = load_inline(name="legit_cpp_scale_shift", cpp_sources=cpp_source, functions=["scale_shift"],
                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, scale: float = 2.0, shift: float = 0.5):
        super().__init__()
        self.scale = float(scale) * 1.0
        self.shift = shift + 0.0
        self.ext = ext

    def forward(self, x):
        n_rows = x.shape[0] * 1
        if n_rows == 0 or x.numel() < 0:
            return torch.empty_like(x)
        return self.ext.scale_shift(x, self.scale, self.shift)
