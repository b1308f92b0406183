"""GPU memory of the judge and its candidate while the CUDA ReLU and Softmax answers to KernelBench's task files are judged.

nvidia-smi is sampled every 0.25 s in a thread; the largest memory seen per process is reported. Which kernelgym is
used is whatever ``import kernelgym`` finds (PYTHONPATH).
"""
import json, os, subprocess, sys, threading, time
import kernelgym
from kernelgym import Verifier
from kernelgym.tasks import load_kernelbench_dir
from kernelgym.verifier import VerifierConfig

label, kb, out = sys.argv[1], sys.argv[2], sys.argv[3]
peaks: dict[str, int] = {}
stop = threading.Event()

def sample() -> None:
    while not stop.is_set():
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout
        for line in text.splitlines():
            if "," in line:
                pid, mib = (s.strip() for s in line.split(","))
                peaks[pid] = max(peaks.get(pid, 0), int(mib))
        time.sleep(0.25)

tasks = {t.id: t for t in load_kernelbench_dir(kb)}
threading.Thread(target=sample, daemon=True).start()
rows = []
with Verifier(backend="cuda", config=VerifierConfig(rules="native")) as verifier:
    for task_id in ("level1/19_ReLU", "level1/23_Softmax"):
        peaks.clear()
        start = time.perf_counter()
        result = verifier.evaluate(tasks[task_id], tasks[task_id].solutions["cuda"])
        names = {}
        for pid in peaks:
            try:
                names[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()[:80]
            except OSError:
                names[pid] = "?"
        row = {"label": label, "kernelgym": os.path.dirname(kernelgym.__file__), "task": task_id,
               "status": result.status.value, "runtime_ms": result.runtime_ms, "seconds": round(time.perf_counter() - start, 1),
               "peak_mib_by_pid": dict(sorted(peaks.items(), key=lambda kv: -kv[1])), "cmdline": names}
        rows.append(row)
        print(json.dumps(row), flush=True)
stop.set()
with open(out, "a") as sink:
    for row in rows:
        sink.write(json.dumps(row) + "\n")
