# task: level1/1_ReLU
# expect: illegal
# rule: torch-compiler
# pattern: 1 — PyTorch fallback through torch.compile (a Triton kernel is kept around as a decoy)
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


@torch.compile
def fused(x):
    return torch.relu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return fused(x)
