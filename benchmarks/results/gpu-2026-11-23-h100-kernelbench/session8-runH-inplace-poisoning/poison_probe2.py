"""Trusted probe of in-place poisoning: ReLU of a 6.4 GB tensor, output allocated inside the timed region, after the judge's poisoning."""
import statistics, time, torch
from kernelgym.backends import get_backend
backend = get_backend("cuda")
x = torch.randn(4096, 393216, device="cuda")
flush = torch.empty(256 * 1024**2, dtype=torch.uint8, device="cuda")
def stats(v):
    q = statistics.quantiles(v, n=4)
    return f"median {statistics.median(v):.3f} IQR {q[2]-q[0]:.3f} min {min(v):.3f} max {max(v):.3f}"
for round_ in range(4):
    timed, poison = [], []
    for _ in range(30):
        t0 = time.perf_counter(); backend.poison_memory(("relu", round_ % 2)); poison.append((time.perf_counter() - t0) * 1e3)
        flush.zero_(); torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); y = torch.relu(x); b.record(); torch.cuda.synchronize()
        assert not y.isnan().any()
        del y
        timed.append(a.elapsed_time(b))
    print(f"round {round_}: relu ms {stats(timed[1:])} | first call {timed[0]:.3f} | poisoning wall ms {stats(poison[1:])} first {poison[0]:.1f}", flush=True)
