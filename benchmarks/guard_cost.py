"""What watching a call costs: the credited time of one forward, bare and as the judge makes it.

    python benchmarks/guard_cost.py --device cpu --out /tmp/guard       # on the CPU
    python benchmarks/guard_cost.py --device cuda --out "$OUT"          # on a GPU

For a few small programs (one ATen operator up to a dozen), the same module is
timed in one process, calls interleaved, four ways: ``bare`` (the timer around
``model(*inputs)`` and nothing else), ``credited`` (:func:`run_call` as the judge
makes a credited call: the native ATen observer armed, the kernel tracker, no
Python guard), ``watched`` (the Python dispatch guard added, as on calls whose
time is not credited), ``no observer`` (:func:`run_call` without the observer) and
``no poison`` (without the memory poisoning that precedes every call).
The added cost per credited call is ``credited - bare`` (median of per-call
medians); it is what the harness adds to an answer's credited time. Results go
to ``<out>/guard_cost.jsonl`` and ``<out>/guard_cost.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from kernelgym.backends import KernelTracker, get_backend  # noqa: E402
from kernelgym.backends.aten_observer import load_observer  # noqa: E402
from kernelgym.verifier.candidate_side import run_call  # noqa: E402


class OneOp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class FourOps(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * 2.0 + 1.0).sum(dim=-1)


class TwelveOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(256)
        self.linear = nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(self.norm(x))
        return torch.softmax(torch.nn.functional.gelu(y) * 0.5 + x, dim=-1)


PROGRAMS = {"relu (1 op)": (OneOp, (16, 256)), "tanh-sum (4 ops)": (FourOps, (16, 256)), "norm-linear-softmax (~12 ops)": (TwelveOps, (16, 256))}


def measure(backend_name: str, calls: int, observer: Any) -> list[dict[str, Any]]:
    backend = get_backend(backend_name)
    device = backend.device()
    tracker = KernelTracker()
    rows = []
    for name, (cls, shape) in PROGRAMS.items():
        model = cls().to(device).eval()
        x = torch.randn(*shape, device=device)
        ways = _ways(model, x, backend, tracker, observer)
        times: dict[str, list[float]] = {way: [] for way in ways}
        with torch.no_grad():
            for _ in range(10):
                for fn in ways.values():
                    fn()
            for _ in range(calls):
                for way, fn in ways.items():
                    times[way].append(fn() * 1e3)
        medians = {way: statistics.median(values) for way, values in times.items()}
        rows.append({"program": name, "device": backend.device_name(), **{f"{w}_us": round(m, 2) for w, m in medians.items()},
                     "added_us": round(medians["credited"] - medians["bare"], 2)})
    return rows


def _ways(model: nn.Module, x: torch.Tensor, backend: Any, tracker: KernelTracker, observer: Any) -> dict[str, Any]:
    return {
        "bare": lambda: _bare(model, x, backend),
        "credited": lambda: run_call(model, [x], backend, tracker, False, False, observer, python_guard=False)[1]["ms"],
        "watched": lambda: run_call(model, [x], backend, tracker, False, False, observer, python_guard=True)[1]["ms"],
        "no observer": lambda: run_call(model, [x], backend, tracker, False, False, None, python_guard=False)[1]["ms"],
        "no poison": lambda: run_call(model, [x], _Unpoisoned(backend), tracker, False, False, observer, python_guard=False)[1]["ms"],
    }


class _Unpoisoned:
    """``backend`` without memory poisoning: what poisoning before a call adds to its credited time."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    def poison_memory(self, signature: Any = None) -> None:
        """Nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def _bare(model: nn.Module, x: torch.Tensor, backend: Any) -> float:
    timer = backend.call_timer()
    timer.flush()
    timer.start()
    model(x)
    timer.stop()
    timer.settle()
    return timer.elapsed_ms()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="cpu: the cpp backend's path; cuda: the cuda backend's")
    parser.add_argument("--calls", type=int, default=300, help="calls per way and program")
    parser.add_argument("--out", required=True, help="folder for guard_cost.jsonl and guard_cost.md")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    observer = load_observer(Path(tempfile.mkdtemp(prefix="guard-cost-")) / "builds")
    rows = measure("cpp" if args.device == "cpu" else "cuda", args.calls, observer)
    (out / "guard_cost.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = ["| program | device | bare us | credited us | watched us | no observer us | no poison us | added per credited call us |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['program']} | {r['device']} | {r['bare_us']} | {r['credited_us']} | {r['watched_us']} | {r['no observer_us']} | "
              f"{r['no poison_us']} | {r['added_us']} |" for r in rows]
    (out / "guard_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
