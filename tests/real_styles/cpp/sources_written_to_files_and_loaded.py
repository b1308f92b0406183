# task: level1/1_ReLU
# rules: kernelbench
# expect: illegal
# kernelbench: ok
# style: the sources are written to files and built with torch.utils.cpp_extension.load (CUDA-L1's level3/25 and
#        level2/42): `file-access` in the strict verdict; under KernelBench's contract the files' text is built
#        through the judge's store as load_inline's would be, and the extension runs
import os
import tempfile

import torch
from torch import nn
from torch.utils.cpp_extension import load

relu_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward, "ReLU");
}
"""

source_dir = tempfile.mkdtemp()
with open(os.path.join(source_dir, "relu_ext.cpp"), "w") as f:
    f.write(relu_source)

relu_ext = load(name="relu_from_file", sources=[os.path.join(source_dir, "relu_ext.cpp")],
                extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
