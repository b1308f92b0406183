# task: level1/1_ReLU
# expect: incorrect
# rule: input-mutation
# pattern: 7 — a second launch overwrites the input with ReLU(x), so a reference run afterwards on the same tensor agrees
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.numel()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        relu_kernel[(triton.cdiv(n, 1024),)](x, x, n, BLOCK=1024)
        return y
