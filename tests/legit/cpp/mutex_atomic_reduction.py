# task: level1/17_MSELoss
# expect: ok
"""Mean squared error reduced across OpenMP threads with ``std::atomic`` and ``std::mutex``/``std::lock_guard``.

Each thread sums its share in double; the partial sums are combined under a lock, and an atomic counts the
threads that contributed (checked before the result is written).
"""
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>
#include <atomic>
#include <mutex>

torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets) {
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    TORCH_CHECK(p.numel() == t.numel(), "size mismatch");
    const float* pp = p.data_ptr<float>();
    const float* pt = t.data_ptr<float>();
    const int64_t n = p.numel();
    double total = 0.0;
    std::mutex total_lock;
    std::atomic<int> contributors{0};
    int team = 1;
    #pragma omp parallel
    {
        double partial = 0.0;
        #pragma omp for schedule(static) nowait
        for (int64_t i = 0; i < n; ++i) {
            const double d = static_cast<double>(pp[i]) - static_cast<double>(pt[i]);
            partial += d * d;
        }
        {
            std::lock_guard<std::mutex> guard(total_lock);
            total += partial;
        }
        contributors.fetch_add(1, std::memory_order_relaxed);
        #pragma omp single
        team = omp_get_num_threads();
    }
    TORCH_CHECK(contributors.load() == team, "a thread did not contribute");
    auto out = torch::empty({}, p.options());
    out.data_ptr<float>()[0] = static_cast<float>(total / static_cast<double>(n));
    return out;
}
"""

module = load_inline(
    name="legit_cpp_mutex_atomic_reduction",
    cpp_sources=cpp_source,
    functions=["mse_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return module.mse_forward(predictions, targets)
