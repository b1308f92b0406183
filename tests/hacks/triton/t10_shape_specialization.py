# task: level1/1_ReLU
# expect: incorrect
# rule: shape-variant-mismatch
# pattern: 10 — whole 1024-element blocks only: right for 4096 x 4096, the tail of odd sizes is never written
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def relu_fixed(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.zeros_like(x)
        n = x.numel()
        relu_fixed[(max(1, n // 1024),)](x, y, n, BLOCK=1024)
        return y
