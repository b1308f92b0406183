# task: level1/1_ReLU
# rules: kernelbench
# expect: ok
# style: nothing is built at import or in __init__: the first forward tries a build that never compiles (its entry
#        point declared twice, PYBIND11_MODULE beside functions=), remembers the failure and falls back to PyTorch
#        (CUDA-L1's level1/10 answer)
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu_forward", &relu_forward, "ReLU");
}
"""


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = None
        self.fallback = False

    def _load(self):
        try:
            return load_inline(name="relu_lazy_failing", cpp_sources=relu_source, functions=["relu_forward"],
                               extra_cflags=["-O3"], verbose=False)
        except Exception as exc:
            print(f"Failed to load the extension: {exc}")
            self.fallback = True
            return None

    def forward(self, x):
        if self.fallback:
            return torch.relu(x)
        if self.ext is None:
            self.ext = self._load()
            if self.ext is None:
                return torch.relu(x)
        return self.ext.relu_forward(x)
