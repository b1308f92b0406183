import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// x viewed as [outer, reduce, inner]; one thread per (outer, inner) output walks the reduced
// dimension. Neighbouring threads read neighbouring inner elements, so every load is coalesced.
__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t reduce,
                               int64_t inner) {
    const int64_t index = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= outer * inner) return;
    const int64_t o = index / inner;
    const int64_t i = index % inner;
    const float* p = x + o * reduce * inner + i;
    float acc = 0.0f;
#pragma unroll 8
    for (int64_t r = 0; r < reduce; ++r) acc += p[r * inner];
    y[index] = acc;
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    const int64_t reduce = xc.size(dim);
    std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
    shape[dim] = 1;
    auto y = torch::empty(shape, xc.options());
    const int64_t total = outer * inner;
    if (total == 0) {
        return y;
    }
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    sum_dim_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), outer, reduce, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

module = load_inline(
    name="kg_gpu_sum_dim",
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
