import torch
from torch import nn


class Model(nn.Module):
    """A single fp32 matrix multiplication C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


M = 2048
K = 2048
N = 2048


def get_inputs():
    a = torch.randn(M, K)
    b = torch.randn(K, N)
    return [a, b]


def get_init_inputs():
    return []
