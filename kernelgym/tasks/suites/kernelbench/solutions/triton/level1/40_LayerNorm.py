import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def partial_stats_kernel(x_ptr, partial_ptr, cols, per_chunk, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    # Program (row, chunk): sums of x and x^2 over its share of the row, in float64.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    begin = chunk * per_chunk
    s = tl.zeros([BLOCK], dtype=tl.float64)
    q = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, per_chunk, BLOCK):
        offsets = begin + start + tl.arange(0, BLOCK)
        mask = (offsets < cols) & (start + tl.arange(0, BLOCK) < per_chunk)
        v = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float64)
        s += v
        q += v * v
    base = (row * CHUNKS + chunk) * 2
    tl.store(partial_ptr + base, tl.sum(s, axis=0))
    tl.store(partial_ptr + base + 1, tl.sum(q, axis=0))


@triton.jit
def normalize_kernel(x_ptr, partial_ptr, w_ptr, b_ptr, y_ptr, cols, eps, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    # Program (row, block of columns): the row's mean and 1/std from the partial sums, then the affine output.
    row = tl.program_id(0).to(tl.int64)
    chunks = tl.arange(0, CHUNKS)
    s = tl.sum(tl.load(partial_ptr + (row * CHUNKS + chunks) * 2), axis=0)
    q = tl.sum(tl.load(partial_ptr + (row * CHUNKS + chunks) * 2 + 1), axis=0)
    mean = s / cols
    var = tl.maximum(q / cols - mean * mean, 0.0)
    rstd = (1.0 / tl.sqrt(var + eps)).to(tl.float32)
    mean = mean.to(tl.float32)
    offsets = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + row * cols + offsets, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = self.ln.weight.numel()
        rows = x.numel() // cols
        chunks = 64
        per_chunk = triton.cdiv(cols, chunks)
        partial = torch.empty((rows, chunks, 2), device=x.device, dtype=torch.float64)
        partial_stats_kernel[(rows, chunks)](x, partial, cols, per_chunk, CHUNKS=chunks, BLOCK=1024, num_warps=4)
        block = 1024
        normalize_kernel[(rows, triton.cdiv(cols, block))](
            x, partial, self.ln.weight, self.ln.bias, y, cols, self.ln.eps, CHUNKS=chunks, BLOCK=block, num_warps=4
        )
        return y
