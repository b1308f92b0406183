import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// diag(A) @ B scales row i of B by A[i]: one pass over B, no zero products.
__global__ void __launch_bounds__(256) diag_matmul_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                                          float* __restrict__ c, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        c[i] = a[i / cols] * b[i];
    }
}

torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(a.dim() == 1 && b.dim() == 2 && a.size(0) == b.size(0), "expected A of shape (N,) and B of shape (N, M)");
    const c10::cuda::CUDAGuard guard(b.device());
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto c = torch::empty_like(bc);
    const int64_t rows = bc.size(0), cols = bc.size(1);
    if (rows == 0 || cols == 0) {
        return c;
    }
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((rows * cols + threads - 1) / threads, 8192);
    diag_matmul_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

cpp_source = "torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor b);"

module = load_inline(
    name="kb_l1_12_diag_matmul",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["diag_matmul_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return module.diag_matmul_forward(A, B)
