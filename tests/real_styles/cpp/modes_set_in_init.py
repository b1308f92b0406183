# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: incorrect
# kernelbench: ok
# style: __init__ puts a submodule in eval mode (as CUDA-L1's level3/25 puts its BatchNorms): KernelBench calls the model
#        as built, never train() or eval(), so the dropout stays off there; kernelgym's trials call it in training
#        mode too, where the dropout is on
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(0.5)
        self.dropout.eval()

    def forward(self, x):
        return self.dropout(torch.relu(self.linear(x)))
