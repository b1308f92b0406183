"""kernelgym's small kernel-writing model: a BPE tokenizer and a decoder trained from scratch on the corpus.

Holds:
    ModelSize: the shape of the decoder (a ``transformers`` Qwen2 config).
    SIZES: ``toy`` (tests, ~0.13M parameters) and ``small`` (the default, ~28M parameters with its full vocabulary).
    train_tokenizer: a byte-level BPE tokenizer trained on corpus text, with the chat template the agent uses.
    build_model: a randomly initialised decoder of a size for a tokenizer.
    pretraining_texts: the raw programs of corpus items (causal LM on every token).
    tokenizer_texts: the texts the tokenizer is trained on (programs, system message, task prompts).
    task_prompt: the task prompt a ``KernelEnv`` shows for the ``triton`` backend.
    finetuning_pair, finetuning_pairs: (chat prompt, answer) texts, the prompt built by kernelgym's own prompt builder.
    train_causal_lm: AdamW steps of next-token loss, on every token or on the answer tokens only.
    save_checkpoint, load_checkpoint: a checkpoint directory the ``kernel-lm`` agent loads.
    main: ``python -m kernelgym.training.kernel_lm`` (corpus file -> tokenizer, pretraining, fine-tuning, checkpoint).

Fine-tuning prompts are the ones a ``KernelEnv`` shows and the benchmark sends
(:func:`kernelgym.envs.prompt.build_prompt` for the ``triton`` backend, then
:func:`kernelgym.envs.prompt.conversation`), rendered with
:data:`kernelgym.agents.kernel_lm.CHAT_TEMPLATE`; an answer is the item's
program in one fenced block, ended by ``<|im_end|>``. A sequence longer than
the context keeps its end (the answer and the task), as the agent does.
``transformers`` and ``tokenizers`` come with ``pip install 'kernelgym[hf]'``.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents.kernel_lm import CHAT_TEMPLATE, METADATA_FILE
from kernelgym.envs.prompt import SYSTEM_PROMPT, build_prompt, conversation, sanitize
from kernelgym.errors import require_extra
from kernelgym.tasks import Task
from kernelgym.training.corpus import CorpusItem, item_task

__all__ = [
    "SIZES", "ModelSize", "build_model", "finetuning_pair", "finetuning_pairs", "load_checkpoint", "pretraining_texts", "save_checkpoint",
    "task_prompt", "tokenizer_texts", "train_causal_lm", "train_tokenizer",
]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class ModelSize:
    """The shape of the decoder.

    Attributes:
        vocab_size: BPE vocabulary, special tokens included.
        hidden: width of the residual stream.
        layers: transformer blocks.
        heads: attention heads.
        kv_heads: key/value heads (grouped-query attention).
        intermediate: width of each MLP.
        context: longest sequence (prompt and answer), in tokens.
    """

    vocab_size: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    context: int


SIZES = {
    "toy": ModelSize(vocab_size=1024, hidden=64, layers=2, heads=2, kv_heads=1, intermediate=128, context=2048),
    "small": ModelSize(vocab_size=8192, hidden=512, layers=8, heads=8, kv_heads=4, intermediate=1408, context=2048),
}


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` (a ``PreTrainedTokenizerFast`` with the agent's chat template).

    Byte-level, so any text (a feedback log, an unseen identifier) is encoded without unknown tokens.
    """
    tokenizers = require_extra("tokenizers", "hf")
    transformers = require_extra("transformers", "hf")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>",
                                                pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer: Any, size: ModelSize, seed: int = 0) -> Any:
    """A randomly initialised Qwen2 decoder of ``size`` over ``tokenizer``'s vocabulary (tied embeddings)."""
    transformers = require_extra("transformers", "hf")
    import torch

    torch.manual_seed(seed)
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=size.hidden, intermediate_size=size.intermediate,
        num_hidden_layers=size.layers, num_attention_heads=size.heads, num_key_value_heads=size.kv_heads,
        max_position_embeddings=size.context, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=None, tie_word_embeddings=True,
    )
    return transformers.Qwen2ForCausalLM(config)


def pretraining_texts(items: Sequence[CorpusItem]) -> list[str]:
    """Every item's task program and answer program, as separate documents."""
    return [text for item in items for text in (item.task_source, item.answer_source)]


def tokenizer_texts(items: Sequence[CorpusItem]) -> list[str]:
    """What the tokenizer learns its merges from: the programs, the system message and the task prompts."""
    return [*pretraining_texts(items), SYSTEM_PROMPT, *(task_prompt(item_task(item)) for item in items)]


def task_prompt(task: Task) -> str:
    """The task prompt a ``KernelEnv`` on the ``triton`` backend shows for ``task``."""
    from kernelgym.envs.kernel_env import MAX_PROMPT_CHARS
    from kernelgym.verifier import backend_language

    return sanitize(build_prompt(task, backend_language("triton")), MAX_PROMPT_CHARS)


def finetuning_pair(task: Task, answer: str, tokenizer: Any, system_prompt: str | None = SYSTEM_PROMPT) -> tuple[str, str]:
    """``(prompt, answer)`` texts: the chat a benchmark sends for ``task``, and ``answer`` in a fenced block."""
    messages = conversation(task_prompt(task), system_prompt=system_prompt)
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return prompt, f"```python\n{answer.rstrip()}\n```"


