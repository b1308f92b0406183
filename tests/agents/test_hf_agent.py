"""The hf agent on a tiny randomly initialised model that the test builds and saves (needs transformers)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kernelgym.agents.base import AgentError, AgentRequest, Exchange
from kernelgym.agents.hf_agent import HFAgent
from kernelgym.bench import SUMMARY_FILE, add_bench_arguments, bench_main
from kernelgym.tasks import load_suite

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

SUITE = load_suite("cpu")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer Llama with a byte-level tokenizer and a chat template, saved like a real checkpoint."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    path = tmp_path_factory.mktemp("tiny-llm")
    specials = ["<pad>", "<eos>", "<unk>"]
    vocab = {token: i for i, token in enumerate(specials + sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    config = transformers.LlamaConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=16384, eos_token_id=1, pad_token_id=0,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


def request(task_id: str, seed: int, history: tuple[Exchange, ...] = ()) -> AgentRequest:
    task = SUITE[task_id]
    return AgentRequest(task, "cpp", f"Write ModelNew for task {task.id}.", history, turn=len(history) + 1, seed=seed)


def test_samples_one_answer_per_request_in_padded_batches(tiny_model: Path) -> None:
    requests = [
        request("level1/1_ReLU", seed=1),
        request("level1/2_Sigmoid", seed=2, history=(Exchange("a much longer earlier answer " * 4, "incorrect"),)),
        request("level1/3_Tanh", seed=3),
    ]
    agent = HFAgent(str(tiny_model), max_tokens=5, temperature=1.0, batch_size=2, device="cpu")
    answers = agent.act(requests)
    assert len(answers) == 3 and all(isinstance(a, str) and a for a in answers)
    again = HFAgent(str(tiny_model), max_tokens=5, temperature=1.0, batch_size=2, device="cpu").act(requests)
    assert again == answers  # the batch seed comes from the requests
    greedy = HFAgent(str(tiny_model), max_tokens=5, temperature=0.0, batch_size=3, device="cpu", dtype="float32")
    first, second = greedy.act(requests[:1]), greedy.act(requests[:1])
    assert first == second
    greedy.close()


def test_a_missing_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="cannot load a model"):
        HFAgent(str(tmp_path / "nothing-here"), device="cpu").act([request("level1/1_ReLU", seed=0)])


def test_bench_with_the_hf_agent(tiny_model: Path, tmp_path: Path) -> None:
    parser = add_bench_arguments(argparse.ArgumentParser())
    args = parser.parse_args([
        "--suite", "cpu", "--agent", "hf", "--model", str(tiny_model), "--max-tokens", "4", "--limit", "1",
        "-k", "2", "--agent-option", "device=cpu", "--agent-option", "batch_size=2", "--no-plots", "--quiet",
        "--out", str(tmp_path / "run"),
    ])
    assert bench_main(args) == 0
    summary = json.loads((tmp_path / "run" / SUMMARY_FILE).read_text())
    assert summary["agent"] == "hf" and summary["attempts"] == 2
    assert summary["metrics"]["best_turn"]["pass_at_k"] == 0.0  # a random model writes no kernel
