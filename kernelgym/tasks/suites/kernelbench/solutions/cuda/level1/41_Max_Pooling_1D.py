import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// One thread per output element of an (N*C, L) input; padding counts as -inf and NaN wins, as in
// torch.nn.MaxPool1d. Consecutive threads read consecutive positions.
__global__ void __launch_bounds__(256) max_pool1d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                                                         int64_t L, int64_t OL, int k, int s, int p, int d) {
    const int64_t total = rows * OL;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int64_t o = idx % OL;
        const float* xr = x + (idx / OL) * L;
        float best = -INFINITY;
        for (int i = 0; i < k; ++i) {
            const int64_t pos = o * s - p + (int64_t)i * d;
            if (pos < 0 || pos >= L) continue;
            const float v = xr[pos];
            if (v > best || isnan(v)) best = v;
            if (isnan(best)) break;
        }
        y[idx] = best;
    }
}

torch::Tensor max_pool1d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p, int64_t d) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() == 3, "x must be (N, C, L)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    const int64_t L = xc.size(2);
    const int64_t OL = (L + 2 * p - d * (k - 1) - 1) / s + 1;
    TORCH_CHECK(OL > 0, "pooling window larger than the input");
    auto y = torch::empty({xc.size(0), xc.size(1), OL}, xc.options());
    const int64_t rows = xc.size(0) * xc.size(1);
    if (rows == 0) {
        return y;
    }
    const int blocks = (int)std::min<int64_t>((rows * OL + 255) / 256, 8192);
    max_pool1d_kernel<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), rows, L, OL, (int)k, (int)s, (int)p, (int)d);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor max_pool1d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p, int64_t d);"

module = load_inline(
    name="kb_l1_41_max_pool1d",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["max_pool1d_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0, dilation: int = 1, return_indices: bool = False):
        super().__init__()
        if return_indices:
            raise ValueError("this answer returns the pooled values only")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.max_pool1d_forward(x, self.kernel_size, self.stride, self.padding, self.dilation)