def finetuning_pairs(items: Sequence[CorpusItem], tokenizer: Any,
                     system_prompt: str | None = SYSTEM_PROMPT) -> list[tuple[str, str]]:
    """:func:`finetuning_pair` of every item's task and answer."""
    return [finetuning_pair(item_task(item), item.answer_source, tokenizer, system_prompt) for item in items]


def _encode(tokenizer: Any, prompt: str, answer: str, context: int) -> tuple[list[int], int]:
    """Token ids of ``prompt + answer + <|im_end|>`` (prompt and answer tokenized apart, as at answer time), cut
    to the last ``context`` tokens; and how many of them are prompt."""
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    answer_ids = tokenizer.encode(answer, add_special_tokens=False) + [tokenizer.eos_token_id]
    ids = (prompt_ids + answer_ids)[-context:]
    return ids, max(0, len(ids) - len(answer_ids))


def train_causal_lm(model: Any, tokenizer: Any, examples: Sequence[str | tuple[str, str]], steps: int,
                    batch_size: int = 8, learning_rate: float = 1e-3, seed: int = 0) -> list[float]:
    """``steps`` AdamW steps of next-token loss on batches drawn from ``examples``; the loss of each step.

    A plain text is learned on every token (pretraining); a ``(prompt, answer)`` pair on the answer's
    tokens only (fine-tuning). The learning rate decays linearly to a tenth. On a GPU the forward pass runs
    in bfloat16 autocast (the weights and the optimizer stay fp32).
    """
    import torch

    context = int(model.config.max_position_embeddings)
    encoded = []
    for example in examples:
        if isinstance(example, str):
            ids = (tokenizer.encode(example, add_special_tokens=False) + [tokenizer.pad_token_id])[:context]
            encoded.append((ids, 0))
        else:
            encoded.append(_encode(tokenizer, *example, context))
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - 0.9 * step / max(1, steps))
    model.train()
    losses = []
    for _ in range(steps):
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        width = max(len(ids) for ids, _ in batch)
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, learned_from) in enumerate(batch):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            labels[row, learned_from:len(ids)] = torch.tensor(ids[learned_from:])
            mask[row, :len(ids)] = 1
        with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=model.device.type == "cuda"):
            loss = model(input_ids=input_ids.to(model.device), attention_mask=mask.to(model.device),
                         labels=labels.to(model.device)).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def save_checkpoint(path: str | Path, model: Any, tokenizer: Any, metadata: dict[str, Any]) -> Path:
    """Write model, tokenizer and ``kernel_lm.json`` (``metadata``) to ``path``; the ``kernel-lm`` agent loads it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    return path


def load_checkpoint(path: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, metadata)`` of a checkpoint written by :func:`save_checkpoint`."""
    transformers = require_extra("transformers", "hf")
    path = Path(path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(path).eval()
    return model, tokenizer, json.loads((path / METADATA_FILE).read_text())


@dataclass
class KernelLMOptions:
    """Options of ``python -m kernelgym.training.kernel_lm``."""

    corpus: str = "corpus/train.jsonl"
    """the corpus file (``python -m kernelgym.training.corpus``)"""
    out: str = "checkpoints/kernel-lm"
    """the checkpoint directory written"""
    size: str = "small"
    """model size: small (~28M parameters) or toy (tests)"""
    pretrain_steps: int = 2000
    """steps of next-token loss on the corpus's programs"""
    finetune_steps: int = 2000
    """steps of answer loss on (benchmark prompt, answer) pairs"""
    batch_size: int = 16
    """sequences per step"""
    learning_rate: float = 6e-4
    """AdamW's peak learning rate"""
    seed: int = 0
    """seed of the initial weights and the batch order"""
    device: str = ""
    """torch device ("": cuda when there is one)"""


def main(argv: Sequence[str] | None = None) -> int:
    """Train a tokenizer and a model on a corpus file, pretrain, fine-tune, write the checkpoint."""
    import torch

    from kernelgym.options import parse_options
    from kernelgym.training.corpus import read_jsonl

    options = parse_options(KernelLMOptions, __doc__.splitlines()[0], argv)
    if options.size not in SIZES:
        print(f"kernel_lm: error: --size must be one of {sorted(SIZES)}", file=sys.stderr)
        return 2
    items = read_jsonl(options.corpus)
    size = SIZES[options.size]
    tokenizer = train_tokenizer(tokenizer_texts(items), size.vocab_size)
    model = build_model(tokenizer, size, options.seed)
    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    pretrain = train_causal_lm(model, tokenizer, pretraining_texts(items), options.pretrain_steps, options.batch_size,
                               options.learning_rate, options.seed)
    finetune = train_causal_lm(model, tokenizer, finetuning_pairs(items, tokenizer), options.finetune_steps,
                               options.batch_size, options.learning_rate, options.seed + 1)
    metadata = {"size": asdict(size), "corpus": options.corpus, "items": len(items), "seed": options.seed,
                "pretrain_steps": options.pretrain_steps, "finetune_steps": options.finetune_steps,
                "pretrain_loss": pretrain[-1] if pretrain else None, "finetune_loss": finetune[-1] if finetune else None,
                "parameters": sum(p.numel() for p in model.parameters())}
    save_checkpoint(options.out, model.to("cpu"), tokenizer, metadata)
    print(json.dumps(metadata))
    return 0


if __name__ == "__main__":
    sys.exit(main())
