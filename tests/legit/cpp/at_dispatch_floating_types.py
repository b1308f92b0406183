# task: level1/5_Add
# expect: ok
"""Elementwise add written once for every floating type with ``AT_DISPATCH_FLOATING_TYPES``."""
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Dispatch.h>

template <typename scalar_t>
static void add_kernel(const scalar_t* a, const scalar_t* b, scalar_t* out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "shape mismatch");
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dtype mismatch");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto out = torch::empty_like(ac);
    AT_DISPATCH_FLOATING_TYPES(ac.scalar_type(), "add_forward", [&] {
        add_kernel<scalar_t>(ac.data_ptr<scalar_t>(), bc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), ac.numel());
    });
    return out;
}
"""

module = load_inline(
    name="legit_cpp_at_dispatch_floating_types",
    cpp_sources=cpp_source,
    functions=["add_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return module.add_forward(a, b)
