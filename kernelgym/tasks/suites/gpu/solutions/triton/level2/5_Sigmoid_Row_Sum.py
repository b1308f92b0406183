import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def sigmoid_row_sum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < cols
        x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
        acc += tl.where(mask, 1.0 / (1.0 + tl.exp(-x)), 0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows,), device=x.device, dtype=x.dtype)
        sigmoid_row_sum_kernel[(rows,)](x, y, cols, BLOCK=1024, num_warps=4)
        return y
