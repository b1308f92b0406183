import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// The input is viewed as (outer, R, inner) and reduced over R. Sums are kept in double, so the
// result is the correctly rounded sum whatever order the threads add in.

// inner > 1: a block owns 32 consecutive inner positions of one outer index (coalesced reads);
// its 8 rows of threads split R and combine their partial sums in shared memory.
__global__ void __launch_bounds__(256) sum_middle_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                         int64_t R, int64_t inner, int64_t chunks) {
    __shared__ double partial[8][32];
    const int64_t o = blockIdx.x / chunks;
    const int64_t k = (blockIdx.x % chunks) * 32 + threadIdx.x;
    double acc = 0.0;
    if (k < inner) {
        const float* base = x + o * R * inner + k;
        for (int64_t r = threadIdx.y; r < R; r += 8) acc += (double)base[r * inner];
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && k < inner) {
        double total = 0.0;
        for (int i = 0; i < 8; ++i) total += partial[i][threadIdx.x];
        y[o * inner + k] = (float)total;
    }
}

// inner == 1 (the last dimension): one block per row, warp shuffles then shared memory.
__global__ void __launch_bounds__(256) sum_last_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t R) {
    __shared__ double warp_sums[8];
    const float* row = x + (int64_t)blockIdx.x * R;
    double acc = 0.0;
    for (int64_t r = threadIdx.x; r < R; r += 256) acc += (double)row[r];
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int i = 0; i < 8; ++i) total += warp_sums[i];
        y[blockIdx.x] = (float)total;
    }
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i) outer *= xc.size(i);
    for (int64_t i = dim + 1; i < xc.dim(); ++i) inner *= xc.size(i);
    const int64_t R = xc.size(dim);
    std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
    shape[dim] = 1;
    auto y = torch::empty(shape, xc.options());
    if (outer * inner == 0) {
        return y;
    }
    auto stream = c10::cuda::getCurrentCUDAStream();
    if (inner == 1) {
        sum_last_kernel<<<(unsigned int)outer, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), R);
    } else {
        const int64_t chunks = (inner + 31) / 32;
        sum_middle_kernel<<<(unsigned int)(outer * chunks), dim3(32, 8), 0, stream>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), R, inner, chunks);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

module = load_inline(
    name="kb_l1_47_sum_dim",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.sum_dim_forward(x, self.dim)
