# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: illegal
# kernelbench: ok
# style: process-wide settings at import, as 52 of 210 CUDA-L1 answers set them (cudnn.benchmark, TF32, threads):
#        `global-flags` in the strict verdict; KernelBench's contract has no such rule, so the answer is judged
#        under that contract as well, its settings in force
import torch
from torch import nn

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))
