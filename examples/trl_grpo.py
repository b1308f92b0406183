"""GRPO with TRL's own ``GRPOTrainer``, every completion judged by kernelgym's verifier.

The dataset is a kernelgym suite in TRL's conversational format (``suite_dataset``: the system
message and the task prompt a ``KernelEnv`` shows, plus a ``task_id`` column); the reward is
``KernelGymReward``, which judges the whole batch of completions at once with a ``Verifier`` (a
local pool of sandboxed workers, or a ``kernelgym serve`` server with ``--server``) and pays each
its verifier score. Everything else is TRL's: generation, GRPO's group advantages, the loss.

``--model tiny`` builds a random 2-layer Qwen2 and a small tokenizer here, so nothing is
downloaded: it writes no kernels (its completions are judged ``format_error``, score 0), but every
piece runs as with a real model. Give a hub id or a path for a real run (a GPU is then advisable).

Needs ``pip install 'kernelgym[trl]'``.

    python examples/trl_grpo.py --model tiny --steps 2 --out runs/trl-grpo/tiny.jsonl
    python examples/trl_grpo.py --model Qwen/Qwen2.5-Coder-1.5B-Instruct --steps 200 --max-completion-length 2048
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.errors import MissingExtraError
from kernelgym.options import parse_options
from kernelgym.training.trl_reward import KernelGymReward, require_trl, suite_dataset


@dataclass
class Args:
    model: str = "tiny"
    """a hub id or a local path of a causal LM, or ``tiny`` (a random 2-layer Qwen2 built here)"""
    suite: str = "cpu"
    """task suite: cpu, gpu or kernelbench:<dir-or-parquet>[:level]"""
    backend: str = "cpp"
    """backend answers are written for and judged on"""
    tasks: str = "level1/1_ReLU,level1/2_Sigmoid"
    """comma-separated task ids of the suite (empty: every task)"""
    steps: int = 2
    """optimizer steps"""
    num_generations: int = 4
    """completions per prompt (the GRPO group)"""
    batch_size: int = 4
    """completions per device and step; a multiple of num_generations"""
    max_completion_length: int = 32
    """longest completion, in tokens"""
    learning_rate: float = 1e-5
    """AdamW learning rate"""
    num_workers: int = 2
    """verifier worker processes (local executor)"""
    server: str = ""
    """URL of a ``kernelgym serve`` server to judge on (empty: a local pool)"""
    seed: int = 0
    """seed of the model's initial weights (tiny), the sampling and the data order"""
    out: str = "runs/trl-grpo/metrics.jsonl"
    """where the trainer's log (one JSON line per logged step) goes"""


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_policy(seed: int) -> tuple[Any, Any]:
    """A random 2-layer Qwen2 and a byte-level BPE tokenizer trained here on a few lines of kernel code."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    corpus = ["import torch\nfrom torch import nn\n", "class ModelNew(nn.Module):\n    def forward(self, x):\n"]
    bpe = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus * 10, bpe)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=4096, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, bos_token_id=None, tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config), fast


def train(args: Args) -> list[dict[str, Any]]:
    """Run the trainer; returns its log (one dict per logged step)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    if args.model == "tiny":
        model, tokenizer = tiny_policy(args.seed)
    else:
        model, tokenizer = AutoModelForCausalLM.from_pretrained(args.model), AutoTokenizer.from_pretrained(args.model)
    task_ids = [t for t in args.tasks.split(",") if t] or None
    judge = {"executor": "remote", "url": args.server} if args.server else {"num_workers": args.num_workers}
    on_cpu = not torch.cuda.is_available()
    with tempfile.TemporaryDirectory(prefix="trl-grpo-") as output_dir, \
            KernelGymReward(suite=args.suite, backend=args.backend, **judge) as reward:
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=reward,
            train_dataset=suite_dataset(args.suite, args.backend, task_ids=task_ids),
            args=GRPOConfig(
                output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                num_generations=args.num_generations, max_completion_length=args.max_completion_length,
                learning_rate=args.learning_rate, logging_steps=1, save_strategy="no", report_to="none",
                seed=args.seed, use_cpu=on_cpu, bf16=not on_cpu,
            ),
        )
        trainer.train()
        return list(trainer.state.log_history)


if __name__ == "__main__":
    args = parse_options(Args, __doc__.splitlines()[0])
    try:
        require_trl()
    except MissingExtraError as exc:
        print(f"trl_grpo.py: error: {exc}", file=sys.stderr)  # one line and status 2, as the command line
        raise SystemExit(2) from None
    history = train(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as log:
        for record in history:
            log.write(json.dumps(record) + "\n")
    for record in history:
        if "rewards/kernelgym/mean" in record:
            print(f"step {record['step']:3d}  kernelgym reward {record['rewards/kernelgym/mean']:.3f}  "
                  f"solved {record.get('kernelgym/solved', 0.0):.2f}", flush=True)
    print(f"wrote {len(history)} log records to {out}")
