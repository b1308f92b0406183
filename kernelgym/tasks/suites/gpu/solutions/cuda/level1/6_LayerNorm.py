import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// Sum over the block; every thread gets the result.
__device__ float block_sum(float v, float* shared) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_sum(lane < (kThreads >> 5) ? shared[lane] : 0.0f);
        if (lane == 0) shared[32] = v;
    }
    __syncthreads();
    const float result = shared[32];
    __syncthreads();
    return result;
}

// One block per row: mean, then the (biased) variance around it, then the affine normalized values.
__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                                              const float* __restrict__ bias, float* __restrict__ y,
                                                              int64_t cols, float eps) {
    __shared__ float shared[33];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += row[j];
    const float mean = block_sum(s, shared) / (float)cols;
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
        const float d = row[j] - mean;
        sq += d * d;
    }
    const float rstd = 1.0f / sqrtf(block_sum(sq, shared) / (float)cols + eps);
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = (row[j] - mean) * rstd * weight[j] + bias[j];
}

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(weight.numel() == x.size(-1) && bias.numel() == x.size(-1), "weight and bias must match the last dim");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows == 0) {
        return y;
    }
    layer_norm_kernel<<<(unsigned int)rows, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

module = load_inline(
    name="kg_gpu_layer_norm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layer_norm_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.layer_norm_forward(x, self.weight, self.bias, self.eps)
