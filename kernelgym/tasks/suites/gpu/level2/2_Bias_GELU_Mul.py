import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    """Adds a learned bias, applies GELU, and multiplies by a gate (a GEGLU-style epilogue)."""

    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + self.bias) * gate


batch_size = 4096
dim = 4096


def get_inputs():
    x = torch.randn(batch_size, dim)
    gate = torch.randn(batch_size, dim)
    return [x, gate]


def get_init_inputs():
    return [dim]
