import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

// One block per row: the sum of squares, then every element divided by max(norm, eps) as F.normalize does.
__global__ void __launch_bounds__(kThreads) l2_normalize_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                                int64_t cols, float eps) {
    __shared__ float shared[kThreads / 32 + 1];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) acc = fmaf(row[j], row[j], acc);
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) shared[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
        shared[kThreads / 32] = fmaxf(sqrtf(total), eps);
    }
    __syncthreads();
    const float denom = shared[kThreads / 32];
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = row[j] / denom;
}

torch::Tensor l2_normalize_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0);
    if (rows == 0 || xc.size(1) == 0) {
        return y;
    }
    l2_normalize_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1), 1e-12f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor l2_normalize_forward(torch::Tensor x);"

module = load_inline(
    name="kg_gpu_l2_normalize",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["l2_normalize_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.l2_normalize_forward(x)
