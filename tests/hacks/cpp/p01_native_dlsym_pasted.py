# task: level1/1_ReLU
# expect: illegal
# rule: forbidden-native-symbol
# pattern: 1 — aten::relu found with dlsym by its mangled name (`dlsym` declared by hand through token pasting), Python key excluded
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#define PASTE(a, b) a##b
extern "C" void* PASTE(dl, sym)(void* handle, const char* name);
torch::Tensor relu_forward(torch::Tensor x) {
    using relu_fn = at::Tensor (*)(const at::Tensor&);
    static auto relu = reinterpret_cast<relu_fn>(PASTE(dl, sym)(nullptr, "_ZN2at4_ops4relu4callERKNS_6TensorE"));
    c10::impl::ExcludeDispatchKeyGuard hidden(c10::DispatchKeySet(c10::DispatchKey::Python));
    return relu(x);
}
"""

module = load_inline(name="hack_p01_dlsym_pasted", cpp_sources=cpp_source, functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.relu_forward(x)
