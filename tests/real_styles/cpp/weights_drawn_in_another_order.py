# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: ok
# kernelbench: incorrect
# style: a random tensor drawn in __init__ before the layer, so the layer's own weights are not the reference's from
#        the same seed: right once the reference's weights are copied in (kernelgym's strict check), wrong with its
#        own (KernelBench builds both models from one seed and copies nothing)
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.jitter = torch.randn(out_features) * 0.0
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x) + self.jitter.to(x.device))
