# task: level1/1_ReLU
# expect: illegal
# rule: native-torch-compute
# pattern: 1 — the CUDA source defines a kernel but the host function calls at::relu
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_forward(torch::Tensor x) {
    return at::relu(x);
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

module = load_inline(name="hack_c01_native_torch", cpp_sources=cpp_source, cuda_sources=cuda_source,
                     functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
