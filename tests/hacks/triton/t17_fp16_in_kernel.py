# task: level1/1_ReLU
# expect: illegal
# rule: precision-downgrade
# pattern: 17 — the kernel loads fp32, computes and stores through fp16
import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def relu_half(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_half[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
