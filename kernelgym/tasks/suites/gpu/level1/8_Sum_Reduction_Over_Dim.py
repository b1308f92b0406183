import torch
from torch import nn


class Model(nn.Module):
    """Sum over one dimension of a 3-D tensor, keeping it."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 64
dim1 = 1024
dim2 = 512
reduce_dim = 1


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
