"""A repair task's prompt made to fit the rollout's prompt length: the failed attempt's middle gives way, the task does not.

verl's agent loop left-truncates a prompt longer than ``rollout.prompt_length``, which would cut the system prompt and
the task from a repair prompt; :func:`~kernelgym.training.sampler.repair_row` shortens the failed attempt instead.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("verl")

from transformers import AutoTokenizer  # noqa: E402
from verl.utils.tokenizer import normalize_token_ids  # noqa: E402

from kernelgym.training.sampler import prompt_fits, repair_row  # noqa: E402
from kernelgym.wrappers.retry import RepairTask, shorten_attempt  # noqa: E402

from .tiny_lm import build_tiny_lm  # noqa: E402

TASK = "Write ModelNew for this Model:\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
ATTEMPT = "\n".join(["import torch", "import triton"] + [f"x{i} = {i}  # line {i}" for i in range(120)]
                    + ["class ModelNew(nn.Module):", "    pass"])
ROW = {"raw_prompt": [{"role": "system", "content": "You write kernels."}, {"role": "user", "content": "another task"}],
       "extra_info": {"task_id": "other", "split": "train"}, "reward_model": {"ground_truth": "other"}}
REPAIR = RepairTask("level1/19_ReLU", ATTEMPT, "incorrect: output differs at [0, 3]", "incorrect", origin_prompt=TASK)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(build_tiny_lm(tmp_path_factory.mktemp("tiny-lm")))


def length(tokenizer, messages) -> int:
    return len(normalize_token_ids(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)))


def test_a_repair_prompt_that_fits_is_left_whole(tokenizer):
    whole = repair_row(ROW, REPAIR)
    fitted = repair_row(ROW, REPAIR, prompt_fits(tokenizer, length(tokenizer, whole["raw_prompt"])))
    assert fitted == whole
    assert ATTEMPT in fitted["raw_prompt"][-1]["content"]


def test_a_repair_prompt_too_long_shows_the_attempts_first_and_last_lines_and_the_whole_task(tokenizer):
    whole = repair_row(ROW, REPAIR)
    limit = length(tokenizer, whole["raw_prompt"]) * 2 // 3
    fitted = repair_row(ROW, REPAIR, prompt_fits(tokenizer, limit))
    prompt = fitted["raw_prompt"][-1]["content"]
    assert length(tokenizer, fitted["raw_prompt"]) <= limit
    assert fitted["raw_prompt"][0] == ROW["raw_prompt"][0]  # the system prompt stays
    assert prompt.startswith(TASK.rstrip()) and "incorrect: output differs at [0, 3]" in prompt
    assert "import torch" in prompt and "    pass" in prompt and "lines of the earlier answer left out" in prompt
    assert "x60 = 60" not in prompt
    # the buffer gets the whole attempt back if the repair fails again
    assert fitted["extra_info"]["repair"]["attempt"] == ATTEMPT


def test_a_prompt_that_cannot_fit_without_the_attempt_stays_whole(tokenizer):
    whole = repair_row(ROW, REPAIR)
    assert repair_row(ROW, REPAIR, prompt_fits(tokenizer, 10)) == whole


def test_as_many_lines_are_kept_as_fit(tokenizer):
    whole = repair_row(ROW, REPAIR)
    limit = length(tokenizer, whole["raw_prompt"]) - 1
    fitted = repair_row(ROW, REPAIR, prompt_fits(tokenizer, limit))
    left_out = int(re.search(r"# \.\.\. (\d+) lines of the earlier answer left out", fitted["raw_prompt"][-1]["content"])[1])
    kept = len(ATTEMPT.splitlines()) - left_out
    assert length(tokenizer, fitted["raw_prompt"]) <= limit
    one_more = repair_row(ROW, shorten_attempt(REPAIR, kept + 1))
    assert one_more["raw_prompt"][-1]["content"] != fitted["raw_prompt"][-1]["content"]
    assert length(tokenizer, one_more["raw_prompt"]) > limit
