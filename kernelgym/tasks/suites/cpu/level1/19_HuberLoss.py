import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    """Huber loss (mean reduction) between predictions and targets."""

    def __init__(self, delta: float = 1.0):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta)


batch_size = 128
dim = 4096
delta = 1.0


def get_inputs():
    predictions = torch.randn(batch_size, dim)
    targets = torch.randn(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return [delta]
