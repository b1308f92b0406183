"""Triton templates for the ``triton`` backend, tied to tasks of the bundled ``gpu`` suite.

Holds:
    RELU: level1/1_ReLU; elements per program x warps (9 configurations).
    SOFTMAX: level1/5_Softmax; columns per loop step x warps (9).
    MATMUL: level1/9_Matmul; tile M x tile N x tile K x warps x pipeline stages (32).

Every configuration computes the same result (the matmul keeps IEEE fp32 products, no TF32, so it
stays inside the task's tolerance); only the speed differs, and a configuration whose tiles do not
fit the GPU's shared memory fails at launch and earns the failure penalty.
"""

from __future__ import annotations

from kernelgym.envs.templates import KernelTemplate, TemplateParam, register_template

__all__ = ["MATMUL", "RELU", "SOFTMAX"]

RELU = register_template(KernelTemplate(
    task_id="level1/1_ReLU",
    suite="gpu",
    backend="triton",
    dims=("batch_size", "dim"),
    summary="Elements per program and warps per program set how many loads each thread issues and "
            "how many programs the GPU schedules.",
    params=(
        TemplateParam("BLOCK", (256, 1024, 4096)),
        TemplateParam("NUM_WARPS", (1, 4, 16)),
    ),
    source='''import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, ${BLOCK}),)](x, y, n, BLOCK=${BLOCK}, num_warps=${NUM_WARPS})
        return y
''',
))

SOFTMAX = register_template(KernelTemplate(
    task_id="level1/5_Softmax",
    suite="gpu",
    backend="triton",
    dims=("batch_size", "dim"),
    summary="One program per row walks the row in steps of BLOCK columns three times (max, sum, write): "
            "wide steps mean fewer iterations but more registers per thread.",
    params=(
        TemplateParam("BLOCK", (256, 1024, 4096)),
        TemplateParam("NUM_WARPS", (1, 4, 16)),
    ),
    source='''import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    cols = tl.arange(0, BLOCK)
    running_max = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        running_max = tl.maximum(running_max, x)
    row_max = tl.max(running_max, axis=0)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        running_sum += tl.exp(x - row_max)
    inv = 1.0 / tl.sum(running_sum, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        tl.store(y_row + start + cols, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        softmax_kernel[(rows,)](x, y, n_cols, n_cols, BLOCK=${BLOCK}, num_warps=${NUM_WARPS})
        return y
''',
))

MATMUL = register_template(KernelTemplate(
    task_id="level1/9_Matmul",
    suite="gpu",
    backend="triton",
    dims=("M", "K", "N"),
    summary="Output tile (BLOCK_M x BLOCK_N), reduction step BLOCK_K, warps and software-pipeline stages: "
            "the classic Triton matmul search space; big tiles with many stages can exceed shared memory.",
    params=(
        TemplateParam("BLOCK_M", (64, 128)),
        TemplateParam("BLOCK_N", (64, 128)),
        TemplateParam("BLOCK_K", (16, 32)),
        TemplateParam("NUM_WARPS", (4, 8)),
        TemplateParam("NUM_STAGES", (2, 4)),
    ),
    source='''import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, ${BLOCK_M}) * triton.cdiv(N, ${BLOCK_N}),)
        matmul_kernel[grid](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BLOCK_M=${BLOCK_M}, BLOCK_N=${BLOCK_N}, BLOCK_K=${BLOCK_K}, GROUP_M=8,
            num_warps=${NUM_WARPS}, num_stages=${NUM_STAGES},
        )
        return c
''',
))
