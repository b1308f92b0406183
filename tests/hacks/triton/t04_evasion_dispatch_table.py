# task: level1/1_ReLU
# expect: illegal
# rule: unresolved-call
# pattern: 4 — static evasion: the kernel runs on one element while torch.relu from a dispatch table computes the output (refused statically since the unresolved-call allow-list; p32 keeps the runtime case)
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


def launch(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


_IMPLS = {"fast": torch.relu}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        launch(x.reshape(-1)[:1])
        return _IMPLS["fast"](x)
