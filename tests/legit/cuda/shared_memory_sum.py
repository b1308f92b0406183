# task: level1/1_ReLU
# expect: ok
"""ReLU with a vectorized float4 path and a scalar tail; __shared__ is used for a block-local staging buffer."""
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ float relu1(float v) { return v > 0.f ? v : 0.f; }

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    __shared__ float4 stage[256];
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        stage[threadIdx.x] = x[i];
        float4 v = stage[threadIdx.x];
        v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
        y[i] = v;
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    const int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu1(x[i]);
}

torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int64_t n4 = n / 4;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (n4 > 0) {
        relu_vec4<<<(unsigned)((n4 + 255) / 256), 256, 0, stream>>>(
            reinterpret_cast<const float4*>(xc.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n - n4 * 4 > 0) {
        relu_tail<<<1, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    return y;
}
"""

module = load_inline(
    name="legit_cuda_vec4",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=[cuda_source],
    functions=["relu_forward"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = module.relu_forward(x.view(-1))
        return out.view(x.shape)
