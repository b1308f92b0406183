"""The local trainer's rollout client samples the turns asked for together in one left-padded ``generate`` call."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")
pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from kernelgym.training.local_grpo import GenerateClient  # noqa: E402

from .tiny_lm import build_tiny_lm  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_lm(tmp_path_factory.mktemp("tiny"))
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def _ask(client, prompts, limits):
    async def all_at_once():
        return await asyncio.gather(*(
            client.generate(f"r{i}", prompt_ids=p, sampling_params={"max_tokens": n})
            for i, (p, n) in enumerate(zip(prompts, limits, strict=True))
        ))
    return asyncio.run(all_at_once())


def test_turns_asked_together_are_one_batch_with_the_log_probs_of_each_unpadded_sequence(tiny):
    model, tokenizer = tiny
    client = GenerateClient(model, tokenizer, max_new_tokens=12)
    prompts = [tokenizer.encode(text) for text in ("import torch\n", "class ModelNew(nn.Module):\n    def", "x")]
    torch.manual_seed(0)
    outputs = _ask(client, prompts, [12, 5, 30])

    assert client.batch_sizes == [3]
    for prompt, limit, out in zip(prompts, [12, 5, 12], outputs, strict=True):
        assert 1 <= len(out.token_ids) <= limit
        assert len(out.log_probs) == len(out.token_ids)
        assert tokenizer.eos_token_id not in out.token_ids[:-1]
        # the same tokens scored alone, without padding, give the log-probs the batch reported
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.token_ids)[:, None]).squeeze(-1)
        assert torch.allclose(torch.tensor(out.log_probs), expected, atol=1e-4)


def test_a_failing_generate_reaches_every_waiting_turn(tiny):
    model, tokenizer = tiny
    client = GenerateClient(model, tokenizer, max_new_tokens=4)

    def broken(prompts, limits):
        raise RuntimeError("out of memory")

    client.sample = broken
    with pytest.raises(RuntimeError, match="out of memory"):
        _ask(client, [[1, 2], [3]], [4, 4])
