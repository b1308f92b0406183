"""The ``kernel-lm`` agent: kernelgym's own small kernel-writing model, loaded from a checkpoint directory.

Holds:
    KernelLMAgent: the ``hf`` agent on a checkpoint written by ``python -m kernelgym.training.kernel_lm``.
    CHAT_TEMPLATE: the ChatML template its tokenizer carries (training and answering render chats with it).
    CHECKPOINT_ENV: the environment variable naming the checkpoint when no ``model`` option is given.
    resolve_checkpoint: the checkpoint directory an agent would load, or an :class:`AgentError` saying what to do.

A checkpoint is a plain ``transformers`` directory (model, tokenizer with
:data:`CHAT_TEMPLATE`, ``kernel_lm.json``), so the conversation it was
fine-tuned on (:func:`kernelgym.envs.prompt.conversation`, rendered with the
template) is exactly the one it is asked at benchmark time. Its context is
short: a prompt longer than the model's context, less the answer's room,
loses its beginning (the system message and the first rules), never the task.

    kernelgym bench --suite gpu --backend triton --agent kernel-lm --model checkpoints/kernel-lm
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernelgym.agents.base import DEFAULT_SYSTEM_PROMPT, AgentError, register_agent
from kernelgym.agents.hf_agent import HFAgent
from kernelgym.tasks.task import Task

__all__ = ["CHAT_TEMPLATE", "CHECKPOINT_ENV", "METADATA_FILE", "KernelLMAgent", "resolve_checkpoint"]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHECKPOINT_ENV = "KERNELGYM_KERNEL_LM"
METADATA_FILE = "kernel_lm.json"


def resolve_checkpoint(model: str | None) -> Path:
    """The checkpoint directory: ``model``, else ``$KERNELGYM_KERNEL_LM``; it must hold ``kernel_lm.json``.

    Raises:
        AgentError: none given, or the directory is not a kernel-lm checkpoint.

    Example:
        >>> resolve_checkpoint("/no/such/dir")
        Traceback (most recent call last):
        ...
        kernelgym.agents.base.AgentError: kernel-lm agent: /no/such/dir is not a kernel-lm checkpoint (no kernel_lm.json); build one with: python -m kernelgym.training.kernel_lm --out /no/such/dir
    """
    where = model or os.environ.get(CHECKPOINT_ENV)
    if not where:
        raise AgentError(
            f"kernel-lm agent: no checkpoint given; pass --model DIR or set {CHECKPOINT_ENV} "
            "(build one with: python -m kernelgym.training.kernel_lm --out DIR)"
        )
    path = Path(where).expanduser()
    if not (path / METADATA_FILE).is_file():
        raise AgentError(
            f"kernel-lm agent: {where} is not a kernel-lm checkpoint (no {METADATA_FILE}); "
            f"build one with: python -m kernelgym.training.kernel_lm --out {where}"
        )
    return path


@register_agent("kernel-lm")
class KernelLMAgent(HFAgent):
    """kernelgym's small Triton-writing model, sampled like the ``hf`` agent.

    Args:
        model: the checkpoint directory (``None``: ``$KERNELGYM_KERNEL_LM``).
        temperature: sampling temperature (``0``: greedy decoding).
        top_p: nucleus sampling mass.
        max_tokens: most new tokens per answer.
        batch_size: requests generated together.
        device: torch device (``None``: ``"cuda"`` when available, else ``"cpu"``).
        system_prompt: the system message (the one it was trained with by default).

    Example:
        >>> from kernelgym.agents import agent_names
        >>> "kernel-lm" in agent_names()
        True
    """

    def __init__(
        self,
        model: str | None = None,
        temperature: float = 0.7,
        top_p: float = 0.95,
        max_tokens: int = 768,
        batch_size: int = 8,
        device: str | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        super().__init__(
            str(resolve_checkpoint(model)), temperature=temperature, top_p=top_p, max_tokens=max_tokens,
            batch_size=batch_size, device=device, dtype="float32", system_prompt=system_prompt, strip_thinking=False,
        )

    def skip_reason(self, task: Task, backend: str) -> str | None:
        """It writes Triton answers only: a task asked for another backend is skipped."""
        return None if backend == "triton" else f"kernel-lm writes Triton answers only, not {backend!r} ones"

    def _encode(self, texts: list[str]) -> dict[str, Any]:
        """Left-truncate each prompt to the context the model has left after the answer's room."""
        room = int(self._model.config.max_position_embeddings) - self.max_tokens
        if room < 1:
            raise AgentError(f"kernel-lm agent: max_tokens {self.max_tokens} leaves no room for the prompt "
                             f"in a context of {self._model.config.max_position_embeddings} tokens")
        self._tokenizer.truncation_side = "left"
        return self._tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=room,
                               return_token_type_ids=False)
