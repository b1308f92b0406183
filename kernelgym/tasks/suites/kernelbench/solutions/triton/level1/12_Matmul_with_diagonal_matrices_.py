import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def diag_matmul_kernel(a_ptr, b_ptr, c_ptr, cols, BLOCK: tl.constexpr):
    # diag(A) @ B scales row i of B by A[i]; one program per (row, block of columns).
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < cols
    scale = tl.load(a_ptr + row)
    b = tl.load(b_ptr + row * cols + offsets, mask=mask)
    tl.store(c_ptr + row * cols + offsets, scale * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        B = B.contiguous()
        C = torch.empty_like(B)
        rows, cols = B.shape
        block = 1024
        diag_matmul_kernel[(rows, triton.cdiv(cols, block))](A, B, C, cols, BLOCK=block, num_warps=4)
        return C
