# task: level1/1_ReLU
# expect: ok
"""Two launches on the two halves of the input; an empty output buffer from torch.empty.

Mentioning torch.relu(x) or torch.nn.functional.relu in a docstring is fine.
"""
import math

import torch
import triton
import triton.language as tl
from torch import nn

BLOCK = 1024


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = BLOCK

    def _launch(self, src, dst):
        n = src.numel()
        _relu[(triton.cdiv(n, self.block),)](src, dst, n, BLOCK=self.block)

    def forward(self, x):
        flat = x.reshape(-1)
        out = torch.empty(flat.numel(), device=x.device, dtype=x.dtype)
        cut = math.floor(flat.numel() / 2)
        self._launch(flat[:cut], out[:cut])
        self._launch(flat[cut:], out[cut:])
        return out.view_as(x)
