import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def add_layer_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    # One program per row: the residual add, mean and variance and the affine output in one pass.
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    h = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0) + tl.load(
        r_ptr + row * cols + offsets, mask=mask, other=0.0
    )
    mean = tl.sum(h, axis=0) / cols
    d = tl.where(mask, h - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / cols + eps)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + row * cols + offsets, d * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        residual = residual.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        block = triton.next_power_of_2(cols)
        add_layer_norm_kernel[(rows,)](
            x, residual, self.weight, self.bias, y, cols, self.eps, BLOCK=block, num_warps=8 if block >= 2048 else 4
        )
        return y
