import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

// A * s, with s rounded to float first as PyTorch does for a Python scalar.
// Grid-stride loop over float4s (when both pointers are 16-byte aligned), then the scalar tail.
__global__ void __launch_bounds__(256) scale_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float s, bool vec) {
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (vec) {
        const int64_t n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = start; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = v.x * s;
            v.y = v.y * s;
            v.z = v.z * s;
            v.w = v.w * s;
            y4[i] = v;
        }
        done = n4 << 2;
    }
    for (int64_t i = done + start; i < n; i += stride) y[i] = x[i] * s;
}

torch::Tensor scale_forward(torch::Tensor x, double s) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) {
        return y;
    }
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>(((vec ? n / 4 : n) + threads - 1) / threads + 1, 8192);
    scale_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(xp, yp, n, (float)s, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor scale_forward(torch::Tensor x, double s);"

module = load_inline(
    name="kb_l1_5_scalar_mul",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return module.scale_forward(A, s)
