# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: incorrect
# kernelbench: ok
# style: the weight is transposed once in __init__ and the copy used in forward (as 5 of 44 CUDA-L1 answers do):
#        right while the weights stay those set at construction (KernelBench's contract), stale once they change
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight_t = self.linear.weight.detach().t().contiguous()

    def forward(self, x):
        return torch.relu(torch.addmm(self.linear.bias, x, self.weight_t))
