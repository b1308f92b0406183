import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        block = 2048
        add_kernel[(triton.cdiv(n, block),)](a, b, y, n, BLOCK=block, num_warps=8)
        return y
