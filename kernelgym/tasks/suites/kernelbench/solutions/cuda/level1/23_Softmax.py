import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Reduces v over the block; every thread gets the result. `is_max` picks max or sum.
__device__ float block_reduce(float v, bool is_max, float* shared) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const float identity = is_max ? -INFINITY : 0.0f;
        v = lane < (kThreads >> 5) ? shared[lane] : identity;
        v = is_max ? warp_max(v) : warp_sum(v);
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    const float result = shared[32];
    __syncthreads();
    return result;
}

// One block per row: the row's max, then the sum of exponentials, then the normalized values.
__global__ void __launch_bounds__(kThreads) softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float shared[33];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) m = fmaxf(m, row[j]);
    m = block_reduce(m, true, shared);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += expf(row[j] - m);
    s = block_reduce(s, false, shared);
    const float inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = expf(row[j] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0);
    const int64_t cols = xc.size(1);
    if (rows == 0 || cols == 0) {
        return y;
    }
    softmax_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

module = load_inline(
    name="kg_gpu_softmax",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.softmax_forward(x)
