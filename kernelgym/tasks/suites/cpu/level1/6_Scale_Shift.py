import torch
from torch import nn


class Model(nn.Module):
    """Computes x * scale + shift with constant scale and shift."""

    def __init__(self, scale: float, shift: float):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.shift


batch_size = 16
dim = 4096
scale = 1.5
shift = -0.25


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [scale, shift]
