"""A tiny random causal LM, a tokenizer built in code and an in-process rollout client, for CPU tests of the verl code.

verl's real agent-loop machinery runs on a CPU when rollouts come from an
in-process ``generate()`` that keeps the contract of verl's ``LLMServerClient``;
the model is a 2-layer Qwen2 with random weights and a small byte-level BPE
tokenizer with a ChatML template, so nothing is downloaded. transformers,
tokenizers, hydra and verl are imported inside the functions (they come with
``kernelgym[verl]``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_lm(path: Path) -> Path:
    """Write a random 2-layer Qwen2 model and its tokenizer to ``path``; return ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [
        "import torch\nimport torch.nn as nn\n",
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n",
        "#include <torch/extension.h>\nfor (int64_t i = 0; i < n; ++i) { out[i] = in[i] > 0.f ? in[i] : 0.f; }\n",
        "The kernel failed to compile. Fix the problems above and answer with the complete program.\n",
    ]
    tokenizer.train_from_iterator(corpus * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=8192, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, bos_token_id=None, tie_word_embeddings=True,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def compose_verl_config(overrides: Sequence[str]) -> Any:
    """verl's own ``ppo_trainer`` config with ``overrides`` (Hydra's compose API)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=list(overrides))


class LocalGenerateClient:
    """Serves ``generate`` from the tiny model in this process, as verl's ``LLMServerClient`` does.

    Args:
        model_dir: a directory written by :func:`build_tiny_lm`.
        scripted: per turn of a request id, an answer text to return instead of sampling
            (``None``: sample); the tokens' log-probs are still the model's.
        max_new_tokens: cap on sampled tokens (keeps the tests fast).
    """

    def __init__(self, model_dir: Path, scripted: Sequence[str | None] = (), max_new_tokens: int = 24) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.manual_seed(0)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.scripted = list(scripted)
        self.max_new_tokens = max_new_tokens
        self.turns: dict[str, int] = defaultdict(int)
        self.requests: list[dict[str, Any]] = []

    async def generate(  # noqa: ANN201 (TokenOutput; verl is imported lazily)
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ):
        """Sample (or replay the scripted answer) after ``prompt_ids``; a ``TokenOutput``."""
        import torch
        from verl.workers.rollout.replica import TokenOutput

        turn = self.turns[request_id]
        self.turns[request_id] += 1
        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        limit = int(sampling_params.get("max_tokens", self.max_new_tokens))
        script = self.scripted[turn] if turn < len(self.scripted) else None
        if script is not None:
            new = (self.tokenizer.encode(script, add_special_tokens=False) + [self.tokenizer.eos_token_id])[:limit]
        else:
            ids = torch.tensor([prompt_ids])
            with torch.no_grad():
                out = self.model.generate(
                    ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
                    max_new_tokens=min(limit, self.max_new_tokens), pad_token_id=self.tokenizer.pad_token_id,
                )
            new = out[0, ids.shape[1] :].tolist()
        log_probs = self._log_probs(prompt_ids, new) if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=new, log_probs=log_probs, stop_reason="completed")

    def _log_probs(self, prompt_ids: list[int], new: list[int]) -> list[float]:
        import torch

        ids = torch.tensor([list(prompt_ids) + list(new)])
        with torch.no_grad():
            logits = self.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
        return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(new).unsqueeze(1)).squeeze(1).tolist()
