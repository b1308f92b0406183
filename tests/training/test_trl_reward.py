"""The TRL reward and dataset, and examples/trl_grpo.py: TRL's own GRPOTrainer for two steps on a CPU.

The reward's contract is checked with a fake verifier and with the real ``cpp`` verifier; the
trainer run needs ``pip install 'kernelgym[trl]'`` and is skipped without it.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from kernelgym.errors import TaskError
from kernelgym.training.trl_reward import KernelGymReward, suite_dataset
from kernelgym.verifier.result import JudgeError

from ..fakes import FakeVerifier, judge
from .example_runs import ROOT, run_example, run_without

EXAMPLE = ROOT / "examples" / "trl_grpo.py"
needs_trl = pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs pip install 'kernelgym[trl]'")

ILLEGAL = """```python
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
```"""


def assistant(text: str) -> list[dict[str, str]]:
    """A conversational completion, as TRL hands it to a reward function."""
    return [{"role": "assistant", "content": text}]


def test_each_completion_is_judged_against_its_rows_task_in_one_batch():
    fake = FakeVerifier()
    reward = KernelGymReward(suite="cpu", backend="cpp", verifier=fake)
    logged: dict[str, float] = {}
    scores = reward(
        prompts=[[{"role": "user", "content": "p"}]] * 3,
        completions=[assistant("ok 2.0"), assistant("<think>plan</think>illegal"), "incorrect"],
        task_id=["level1/1_ReLU", "level1/1_ReLU", "level1/2_Sigmoid"],
        log_metric=logged.__setitem__,
    )
    expected = [judge("t", text).score for text in ("ok 2.0", "illegal", "incorrect")]
    assert scores == expected and scores[0] > scores[2] > scores[1] == 0.0
    assert fake.calls == [("evaluate_many", 3)]
    assert logged == {"kernelgym/solved": pytest.approx(1 / 3), "kernelgym/compiled": pytest.approx(2 / 3),
                      "kernelgym/illegal": pytest.approx(1 / 3)}
    reward.close()
    assert not fake.closed  # a verifier passed in belongs to the caller


def test_a_judge_error_is_judged_again_then_raised_never_paid():
    fake = FakeVerifier()
    reward = KernelGymReward(suite="cpu", backend="cpp", verifier=fake, judge_retries=2)
    with pytest.raises(JudgeError):
        reward(prompts=["p", "p"], completions=["ok", "judge_error"], task_id=["level1/1_ReLU"] * 2)
    assert fake.calls == [("evaluate_many", 2), ("evaluate_many", 1), ("evaluate_many", 1)]


def test_rows_without_a_task_or_with_an_unknown_one_are_refused():
    reward = KernelGymReward(suite="cpu", backend="cpp", verifier=FakeVerifier())
    with pytest.raises(TaskError, match="task_id"):
        reward(prompts=["p"], completions=["ok"])
    with pytest.raises(TaskError):
        reward(prompts=["p"], completions=["ok"], task_id=["level9/no_such_task"])


@pytest.mark.slow
def test_real_answers_are_scored_by_the_real_verifier(cpu_verifier, cpu_suite):
    solution = cpu_suite["level1/1_ReLU"].solution("cpp")
    reward = KernelGymReward(suite="cpu", backend="cpp", verifier=cpu_verifier)
    scores = reward(prompts=["p", "p"], completions=[assistant(solution), assistant(ILLEGAL)],
                    task_id=["level1/1_ReLU"] * 2)
    assert scores[0] > 0.5 and scores[1] == 0.0


def test_suite_dataset_holds_conversational_prompts_and_task_ids():
    pytest.importorskip("datasets")
    dataset = suite_dataset("cpu", "cpp", task_ids=["level1/2_Sigmoid", "level1/1_ReLU"])
    assert dataset.column_names == ["prompt", "task_id"]
    assert dataset["task_id"] == ["level1/2_Sigmoid", "level1/1_ReLU"]
    assert [m["role"] for m in dataset[0]["prompt"]] == ["system", "user"]
    assert "Sigmoid" in dataset[0]["prompt"][1]["content"]
    assert len(suite_dataset("cpu", "cpp")) == 23
    with pytest.raises(TaskError, match="level9/none"):
        suite_dataset("cpu", "cpp", task_ids=["level9/none"])


def test_the_docs_excerpt_is_the_examples_code():
    doc = (ROOT / "docs" / "trl.md").read_text()
    excerpt = doc.split("<!-- not-run: an excerpt of examples/trl_grpo.py")[1].split("```python\n")[1].split("```")[0]
    assert excerpt.strip() and excerpt in EXAMPLE.read_text()


def test_without_trl_the_example_ends_in_one_line():
    done = run_without("trl", EXAMPLE)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "trl_grpo.py: error: 'trl' is not installed; install it with: pip install 'kernelgym[trl]'"
    ]


@pytest.mark.extended
@pytest.mark.slow
@needs_trl
def test_trl_grpo_trainer_runs_two_steps_with_the_kernelgym_reward(tmp_path):
    out = tmp_path / "log.jsonl"
    done = run_example(EXAMPLE, "--model", "tiny", "--steps", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-4000:]
    steps = [record for record in map(json.loads, out.read_text().splitlines()) if "rewards/kernelgym/mean" in record]
    assert [record["step"] for record in steps] == [1, 2]
    for record in steps:
        # the tiny random model writes no kernel: every completion was judged (a format_error scores 0)
        assert record["rewards/kernelgym/mean"] == 0.0 and record["kernelgym/solved"] == 0.0
    assert sum(line.startswith("step ") for line in done.stdout.splitlines()) == 2
