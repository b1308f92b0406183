import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

// NaN stays NaN, as torch.relu keeps it.
__device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }

// Grid-stride loop over float4s (when both pointers are 16-byte aligned), then the scalar tail.
__global__ void __launch_bounds__(256) relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, bool vec) {
    const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (vec) {
        const int64_t n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int64_t i = start; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = relu(v.x);
            v.y = relu(v.y);
            v.z = relu(v.z);
            v.w = relu(v.w);
            y4[i] = v;
        }
        done = n4 << 2;
    }
    for (int64_t i = done + start; i < n; i += stride) y[i] = relu(x[i]);
}

torch::Tensor relu_forward(torch::Tensor x) {
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
    relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(xp, yp, n, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

module = load_inline(
    name="kb_l1_19_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.relu_forward(x)
