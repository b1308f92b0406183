"""KernelBench's correctness check of one real answer in one process, under variants: why an answer that replays a CUDA
graph fails there (``real-answers.md``, ``level3/35_LSTM``).

KernelBench moves both models ``.to(device, dtype=torch.float32)`` before each of its five trials. The variants: cuDNN's
TF32 on or off, the answer's ``c0`` set to its ``h0`` (the reference task uses ``h0`` for both) or not, and the
answer's own forward (a CUDA graph replay) against the eager path of the same weights. Prints the largest difference
per trial; ``--out`` also writes them as JSON lines.

    python benchmarks/kernelbench_move_probe.py --answers .data/cudal1_h100.jsonl --level 3 --task 35
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelgym.verifier.kernelbench_numerics import kernelbench_seeds  # noqa: E402


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # a benchmark on a GPU host: the answer is the object of study
    return module


def probe(row: dict, tf32: bool, same_c0: bool, eager: bool, device: torch.device) -> list[float]:
    """KernelBench's trials (seeds, host inputs, ``.to`` before each) of one variant; the largest difference of each."""
    reference, answer = _module(row["ref_code"], "reference"), _module(row["custom_code"], "answer")
    torch.backends.cudnn.allow_tf32 = tf32
    torch.manual_seed(42)
    model = reference.Model(*reference.get_init_inputs())
    torch.manual_seed(42)
    model_new = answer.ModelNew(*answer.get_init_inputs())
    if same_c0:
        model_new.c0 = model_new.h0.clone()
    differences = []
    with torch.no_grad():
        for seed in kernelbench_seeds(5)[1:6]:
            torch.manual_seed(seed)
            inputs = [x.to(device, torch.float32) for x in reference.get_inputs()]
            torch.manual_seed(seed)
            model = model.to(device=device, dtype=torch.float32)
            torch.manual_seed(seed)
            model_new = model_new.to(device=device, dtype=torch.float32)
            expected = model(*inputs)
            if eager:
                out, _ = model_new.lstm(inputs[0], (model_new.h0.to(device), model_new.c0.to(device)))
                got = model_new.fused_op(out, model_new.fc.weight, model_new.fc.bias)
            else:
                got = model_new(*inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            differences.append(float((expected - got).abs().max()))
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", required=True, help="CUDA-L1's answers, a JSON-lines file")
    parser.add_argument("--level", type=int, default=3)
    parser.add_argument("--task", type=int, default=35)
    parser.add_argument("--out", default="", help="append the variants' differences here (JSON lines)")
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in Path(args.answers).read_text().splitlines() if line.strip()]
    row = next((r for r in rows if r["level_id"] == args.level and r["task_id"] == args.task), None)
    if row is None:
        raise SystemExit(f"no answer for level {args.level} task {args.task} in {args.answers}")
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    for tf32 in (True, False):
        for same_c0 in (False, True):
            for eager in (False, True):
                differences = probe(row, tf32, same_c0, eager, device)
                line = {"tf32": tf32, "same_c0": same_c0, "eager": eager, "max_abs_difference": differences}
                print(json.dumps(line), flush=True)
                if args.out:
                    with open(args.out, "a") as handle:
                        handle.write(json.dumps({"record": "probe", "probe_of": f"cudal1:level{args.level}/{args.task}", **line}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
