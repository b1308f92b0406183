# task: level1/14_Small_Matmul
# expect: ok
from torch import nn
from torch.utils.cpp_extension import load_inline

# The C++ below uses a local lambda, std::vector and std::max; its comments mention torch::matmul.
cpp_source = r"""
#include <torch/extension.h>
#include <algorithm>
#include <vector>

torch::Tensor matmul_forward(const torch::Tensor& A, const torch::Tensor& B) {
    // A plain torch::matmul(A, B) would be an ATen fallback; we tile by hand instead.
    /* at::mm and A.mm(B) are not allowed either. */
    auto a = A.contiguous();
    auto b = B.contiguous();
    TORCH_CHECK(a.size(1) == b.size(0), "inner dimensions differ");
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    auto out = torch::zeros({M, N}, a.options());
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = out.data_ptr<float>();
    const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(32, K));
    auto row_block = [&](int64_t i, int64_t k0, int64_t k1, std::vector<double>& acc) {
        for (int64_t k = k0; k < k1; ++k) {
            const double aik = pa[i * K + k];
            for (int64_t j = 0; j < N; ++j) acc[j] += aik * pb[k * N + j];
        }
    };
    #pragma omp parallel for
    for (int64_t i = 0; i < M; ++i) {
        std::vector<double> acc(N, 0.0);
        for (int64_t k0 = 0; k0 < K; k0 += tile) row_block(i, k0, std::min(K, k0 + tile), acc);
        for (int64_t j = 0; j < N; ++j) pc[i * N + j] = static_cast<float>(acc[j]);
    }
    return out;
}
"""

module = load_inline(
    name="legit_cpp_lambda_vector",
    cpp_sources=[cpp_source],
    functions=["matmul_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return module.matmul_forward(A.contiguous(), B.contiguous())
