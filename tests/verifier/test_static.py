"""The static stages (extract, inspect) return their outcome: a rejection, or the code for the worker."""

from __future__ import annotations

from kernelgym.tasks import load_suite
from kernelgym.verifier import Status, run_static_stages

TASK = load_suite("cpu")["level1/1_ReLU"]


def test_no_code_is_a_format_error_with_feedback() -> None:
    outcome = run_static_stages(TASK, "no code here", "cpp")
    assert outcome.code == "" and outcome.rejection is not None
    assert outcome.rejection.status is Status.FORMAT_ERROR and "ModelNew" in outcome.rejection.feedback
    assert outcome.rejection.seconds.extract >= 0.0


def test_a_rule_violation_is_illegal_with_its_rule_ids() -> None:
    text = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n```"
    outcome = run_static_stages(TASK, text, "cpp")
    assert outcome.rejection is not None and outcome.rejection.status is Status.ILLEGAL
    assert "torch-compute-in-forward" in {v.rule for v in outcome.rejection.violations}
    assert outcome.code.startswith("import torch")


def test_a_clean_program_goes_on_to_the_worker() -> None:
    outcome = run_static_stages(TASK, TASK.solutions["cpp"], "cpp")
    assert outcome.rejection is None and "ModelNew" in outcome.code
    assert outcome.seconds.inspect > 0.0
