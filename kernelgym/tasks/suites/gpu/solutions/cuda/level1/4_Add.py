import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        const float4 u = a[i];
        const float4 v = b[i];
        y[i] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
}

__global__ void add_scalar_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                                  int64_t start, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a[i] + b[i];
    }
}

static bool aligned16(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "inputs must have the same shape");
    const c10::cuda::CUDAGuard guard(a.device());
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto y = torch::empty_like(ac);
    const int64_t n = ac.numel();
    const bool vectorized = aligned16(ac.data_ptr<float>()) && aligned16(bc.data_ptr<float>()) && aligned16(y.data_ptr<float>());
    const int64_t n4 = vectorized ? n / 4 : 0;
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    // Read four floats at a time where all three pointers allow it; the rest element by element.
    if (n4 > 0) {
        const int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, 8192);
        add_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(ac.data_ptr<float>()),
                                                   reinterpret_cast<const float4*>(bc.data_ptr<float>()),
                                                   reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n > n4 * 4) {
        const int blocks = (int)std::min<int64_t>((n - n4 * 4 + threads - 1) / threads, 8192);
        add_scalar_kernel<<<blocks, threads, 0, stream>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                                                          n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

cpp_source = "torch::Tensor add_forward(torch::Tensor a, torch::Tensor b);"

module = load_inline(
    name="kg_gpu_add",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return module.add_forward(a, b)
