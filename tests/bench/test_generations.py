"""Reading answers generated offline (``kernelgym eval <jsonl>``): an unknown task id is named with its file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelgym.bench.generations import read_answers
from kernelgym.errors import KernelGymError
from kernelgym.tasks import load_suite


def test_an_unknown_task_id_names_its_file_and_line(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    records = [{"task_id": "level1/1_ReLU", "answer": "x"}, {"task_id": "level1/99_Nope", "answer": "x"},
               {"task_id": "2_Sigmoid", "answer": "x"}]
    answers.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(KernelGymError) as raised:
        read_answers(answers, load_suite("cpu"))
    assert f"'level1/99_Nope' ({answers}:2)" in str(raised.value)
    assert "kernelgym tasks --suite cpu" in str(raised.value)
    answers.write_text("".join(json.dumps(r) + "\n" for r in records[::2]))
    assert [task.id for task, _, _ in read_answers(answers, load_suite("cpu")).answers] == [
        "level1/1_ReLU", "level1/2_Sigmoid",
    ]
