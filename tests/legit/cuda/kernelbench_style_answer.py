# task: level1/1_ReLU
# expect: ok
import os

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 - LLM answers often keep unused imports
from torch.utils.cpp_extension import load_inline

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* a, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] > 0 ? a[idx] : 0;
    }
}

torch::Tensor relu_cuda(torch::Tensor a) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;

    relu_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), out.data_ptr<float>(), size);

    return out;
}
"""

relu_cpp_source = (
    "torch::Tensor relu_cuda(torch::Tensor a);"
)

relu = load_inline(
    name="relu",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_source,
    functions=["relu_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = relu

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.relu.relu_cuda(a)


batch_size = 4096
dim = 4096


def get_inputs():
    a = torch.randn(batch_size, dim).cuda()
    return [a]


def get_init_inputs():
    return []
