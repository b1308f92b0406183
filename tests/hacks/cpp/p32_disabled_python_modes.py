# task: level1/1_ReLU
# expect: illegal
# rule: aten-fallback
# pattern: 32 — torch.relu from a dispatch table, run with every Python dispatch mode switched off: only the observer below Python sees it
import sys

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor identity(torch::Tensor x) { return x.clone(); }
"""

module = load_inline(name="hack_p32_disabled_modes", cpp_sources=cpp_source, functions=["identity"])
_modules = type(sys).__getattribute__(sys, "mod" + "ules")
import types

# an attribute of a namespace object: the static rules do not follow it (calls through a subscript or a bare
# run-time name are refused statically since unresolved-call), so only the runtime guards can see what it runs
_TABLE = types.SimpleNamespace(act=torch.relu, quiet=getattr(_modules["torch.utils._python_" + "dispatch"], "_disable_" + "current_modes"))


class ModelNew(nn.Module):
    def forward(self, x):
        with _TABLE.quiet():
            return _TABLE.act(module.identity(x))
