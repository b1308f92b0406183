import torch
from torch import nn


class Model(nn.Module):
    """A linear layer, then BatchNorm: in training mode it normalizes by the batch's own statistics."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.BatchNorm1d(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


batch_size = 64
features = 256


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
