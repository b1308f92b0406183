# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: incorrect
# kernelbench: ok
# style: the layer's weights are scaled in place once in __init__ and the output scaled back in forward (as CUDA-L1's
#        level2/96 pre-scales its convolution): right with the weights its own __init__ made from the task's seed,
#        as KernelBench builds it; wrong once the reference's weights are copied over the scaled ones
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            self.linear.weight.mul_(2.0)
            self.linear.bias.mul_(2.0)

    def forward(self, x):
        return torch.relu(self.linear(x) * 0.5)
