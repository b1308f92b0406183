import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// A running (max, sum of exp(x - max)) pair; merging two pairs rescales the smaller side.
struct MaxSum {
    float m;
    float s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// One block per row: one pass for the row's max and normaliser (online softmax), one to write.
__global__ void __launch_bounds__(kThreads) softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ MaxSum warp_pairs[kWarps];
    __shared__ MaxSum row_pair;
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    MaxSum p = {-INFINITY, 0.0f};
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
        const float v = row[j];
        if (v > p.m) {
            p.s = p.s * expf(p.m - v) + 1.0f;
            p.m = v;
        } else {
            p.s += expf(v - p.m);
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        MaxSum q = {__shfl_down_sync(0xffffffffu, p.m, offset), __shfl_down_sync(0xffffffffu, p.s, offset)};
        p = merge(p, q);
    }
    if ((threadIdx.x & 31) == 0) warp_pairs[threadIdx.x >> 5] = p;
    __syncthreads();
    if (threadIdx.x == 0) {
        MaxSum total = warp_pairs[0];
        for (int w = 1; w < kWarps; ++w) total = merge(total, warp_pairs[w]);
        row_pair = total;
    }
    __syncthreads();
    const float m = row_pair.m;
    const float inv = 1.0f / row_pair.s;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) out[j] = expf(row[j] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (softmax over dim 1)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
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
    name="kb_l1_23_softmax",
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
