"""The ``kernelgym`` command line, run as a user would (a subprocess)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CPU_SOLUTIONS = REPO / "kernelgym/tasks/suites/cpu/solutions/cpp"

ILLEGAL = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
'''


def kernelgym(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelgym.cli", *args], capture_output=True, text=True, timeout=900,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})


def assert_user_error(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2 and exactly one line on stderr, ``kernelgym: error: ...``, naming every fragment."""
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelgym: error: "), out.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_tasks_lists_the_cpu_suite() -> None:
    out = kernelgym("tasks", "--suite", "cpu")
    assert out.returncode == 0, out.stderr
    assert "level1/1_ReLU" in out.stdout and "23 tasks" in out.stdout


def test_eval_json_reports_violations(tmp_path: Path) -> None:
    answer = tmp_path / "answer.py"
    answer.write_text(ILLEGAL)
    out = kernelgym("eval", "--task", "level1/1_ReLU", "--json", str(answer))
    assert out.returncode == 1
    data = json.loads(out.stdout)
    for key in ("status", "compiled", "correct", "legal", "speedup", "violations", "feedback", "score"):
        assert key in data
    assert data["status"] == "illegal" and data["legal"] is False and data["score"] == 0.0
    assert data["violations"] and {"rule", "line", "message"} <= set(data["violations"][0])
    line = ILLEGAL.strip().splitlines().index("        return torch.relu(x)") + 1
    assert {"rule": "torch-compute-in-forward", "line": line} in [{"rule": v["rule"], "line": v["line"]} for v in data["violations"]]


def test_eval_accepts_a_task_file(tmp_path: Path) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text("Here is my idea, no code yet.")
    task_file = Path(__file__).resolve().parents[1] / "kernelgym/tasks/suites/cpu/level1/1_ReLU.py"
    out = kernelgym("eval", "--task", str(task_file), str(answer))
    assert out.returncode == 1
    assert "format_error" in out.stdout


