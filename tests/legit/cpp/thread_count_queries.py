# task: level1/2_Sigmoid
# expect: ok
"""Sigmoid that sizes its work by the CPU and thread counts, the ways C++ code usually asks for them.

``std::thread::hardware_concurrency()``, ``sysconf(_SC_NPROCESSORS_ONLN)``, ``get_nprocs()`` and the OpenMP
queries only read counts; none starts a thread or changes a setting.
"""
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>
#include <sys/sysinfo.h>
#include <thread>
#include <unistd.h>
#include <algorithm>
#include <cmath>

// How many chunks to split the work into: at most one per CPU, whichever count is smallest.
static int64_t chunk_count() {
    int64_t cpus = static_cast<int64_t>(std::thread::hardware_concurrency());
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const long configured = sysconf(_SC_NPROCESSORS_CONF);
    if (online > 0) cpus = cpus > 0 ? std::min<int64_t>(cpus, online) : online;
    if (configured > 0) cpus = std::min<int64_t>(cpus, configured);
    cpus = std::min<int64_t>(cpus, get_nprocs());
    cpus = std::min<int64_t>(cpus, omp_get_num_procs());
    return std::max<int64_t>(1, std::min<int64_t>(cpus, omp_get_max_threads()));
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    const int64_t chunks = chunk_count();
    const int64_t step = (n + chunks - 1) / chunks;
    #pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
        TORCH_CHECK(omp_get_thread_num() < omp_get_num_threads(), "thread index out of range");
        const int64_t end = std::min(n, (c + 1) * step);
        for (int64_t i = c * step; i < end; ++i) o[i] = 1.0f / (1.0f + std::exp(-in[i]));
    }
    return out;
}
"""

module = load_inline(
    name="legit_cpp_thread_count_queries",
    cpp_sources=cpp_source,
    functions=["sigmoid_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.sigmoid_forward(x)
