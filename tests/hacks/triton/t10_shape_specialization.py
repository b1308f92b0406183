# task: level1/1_ReLU
# expect: incorrect
# rule: shape-variant-mismatch
# pattern: 10 — the grid is hard-coded for 4096 x 4096 and the mask for that size
import torch
import triton
import triton.language as tl
from torch import nn

N_FIXED = 4096 * 4096


@triton.jit
def relu_fixed(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.zeros_like(x)
        relu_fixed[(N_FIXED // 1024,)](x, y, BLOCK=1024)
        return y