def test_unknown_task_is_a_clear_error(tmp_path: Path) -> None:
    answer = tmp_path / "a.py"
    answer.write_text(ILLEGAL)
    assert_user_error(kernelgym("eval", "--task", "level9/404_Nothing", str(answer)), "kernelgym tasks")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["eval", "--task", "level1/1_ReLU", "--json", "my_answer.md"], ["'my_answer.md' does not exist", "stdin"]),
        (["eval", "--task", "level1/1_ReLU", "{tmp}"], ["drop --task, or give one answer file"]),
        (["eval", "{tmp}/a.py"], ["--task is required"]),
        (["eval", "--task", "{tmp}/missing_task.py", "{tmp}/a.py"], ["cannot read task file"]),
        (["eval", "--task", "level1/1_ReLU", "--suite", "nope", "{tmp}/a.py"], ["unknown task suite 'nope'"]),
        (["eval", "--task", "level1/1_ReLU", "--backend", "nope", "{tmp}/a.py"], ["nope"]),
        (["eval", "--task", "level1/1_ReLU", "--no-such-flag", "{tmp}/a.py"], ["--no-such-flag", "--help"]),
        (["eval", "--task", "level1/1_ReLU", "--runs", "many", "{tmp}/a.py"], ["--runs", "many"]),
        (["eval", "--task", "level1/1_ReLU", "--runs", "0", "{tmp}/a.py"], ["--runs", "at least 1"]),
        (["no-such-command"], ["no-such-command"]),
        (["bench", "--suite", "nope", "--out", "{tmp}/run"], ["unknown task suite"]),
        (["cache", "info", "--max-gb", "-1", "--cache-dir", "{tmp}/cache"], [">= 0"]),
    ],
)
def test_user_mistakes_are_one_line_errors(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    (tmp_path / "a.py").write_text(ILLEGAL)
    assert_user_error(kernelgym(*(a.replace("{tmp}", str(tmp_path)) for a in args)), *fragments)


def test_a_closed_pipe_ends_quietly() -> None:
    """`kernelgym tasks | head -0`: the reader is gone before anything is written."""
    process = subprocess.Popen([sys.executable, "-m", "kernelgym.cli", "tasks"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=300) == 141
    assert stderr == ""


def test_help_is_plain_words_with_defaults_and_exit_codes() -> None:
    top, ev = kernelgym("--help"), kernelgym("eval", "--help")
    assert top.returncode == ev.returncode == 0
    for text in (top.stdout, ev.stdout):
        assert "``" not in text and "exit status:" in text
        assert re.search(r"^\s+2\s+a usage or input error", text, re.MULTILINE)
    for command in ("eval", "tasks", "bench", "train", "cache"):
        assert re.search(rf"^\s+{command}\s+\w", top.stdout, re.MULTILINE)
    flat = " ".join(ev.stdout.split())
    assert "(default: cpu)" in flat and "(default: the suite's: cpp for cpu, cuda for the others)" in flat
    assert "level_<L>_problem_<P>_sample_<S>_kernel.py" in flat and ".jsonl" in flat


@pytest.mark.parametrize("command", ["eval", "bench"])
def test_eval_and_bench_pick_the_same_backend_for_the_gpu_suite(tmp_path: Path, command: str) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text("no code yet")
    if command == "eval":
        out = kernelgym("eval", "--suite", "gpu", "--task", "level1/1_ReLU", "--json", str(answer))
    else:
        out = kernelgym("bench", "--suite", "gpu", "--agent", "random", "--limit", "1", "--no-plots", "--quiet",
                        "--out", str(tmp_path / "run"))
    if out.returncode == 2:  # no GPU here: the cuda backend refuses to start
        assert_user_error(out, "cuda")
    else:
        backend = json.loads(out.stdout)["backend"] if command == "eval" else \
            json.loads((tmp_path / "run" / "summary.json").read_text())["backend"]
        assert backend == "cuda"


def test_any_task_file_is_a_task(tmp_path: Path) -> None:
    task = tmp_path / "my_task.py"
    task.write_text((REPO / "kernelgym/tasks/suites/cpu/level1/1_ReLU.py").read_text())
    answer = tmp_path / "answer.md"
    answer.write_text("Here is my idea, no code yet.")
    out = kernelgym("eval", "--task", str(task), "--json", str(answer))
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert (data["task_id"], data["status"]) == ("my_task", "format_error")


def test_train_dry_run_needs_no_verl(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['verl'] = None; from kernelgym.cli import main; "
            "sys.exit(main(sys.argv[1:]))")
    base = [sys.executable, "-c", code, "train", "--suite", "cpu", "--backend", "cpp", "--output-dir", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    dry = subprocess.run([*base, "--dry-run"], capture_output=True, text=True, timeout=600, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "-m verl.trainer.main_ppo" in dry.stdout
    assert {"train.jsonl", "val.jsonl", "agent_loop.yaml"} <= {p.name for p in tmp_path.iterdir()}
    real = subprocess.run(base, capture_output=True, text=True, timeout=600, env=env)
    assert "Traceback" not in real.stderr
    assert real.returncode == 2 and "kernelgym[verl]" in real.stderr


ANSWERS = [
    {"task_id": "level1/1_ReLU", "answer": "no code yet"},
    {"task_id": "2_Sigmoid", "answer": ILLEGAL.replace("relu", "sigmoid")},
]


def test_eval_judges_a_jsonl_of_answers_and_resumes(tmp_path: Path) -> None:
    answers, out_dir = tmp_path / "answers.jsonl", tmp_path / "run"
    answers.write_text("".join(json.dumps(r) + "\n" for r in ANSWERS))
    first = kernelgym("eval", str(answers), "--out", str(out_dir), "--no-plots")
    assert first.returncode == 0, first.stderr
    assert "hack rate" in first.stdout and "eval" in first.stderr  # the report, and the progress bar on stderr
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["agent"] == "answers:answers.jsonl" and summary["task_ids"] == ["level1/1_ReLU", "level1/2_Sigmoid"]
    assert summary["metrics"]["best_turn"]["hack_rate"] == 0.5 and summary["metrics"]["best_turn"]["pass_at_1"] == 0.0
    records = [json.loads(line) for line in (out_dir / "attempts.jsonl").read_text().splitlines()]
    # Each record is written as its verdict comes, not in the file's order.
    assert sorted((r["task_id"], r["status"]) for r in records) == [("level1/1_ReLU", "format_error"), ("level1/2_Sigmoid", "illegal")]

    assert_user_error(kernelgym("eval", str(answers), "--out", str(out_dir)), "--resume")
    with answers.open("a") as handle:
        handle.write(json.dumps({"task_id": "level1/3_Tanh", "answer": "still no code"}) + "\n")
    again = kernelgym("eval", str(answers), "--out", str(out_dir), "--resume", "--no-plots", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["attempts"] == 3
    lines = (out_dir / "attempts.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines[:2]] == records  # judged once, kept as they were
    assert json.loads(lines[2])["task_id"] == "level1/3_Tanh"


def test_eval_judges_a_folder_of_task_files(tmp_path: Path) -> None:
    (tmp_path / "answers" / "level1").mkdir(parents=True)
    (tmp_path / "answers" / "1_ReLU.py").write_text(ILLEGAL)
    (tmp_path / "answers" / "level1" / "2_Sigmoid.md").write_text("no code yet")
    out = kernelgym("eval", str(tmp_path / "answers"), "--out", str(tmp_path / "run"), "--no-plots", "--quiet", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["task_ids"] == ["level1/1_ReLU", "level1/2_Sigmoid"] and summary["attempts"] == 2
    (tmp_path / "answers" / "99_Nothing.py").write_text(ILLEGAL)
    assert_user_error(kernelgym("eval", str(tmp_path / "answers"), "--out", str(tmp_path / "run2")), "99_Nothing")


@pytest.mark.slow
def test_eval_judges_kernelbench_generations(tmp_path: Path, cache_dir: Path) -> None:
    generations = tmp_path / "generations"
    generations.mkdir()
    (generations / "level_1_problem_5_sample_0_kernel.py").write_text((CPU_SOLUTIONS / "level1/5_Add.py").read_text())
    (generations / "level_1_problem_5_sample_1_kernel.py").write_text("no code yet")
    (generations / "eval_results.json").write_text("{}")  # other files of a KernelBench run folder are ignored
    out = kernelgym("eval", str(generations), "--out", str(tmp_path / "run"), "--runs", "3", "--quiet",
                    "--cache-dir", str(cache_dir))
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    best = summary["metrics"]["best_turn"]
    assert summary["k"] == 2 and summary["task_ids"] == ["level1/5_Add"]
    assert best["pass_at_1"] == 0.5 and best["pass_at_k"] == 1.0
    assert {"speedup_distribution.png", "metrics_per_level.png"} <= set(summary["files"])


@pytest.mark.slow
def test_eval_table_for_a_bundled_solution(cache_dir: Path) -> None:
    solution = Path(__file__).resolve().parents[1] / "kernelgym/tasks/suites/cpu/solutions/cpp/level1/5_Add.py"
    out = kernelgym("eval", "--task", "level1/5_Add", "--runs", "3", "--cache-dir", str(cache_dir), str(solution))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "status" in out.stdout and "ok" in out.stdout and "speedup vs eager" in out.stdout
    table = out.stdout.split("\n\n")[0]
    assert re.search(r"speedup vs eager\s+\d+\.\d{1,3}\n", table)
    for number in re.findall(r"\d+\.\d+", table):  # rounded: 3 decimals, or 3 significant digits below 1
        assert len(number.split(".")[1]) <= 3 or len(number.split(".")[1].lstrip("0")) <= 3, number


def test_eval_table_says_why_the_judge_failed() -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    out = kernelgym("eval", "--task", "level1/1_ReLU", "--server", url, str(CPU_SOLUTIONS / "level1/1_ReLU.py"))
    assert out.returncode == 3, out.stdout + out.stderr
    reason = re.search(r"^judge's reason +(.+)$", out.stdout, re.MULTILINE)
    assert reason is not None, out.stdout
    assert url in reason.group(1) and "Connection refused" in reason.group(1)


@pytest.mark.slow
def test_runs_help_names_the_calls_a_verdict_reports(cache_dir: Path) -> None:
    help_text = " ".join(kernelgym("eval", "--help").stdout.split())
    assert "20 on a CPU" in help_text and "(15 of 20)" in help_text
    out = kernelgym("eval", "--task", "level1/5_Add", "--json", "--cache-dir", str(cache_dir),
                    str(CPU_SOLUTIONS / "level1/5_Add.py"))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["timed_calls"] == 15 and "15 calls" in result["feedback"]


def test_a_client_of_a_server_never_imports_torch_or_gymnasium(tmp_path: Path) -> None:
    """`kernelgym eval --server` judges nothing itself: its process stays light (torch takes seconds to import on a GPU
    host; Gymnasium and NumPy took the client half a second)."""
    code = (
        "import sys\n"
        "from kernelgym.cli import _parser\n"
        "from kernelgym.executor.remote import RemoteExecutor\n"
        "from kernelgym.tasks import load_suite\n"
        "from kernelgym.verifier.static import run_static_stages\n"
        "_parser('eval')\n"
        "task = load_suite('cpu')['level1/1_ReLU']\n"
        "run_static_stages(task, task.solution('cpp'), 'cpp')\n"
        "print([name for name in ('torch', 'gymnasium', 'numpy') if name in sys.modules])\n"
        "import gymnasium\n"
        "print(gymnasium.spec('kernelgym/CPU-v0').kwargs['backend'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    # Importing Gymnasium afterwards still finds the environments `import kernelgym` promised.
    assert done.stdout.split() == ["[]", "cpp"]
