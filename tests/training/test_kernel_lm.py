"""The small kernel-writing model at toy size: tokenizer, pretraining, fine-tuning, checkpoint, the ``kernel-lm`` agent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.agents import AgentError, AgentRequest, make_agent
from kernelgym.agents.kernel_lm import CHECKPOINT_ENV
from kernelgym.training.corpus import generate, item_task

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from kernelgym.training.kernel_lm import (  # noqa: E402 (after the skips: needs transformers)
    SIZES,
    build_model,
    finetuning_pairs,
    load_checkpoint,
    pretraining_texts,
    save_checkpoint,
    tokenizer_texts,
    train_causal_lm,
    train_tokenizer,
)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


@pytest.fixture(scope="module")
def items():
    return generate(10, seed=0)


@pytest.fixture(scope="module")
def checkpoint(items, tmp_path_factory) -> Path:
    """A toy model pretrained and fine-tuned a few steps, saved."""
    torch.set_num_threads(1)
    size = SIZES["toy"]
    tokenizer = train_tokenizer(tokenizer_texts(items), size.vocab_size)
    model = build_model(tokenizer, size, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    pretrain = train_causal_lm(model, tokenizer, pretraining_texts(items)[:2], steps=8, batch_size=2,
                               learning_rate=1e-2)
    finetune = train_causal_lm(model, tokenizer, finetuning_pairs(items, tokenizer)[:2], steps=3, batch_size=2,
                               learning_rate=1e-2)
    assert all(torch.isfinite(torch.tensor(pretrain + finetune)))
    assert pretrain[-1] < pretrain[0]  # two documents, learned over and over
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    return save_checkpoint(tmp_path_factory.mktemp("kernel-lm"), model, tokenizer, {"size": "toy"})


def test_finetuning_prompts_are_the_benchmarks(items) -> None:
    tokenizer = train_tokenizer(tokenizer_texts(items[:2]), SIZES["toy"].vocab_size)
    prompt, answer = finetuning_pairs(items[:1], tokenizer)[0]
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert items[0].task_source.strip() in prompt and "Target: Triton" in prompt
    assert answer.startswith("```python\n") and "class ModelNew" in answer
    assert tokenizer.decode(tokenizer.encode(answer)) == answer  # byte-level: nothing lost


def test_checkpoint_round_trips(checkpoint: Path, items) -> None:
    model, tokenizer, metadata = load_checkpoint(checkpoint)
    assert metadata == {"size": "toy"}
    ids = torch.tensor([tokenizer.encode(items[0].answer_source)[:32]])
    again, _, _ = load_checkpoint(checkpoint)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)


def test_kernel_lm_agent_answers_from_the_checkpoint(checkpoint: Path, items) -> None:
    agent = make_agent("kernel-lm", model=str(checkpoint), max_tokens=8, temperature=0.0)
    request = AgentRequest(item_task(items[0]), "triton", "Write ModelNew.", seed=1)
    answers = agent.act([request, request])
    assert len(answers) == 2 and answers[0] == answers[1] and isinstance(answers[0], str)
    assert agent.skip_reason(request.task, "triton") is None
    assert "Triton answers only" in agent.skip_reason(request.task, "cuda")


def test_kernel_lm_agent_without_a_checkpoint_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CHECKPOINT_ENV, raising=False)
    with pytest.raises(AgentError, match="pass --model DIR or set KERNELGYM_KERNEL_LM"):
        make_agent("kernel-lm")
    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path))
    with pytest.raises(AgentError, match="is not a kernel-lm checkpoint"):
        make_agent("kernel-lm")


def test_bench_without_a_checkpoint_ends_in_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "kernelgym.cli", "bench", "--suite", "cpu", "--agent", "kernel-lm",
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "no checkpoint given" in done.stderr


def test_the_command_writes_a_checkpoint_the_agent_loads(items, tmp_path: Path) -> None:
    from kernelgym.training.corpus import write_jsonl

    corpus = write_jsonl(items[:4], tmp_path / "train.jsonl")
    out = tmp_path / "ckpt"
    done = subprocess.run([sys.executable, "-m", "kernelgym.training.kernel_lm", "--corpus", str(corpus), "--size", "toy",
                           "--pretrain-steps", "2", "--finetune-steps", "2", "--batch-size", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"items": 4' in done.stdout
    assert make_agent("kernel-lm", model=str(out)).model_path == str(out)


def test_kernel_lm_agent_keeps_the_end_of_a_prompt_too_long_for_its_context(checkpoint: Path, items) -> None:
    agent = make_agent("kernel-lm", model=str(checkpoint), max_tokens=1948, temperature=0.0)
    agent._load()
    prompt = "x " * 5000 + items[0].task_source
    encoded = agent._encode([agent._render(AgentRequest(item_task(items[0]), "triton", prompt))])
    ids = encoded["input_ids"][0].tolist()
    assert len(ids) == 2048 - 1948
    assert agent._tokenizer.decode(ids).endswith("<|im_start|>assistant\n")


def test_kernelgym_bench_runs_the_kernel_lm_agent_on_a_corpus_suite(checkpoint: Path, items, tmp_path: Path) -> None:
    import json

    from kernelgym.training.corpus import write_suite

    write_suite(items[:2], tmp_path / "suite")
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "kernelgym.cli", "bench", "--suite", f"kernelbench:{tmp_path / 'suite'}", "--backend",
         "triton", "--agent", "kernel-lm", "--model", str(checkpoint), "--max-tokens", "16", "--no-timing", "--quiet",
         "--no-plots", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=ENV,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    attempts = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 2 and all(a["backend"] == "triton" and a["status"] for a in attempts)
