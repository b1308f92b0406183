"""GRPO on the kernel-lm policy: a fine-tuned checkpoint writes free-text Triton answers, the real judge pays them.

The policy is a checkpoint of ``python -m kernelgym.training.kernel_lm`` (a tokenizer and decoder trained
from scratch on kernelgym's corpus); the tasks are a suite (a corpus written with ``--suite-dir``, or
any KernelBench tree); every answer is judged by kernelgym's ``Verifier`` on the ``triton`` backend (on
a GPU, or Triton's interpreter on a CPU). A step is :class:`kernelgym.training.local_grpo.LocalGRPO`'s:
rollouts through verl's ``AgentLoopWorker`` and kernelgym's multi-turn agent loop (PrimeEcho rewards,
feedback turns masked out), Buffered Dynamic Retry, GRPO or TRLOO advantages, the MirrorPop loss. The
policy samples with plain ``transformers`` ``generate`` in this process (no vLLM): right for a model of
tens of millions of parameters. One JSON line of metrics per step goes to ``--out``; the trained policy
is saved to ``--save`` as a checkpoint the ``kernel-lm`` agent loads.

    python examples/kernel_lm_grpo.py --checkpoint checkpoints/kernel-lm --suite kernelbench:corpus/train \\
        --steps 200 --save checkpoints/kernel-lm-rl --out runs/kernel-lm-grpo/seed0.jsonl

Needs ``pip install 'kernelgym[verl,triton]'``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kernelgym import Verifier
from kernelgym.errors import MissingExtraError, require_extra
from kernelgym.options import parse_options
from kernelgym.training.advantage import check_estimator
from kernelgym.verifier import VerifierConfig


@dataclass
class Args:
    checkpoint: str = "checkpoints/kernel-lm"
    """the kernel-lm checkpoint to start from"""
    suite: str = "kernelbench:corpus/train"
    """the training tasks (a corpus written with --suite-dir, or a KernelBench tree)"""
    save: str = "checkpoints/kernel-lm-rl"
    """where the trained policy is saved (a kernel-lm checkpoint)"""
    out: str = "runs/kernel-lm-grpo/metrics.jsonl"
    """where the per-step metrics go (JSON lines)"""
    seed: int = 0
    """seed of the sampling and the task order"""
    steps: int = 200
    """training steps"""
    max_minutes: float = 0.0
    """stop after the step that ends past this many minutes of the run (0: run every step)"""
    tasks_per_step: int = 4
    """prompts per step"""
    group_size: int = 8
    """trajectories per prompt (the GRPO group)"""
    max_turns: int = 2
    """attempts per episode (later attempts see the verifier's feedback)"""
    advantage: str = "grpo"
    """advantage estimator: grpo or trloo"""
    learning_rate: float = 1e-5
    """Adam learning rate"""
    ppo_epochs: int = 1
    """passes over each step's batch"""
    minibatches: int = 4
    """optimizer steps per pass (every one after the first is off-policy, which MirrorPop measures)"""
    entropy_coeff: float = 0.0
    """weight of the entropy bonus"""
    tau: float = 0.2
    """MirrorPop threshold on the mean absolute log-ratio against the rollout policy"""
    alpha: float = 0.5
    """PrimeEcho anchor weight of the first attempt"""
    gamma: float = 0.9
    """PrimeEcho discount of later improvements"""
    mix_ratio: float = 0.25
    """probability that a prompt slot is given to a repair task while the retry buffer is not empty"""
    max_feedback_chars: int = 600
    """longest feedback turn shown to the model"""
    max_new_tokens: int = 768
    """most tokens of one answer"""
    prompt_length: int = 1024
    """most tokens of an episode's first prompt (a repair task's failed answer is shortened to fit); the episode's
    turns (answers and feedback) get the rest of the model's context, so no token lies beyond its positions"""
    num_workers: int = 4
    """verifier worker processes"""
    device: str = ""
    """torch device of the policy ("": cuda when there is one)"""


if __name__ == "__main__":
    args = parse_options(Args, __doc__.splitlines()[0])
    try:
        check_estimator(args.advantage)
        require_extra("verl", "verl")
        require_extra("triton", "triton")
    except (MissingExtraError, ValueError) as exc:
        print(f"kernel_lm_grpo.py: error: {exc}", file=sys.stderr)  # one line and status 2, as the command line
        raise SystemExit(2) from None
    from kernelgym.training.kernel_lm import load_checkpoint, save_checkpoint
    from kernelgym.training.launcher import task_rows
    from kernelgym.training.local_grpo import GenerateClient, GRPOSettings, JudgeOnce, LocalGRPO

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model, tokenizer, metadata = load_checkpoint(args.checkpoint)
    model.to(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = [{"raw_prompt": r["prompt"], "extra_info": r["extra_info"], "reward_model": r["reward_model"]}
            for r in task_rows(args.suite, "triton", "train")]
    context = int(model.config.max_position_embeddings)
    if not 0 < args.prompt_length <= context - args.max_new_tokens:
        raise SystemExit(f"kernel_lm_grpo.py: error: --prompt-length must leave room for --max-new-tokens "
                         f"({args.max_new_tokens}) in the model's context of {context} tokens")
    settings = GRPOSettings.from_options(args, capacity=4 * args.tasks_per_step, response_length=context - args.prompt_length)
    judge = JudgeOnce(Verifier("triton", config=VerifierConfig(timing=False), num_workers=args.num_workers))
    trainer = LocalGRPO(model, tokenizer, Path(args.checkpoint), GenerateClient(model, tokenizer, args.max_new_tokens),
                        judge, "triton", settings, torch.optim.Adam(model.parameters(), lr=args.learning_rate),
                        seed=args.seed)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    run_start = time.perf_counter()
    step = 0
    with out_path.open("w") as log:
        for step in range(1, args.steps + 1):
            chosen = rng.choice(len(rows), size=min(args.tasks_per_step, len(rows)), replace=False)
            record = {"step": step, **trainer.step([rows[i] for i in chosen]),
                      "seconds/total": round(time.perf_counter() - run_start, 2)}
            if not all(math.isfinite(v) for v in record.values() if isinstance(v, float)):
                raise SystemExit(f"step {step}: a metric is not finite: {record}")
            log.write(json.dumps(record) + "\n")
            log.flush()
            print(f"step {step:4d}  score {record['score']:.3f}  solved {record['solved_fraction']:.2f}  "
                  f"popped {record['mirrorpop/popped_fraction']:.2f}  buffer {record['retry/size']}  "
                  f"judged {record['judge/judged']}  {record['seconds/step']:.1f}s", flush=True)
            if args.max_minutes and record["seconds/total"] > 60 * args.max_minutes:
                print(f"stopping after step {step}: past {args.max_minutes} minutes", flush=True)
                break
    trainer.close()
    save_checkpoint(args.save, model.to("cpu"), tokenizer,
                    {**metadata, "rl": {"from": args.checkpoint, "suite": args.suite, "steps": step,
                                        "seed": args.seed, "advantage": args.advantage}})
    print(f"saved {args.save}")
