# task: level1/1_ReLU
# rules: kernelbench
# expect: incorrect
# kernelbench: ok
# style: the activation applied in place to the input and the input returned (as CUDA-L1's LeakyReLU answer does):
#        `input-mutation` in the strict verdict; KernelBench calls the reference first, on the same inputs, so
#        its contract accepts it
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu_(x)
