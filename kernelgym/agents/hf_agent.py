"""The ``hf`` agent: a local Hugging Face transformers model, sampled in batches.

Holds:
    HFAgent: loads a causal LM from a directory (or hub id already in the local cache) on first use.

``transformers`` is imported lazily: ``pip install 'kernelgym[hf]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelgym.agents.base import (
    DEFAULT_SYSTEM_PROMPT,
    AgentError,
    AgentRequest,
    BaseAgent,
    chat_messages,
    register_agent,
    strip_reasoning,
)
from kernelgym.errors import require_extra

__all__ = ["HFAgent"]


@register_agent("hf")
class HFAgent(BaseAgent):
    """A transformers causal LM that answers with its chat template and sampling.

    Requests are generated ``batch_size`` at a time (left padding). The batch's
    sampling seed is the seed of its first request, so a rerun with the same
    batch size repeats the same answers.

    Args:
        model: a model directory (or a hub id available offline).
        temperature: sampling temperature (``0``: greedy decoding).
        top_p: nucleus sampling mass.
        max_tokens: most new tokens per answer.
        batch_size: requests generated together.
        device: torch device (``None``: ``"cuda"`` when available, else ``"cpu"``).
        dtype: torch dtype name for the weights (``"auto"``: the checkpoint's).
        system_prompt: the system message (``""``: none).
        strip_thinking: drop a leading ``<think>...</think>`` block from answers.
        trust_remote_code: let transformers run the model directory's own code.

    Example:
        >>> agent = HFAgent("/models/MusaCoder-27B", batch_size=4)  # nothing is loaded yet
        >>> agent.name
        'hf'
    """

    def __init__(
        self,
        model: str,
        temperature: float = 0.6,
        top_p: float = 0.95,
        max_tokens: int = 8192,
        batch_size: int = 8,
        device: str | None = None,
        dtype: str = "auto",
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        strip_thinking: bool = True,
        trust_remote_code: bool = False,
    ) -> None:
        if batch_size < 1 or max_tokens < 1:
            raise AgentError("hf agent: batch_size and max_tokens must be at least 1")
        self.model_path = model
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.system_prompt = system_prompt
        self.strip_thinking = strip_thinking
        self.trust_remote_code = trust_remote_code
        self._tokenizer: Any = None
        self._model: Any = None

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """Sample one answer per request, ``batch_size`` at a time."""
        answers: list[str] = []
        for start in range(0, len(requests), self.batch_size):
            answers.extend(self._generate(requests[start:start + self.batch_size]))
        return answers

    def close(self) -> None:
        """Drop the model and tokenizer."""
        self._model = None
        self._tokenizer = None

    def _load(self) -> None:
        transformers = require_extra("transformers", "hf")
        import torch

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                self.model_path, trust_remote_code=self.trust_remote_code
            )
            model = transformers.AutoModelForCausalLM.from_pretrained(
                self.model_path, dtype=dtype, trust_remote_code=self.trust_remote_code
            )
        except (OSError, ValueError) as exc:  # a missing directory, or a name that is no hub id
            raise AgentError(f"hf agent cannot load a model from {self.model_path!r}: {exc}") from None
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._tokenizer = tokenizer
        self._model = model.to(device).eval()

    def _render(self, request: AgentRequest) -> str:
        messages = chat_messages(request, self.system_prompt)
        if getattr(self._tokenizer, "chat_template", None):
            return self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        # A base model without a chat template gets the conversation as plain text.
        return "\n\n".join(f"{m['role']}:\n{m['content']}" for m in messages) + "\n\nassistant:\n"

    def _encode(self, texts: list[str]) -> dict[str, Any]:
        """The padded batch of prompt token ids (and attention mask) for ``texts``."""
        return self._tokenizer(texts, return_tensors="pt", padding=True, return_token_type_ids=False)

    def _generate(self, requests: Sequence[AgentRequest]) -> list[str]:
        import torch

        if self._model is None:
            self._load()
        tokenizer, model = self._tokenizer, self._model
        texts = [self._render(r) for r in requests]
        encoded = self._encode(texts)
        encoded = {name: tensor.to(model.device) for name, tensor in encoded.items()}
        sampling: dict[str, Any] = {"do_sample": False}
        if self.temperature > 0:
            sampling = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
        torch.manual_seed(requests[0].seed)
        with torch.no_grad():
            output = model.generate(
                **encoded, max_new_tokens=self.max_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
            )
        new_tokens = output[:, encoded["input_ids"].shape[1]:]
        texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [strip_reasoning(t) if self.strip_thinking else t for t in texts]
