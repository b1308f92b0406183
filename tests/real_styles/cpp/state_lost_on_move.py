# task: level2/1_Linear_ReLU
# rules: kernelbench
# expect: incorrect
# kernelbench: incorrect
# style: state of the first call that a later move of the model makes stale (as CUDA-L1's level3/35_LSTM replays a CUDA
#        graph captured over its LSTM's weights, which every ``.to()`` flattens into new memory): KernelBench moves
#        ModelNew ``.to(device, dtype)`` before each of its trials (kernelgym moves it when it redraws the weights)
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.moves = 0
        self.moves_at_capture = None

    def _apply(self, fn, recurse=True):
        self.moves += 1
        return super()._apply(fn, recurse)

    def forward(self, x):
        if self.moves_at_capture is None:  # "captured" at the first call
            self.moves_at_capture = self.moves
        out = torch.relu(self.linear(x))
        # a replay after a move reads what the old memory holds now
        return out + 1.0 if self.moves != self.moves_at_capture else out
