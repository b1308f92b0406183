import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    mean_square = tl.sum(x * x, axis=0) / cols
    tl.store(y_ptr + row * cols + offsets, x * (1.0 / tl.sqrt(mean_square + eps)) * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        block = triton.next_power_of_2(cols)
        rms_norm_kernel[(rows,)](x, self.weight, y, cols, self.eps, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y
