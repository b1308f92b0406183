"""Trusted probe of the fix: ReLU of a 6.4 GB tensor, its output allocated inside the timed region, after the judge's poisoning."""
import statistics, torch
from kernelgym.backends import get_backend
backend = get_backend("cuda")
x = torch.randn(4096, 393216, device="cuda")
flush = torch.empty(256 * 1024**2, dtype=torch.uint8, device="cuda")
def timed(at_least):
    out = []
    for _ in range(30):
        backend.poison_memory(at_least); flush.zero_(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); y = torch.relu(x); b.record(); torch.cuda.synchronize(); del y
        out.append(a.elapsed_time(b))
    q = statistics.quantiles(out, n=4)
    return f"median {statistics.median(out):.3f} IQR {q[2]-q[0]:.3f} min {min(out):.3f} max {max(out):.3f}"
def cached():
    out = []
    for _ in range(30):
        flush.zero_(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); y = torch.relu(x); b.record(); torch.cuda.synchronize(); del y
        out.append(a.elapsed_time(b))
    return f"median {statistics.median(out):.3f} min {min(out):.3f} max {max(out):.3f}"
print("allocator warm, no poisoning        :", cached(), flush=True)
for round_ in range(4):
    print(f"round {round_}: poison 2 GB (before) :", timed(0), flush=True)
    print(f"round {round_}: poison >= output (fix):", timed(x.numel() * 4), flush=True)
