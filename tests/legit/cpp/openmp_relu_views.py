# task: level1/1_ReLU
# expect: ok
"""ReLU with OpenMP; forward allocates with torch.empty, reshapes, and calls the kernel twice (two halves).

A docstring may mention torch.matmul, torch.relu(x) or Model without any rule firing.
"""
import math

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// Writes relu(x) into out; both must be contiguous float32 tensors of equal size.
// (A comment naming torch::matmul(a, b) or at::relu(x) is not code.)
void relu_into(torch::Tensor x, torch::Tensor out) {
    TORCH_CHECK(x.numel() == out.numel(), "size mismatch");
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = x.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = v > 0.0f ? v : 0.0f;
    }
}
"""

module = load_inline(
    name="legit_cpp_openmp_relu_views",
    cpp_sources=cpp_source,
    functions=["relu_into"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    """Same interface as the reference; the docstring says torch.matmul and that is fine."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # torch.relu(x) would be a fallback; this comment is not code.
        flat = x.contiguous().view(-1)
        out = torch.empty(flat.shape, dtype=x.dtype, device=x.device)
        half = math.ceil(flat.numel() / 2)
        module.relu_into(flat[:half], out[:half])
        module.relu_into(flat[half:], out[half:])
        return out.reshape(x.shape)
