import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// LayerNorm over rows of `cols` elements (the normalized shape, flattened), in three launches:
// partial sums of x and x^2 per (row, chunk) in double; the row's mean and 1/std; the affine output.
constexpr int kThreads = 256;
constexpr int kChunks = 128;

__device__ double block_sum(double v, double* shared) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0) {
        for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
    }
    __syncthreads();
    return total;  // valid in thread 0
}

__global__ void __launch_bounds__(kThreads) partial_stats_kernel(const float* __restrict__ x, double* __restrict__ partial,
                                                                 int64_t cols) {
    __shared__ double shared[kThreads / 32];
    const int64_t row = blockIdx.y;
    const int64_t per_chunk = (cols + kChunks - 1) / kChunks;
    const int64_t begin = blockIdx.x * per_chunk;
    const int64_t end = begin + per_chunk < cols ? begin + per_chunk : cols;
    const float* xr = x + row * cols;
    double s = 0.0, q = 0.0;
    for (int64_t j = begin + threadIdx.x; j < end; j += kThreads) {
        const double v = xr[j];
        s += v;
        q += v * v;
    }
    s = block_sum(s, shared);
    q = block_sum(q, shared);
    if (threadIdx.x == 0) {
        partial[(row * kChunks + blockIdx.x) * 2] = s;
        partial[(row * kChunks + blockIdx.x) * 2 + 1] = q;
    }
}

__global__ void row_stats_kernel(const double* __restrict__ partial, float* __restrict__ stats, int64_t rows, int64_t cols,
                                 double eps) {
    const int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    double s = 0.0, q = 0.0;
    for (int c = 0; c < kChunks; ++c) {
        s += partial[(row * kChunks + c) * 2];
        q += partial[(row * kChunks + c) * 2 + 1];
    }
    const double mean = s / (double)cols;
    double var = q / (double)cols - mean * mean;
    if (var < 0.0) var = 0.0;
    stats[row * 2] = (float)mean;
    stats[row * 2 + 1] = (float)(1.0 / sqrt(var + eps));
}

__global__ void __launch_bounds__(kThreads) normalize_kernel(const float* __restrict__ x, const float* __restrict__ stats,
                                                             const float* __restrict__ w, const float* __restrict__ b,
                                                             float* __restrict__ y, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int64_t row = i / cols, j = i % cols;
        const float v = (x[i] - stats[row * 2]) * stats[row * 2 + 1];
        y[i] = v * w[j] + b[j];
    }
}

torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32, "parameters must be float32");
    const int64_t cols = weight.numel();
    TORCH_CHECK(cols > 0 && bias.numel() == cols && x.numel() % cols == 0, "x does not end with the normalized shape");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.numel() / cols;
    if (rows == 0) {
        return y;
    }
    auto partial = torch::empty({rows, kChunks, 2}, xc.options().dtype(torch::kFloat64));
    auto stats = torch::empty({rows, 2}, xc.options());
    auto stream = c10::cuda::getCurrentCUDAStream();
    partial_stats_kernel<<<dim3(kChunks, (unsigned int)rows), kThreads, 0, stream>>>(
        xc.data_ptr<float>(), partial.data_ptr<double>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    row_stats_kernel<<<(unsigned int)((rows + 127) / 128), 128, 0, stream>>>(
        partial.data_ptr<double>(), stats.data_ptr<float>(), rows, cols, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int blocks = (int)std::min<int64_t>((rows * cols + kThreads - 1) / kThreads, 8192);
    normalize_kernel<<<blocks, kThreads, 0, stream>>>(xc.data_ptr<float>(), stats.data_ptr<float>(), wc.data_ptr<float>(),
                                                      bc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

module = load_inline(
    name="kb_l1_40_layer_norm",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layer_norm_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
