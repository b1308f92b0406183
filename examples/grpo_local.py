"""GRPO through kernelgym on one machine, without vLLM: verl's algorithms, kernelgym's agent loop, the real verifier.

A small causal LM (a 2-layer Qwen2 with random weights and a word-level tokenizer built here, so
nothing is downloaded) learns to write C++ ``load_inline`` kernels for four elementwise tasks of the
bundled ``cpu`` suite (ReLU, Sigmoid, Tanh, GELU). Its vocabulary holds the pieces of a kernel
program as tokens: an opening (imports, the C++ loop up to ``o[i] =``), six element expressions
(one correct per task, the identity, and an illegal ``torch::relu`` call) and a closing (the
``load_inline`` call and ``class ModelNew``); a grammar makes it write opening, one expression,
closing, end of turn. So an answer is a kernel template whose one parameter the model fills in
text, and every answer is judged by kernelgym's ``Verifier`` (cpp backend): static inspection,
build, randomized correctness. The policy starts uniform over the expressions (mean first-turn
score ~0.17) and can reach 0.6 (correct; timing is off, so no speed term).

A step is :class:`kernelgym.training.local_grpo.LocalGRPO`'s; every piece of it is the one the cluster path uses:

- rollouts: verl's ``AgentLoopWorker`` runs kernelgym's ``kernelgym`` agent loop (multi-turn
  episodes on a ``KernelEnv``, feedback turns masked out of ``response_mask``, the PrimeEcho
  trajectory reward as ``reward_score``), served by ``transformers``' ``generate`` in this process
  instead of a vLLM server;
- advantages: ``verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage`` over groups (``--advantage grpo``),
  or TRLOO's turn-level leave-one-out advantages on the PrimeEcho step rewards
  (``--advantage trloo``, :func:`kernelgym.training.advantage.trloo_advantages`);
- loss: the registered ``mirrorpop`` policy loss through ``core_algos.get_policy_loss_fn``, with
  the rollout log-probs as ``old_log_prob`` (verl's bypass mode) and verl's
  ``seq-mean-token-mean`` aggregation, plus an entropy bonus as verl's actor adds one; several
  minibatch updates per step so that later minibatches are off-policy;
- Buffered Dynamic Retry: a ``RetryBuffer``; wholly failed fresh groups push repair tasks, which
  come back as repair rows (``repair_row``) with probability ``mix_ratio``.

Judging is kept cheap: the build cache makes every distinct program compile once, and each
distinct (task, answer) pair is judged once per run by the real verifier and its verdict reused
for identical answers (``--judge-once``; the counts are logged as ``judge/*``).

One JSON line of metrics per step goes to ``--out``. Needs ``pip install 'kernelgym[verl]'``.

    python examples/grpo_local.py --seed 0 --steps 40 --out runs/grpo-local/seed0.jsonl
"""

from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernelgym import Verifier
from kernelgym.errors import MissingExtraError, require_extra
from kernelgym.options import parse_options
from kernelgym.tasks import load_suite
from kernelgym.training.advantage import check_estimator
from kernelgym.verifier import VerifierConfig


@dataclass
class Args:
    seed: int = 0
    """seed of the model's initial weights, the sampling and the task order"""
    steps: int = 40
    """training steps"""
    group_size: int = 8
    """trajectories per prompt (the GRPO group)"""
    max_turns: int = 2
    """attempts per episode (later attempts see the verifier's feedback)"""
    advantage: str = "grpo"
    """advantage estimator: grpo (verl's, one per trajectory) or trloo (turn-level leave-one-out, one per turn)"""
    learning_rate: float = 3e-3
    """Adam learning rate"""
    ppo_epochs: int = 2
    """passes over each step's batch"""
    minibatches: int = 2
    """optimizer steps per pass; every one after the first is off-policy, which MirrorPop measures"""
    loss_agg_mode: str = "seq-mean-token-mean"
    """verl's loss aggregation; a sequence-level mean keeps two-turn (failing) episodes from outweighing one-turn ones"""
    entropy_coeff: float = 0.02
    """weight of the entropy bonus at the expression choice (as verl's actor.entropy_coeff); keeps groups varied"""
    tau: float = 0.2
    """MirrorPop threshold on the mean absolute log-ratio against the rollout policy"""
    alpha: float = 0.5
    """PrimeEcho anchor weight of the first attempt"""
    gamma: float = 0.9
    """PrimeEcho discount of later improvements"""
    mix_ratio: float = 0.25
    """probability that a prompt slot is given to a repair task while the retry buffer is not empty"""
    capacity: int = 16
    """most repair tasks buffered"""
    max_retries: int = 2
    """re-bufferings of a failing repair task before it is dropped"""
    max_feedback_chars: int = 160
    """longest feedback turn shown to the model"""
    num_workers: int = 2
    """verifier worker processes"""
    judge_once: bool = True
    """judge each distinct (task, answer) once per run and reuse the verdict for identical answers"""
    out: str = "runs/grpo-local/metrics.jsonl"
    """where the per-step metrics go (JSON lines)"""


TASKS = ("level1/1_ReLU", "level1/2_Sigmoid", "level1/3_Tanh", "level1/4_GELU")

OPENING = '''from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor elementwise_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = in[i];
        o[i] = '''

EXPRESSIONS = (
    "v > 0.0f ? v : 0.0f",
    "1.0f / (1.0f + std::exp(-v))",
    "std::tanh(v)",
    "0.5f * v * (1.0f + std::erf(v * 0.70710678f))",
    "v",
    "torch::relu(x)",
)

# No trailing newline: a repair prompt strips the failed answer, and the closing must still match as one token.
CLOSING = ''';
    }
    return out;
}
"""

module = load_inline(
    name="kg_elementwise_forward",
    cpp_sources=cpp_source,
    functions=["elementwise_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.elementwise_forward(x)'''

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
FEEDBACK_WORDS = (
    "Status: ok incorrect illegal compile_error runtime_error format_error timeout Correct on 3 trials; "
    "trial 1 the output differs from the reference in of elements: max abs error Static analysis found rule "
    "violation(s): [native-torch-compute] line 15: An earlier answer to this task failed with status "
    "## Previous attempt Verifier feedback Fix the problems above and answer with complete corrected program."
)


def task_prompt(task_id: str) -> str:
    """The user message of a fresh task."""
    return f"Write ModelNew for {task_id} with the cpp backend."


def build_policy(path: Path, seed: int) -> tuple[Any, Any]:
    """A random 2-layer Qwen2 and its word-level tokenizer (program pieces are single tokens), saved to ``path``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    # words split at spaces; a newline is a token of its own (verl's ChatML merging needs one)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(" ", behavior="removed"), pre_tokenizers.Split("\n", behavior="isolated")]
    )
    tokenizer.decoder = decoders.Fuse()  # program pieces are joined exactly as written
    specials = ["[UNK]", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    corpus = [task_prompt(t) for t in TASKS] + [FEEDBACK_WORDS, "system user assistant\n"]
    tokenizer.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=specials))
    # single_word: the expression `v` must not match inside the words of a prompt (`level1/...`)
    pieces = [AddedToken(OPENING, normalized=False), AddedToken(CLOSING, normalized=False)]
    pieces += [AddedToken(expression, normalized=False, single_word=True) for expression in EXPRESSIONS]
    tokenizer.add_tokens(pieces)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="[UNK]"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, bos_token_id=None, tie_word_embeddings=True,
    )
    model = Qwen2ForCausalLM(config)
    model.config._attn_implementation = "sdpa"
    model.save_pretrained(path)
    return model, fast


class Grammar:
    """Which tokens the model may write at each position of a turn: opening, one expression, closing, end of turn.

    The same mask shapes sampling and the log-probs the loss sees, so both are the one distribution.
    """

    def __init__(self, tokenizer: Any) -> None:
        ids = tokenizer.convert_tokens_to_ids
        steps = [[ids(OPENING)], [ids(e) for e in EXPRESSIONS], [ids(CLOSING)], [tokenizer.eos_token_id]]
        self.allowed = torch.zeros(len(steps), len(tokenizer), dtype=torch.bool)
        for position, tokens in enumerate(steps):
            self.allowed[position, tokens] = True
        self.expression_ids = torch.tensor(steps[1])

    def mask(self, logits: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``logits[..., V]`` with the tokens not allowed at ``positions[...]`` (turn positions) set to -inf."""
        allowed = self.allowed[positions.clamp(max=len(self.allowed) - 1)]
        return logits.masked_fill(~allowed, float("-inf"))


def fresh_row(task_id: str) -> dict[str, Any]:
    """A dataset row as ``kernelgym train`` writes them, with the short prompt this tiny model reads."""
    return {
        "raw_prompt": [{"role": "user", "content": task_prompt(task_id)}],
        "extra_info": {"task_id": task_id, "suite": "cpu", "backend": "cpp", "split": "train"},
        "reward_model": {"ground_truth": task_id},
    }


def turn_positions(response_mask: torch.Tensor) -> torch.Tensor:
    """Position of each model token inside its own turn (runs of 1 in the mask); 0 elsewhere."""
    positions = torch.zeros_like(response_mask, dtype=torch.long)
    for row in range(response_mask.shape[0]):
        run = 0
        for col, value in enumerate(response_mask[row].tolist()):
            positions[row, col] = run if value else 0
            run = run + 1 if value else 0
    return positions


def policy_log_probs(model: Any, grammar: Grammar, batch: Any, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs of the response tokens under the grammar-masked policy, and the entropy at expression choices."""
    from kernelgym.training.local_grpo import response_logits

    responses = batch["responses"][rows]
    response_mask = batch["response_mask"][rows]
    logits = response_logits(model, batch, rows)
    positions = turn_positions(response_mask)
    logp = torch.log_softmax(grammar.mask(logits, positions), dim=-1)
    # feedback and padding tokens fall outside the grammar (log-prob -inf): they are zeroed, as the mask excludes them
    token_logp = torch.where(response_mask.bool(), logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1), 0.0)
    choice = (positions == 1) & response_mask.bool()
    probs = logp.exp()
    entropy = -(probs * torch.nan_to_num(logp, neginf=0.0)).sum(-1)
    return token_logp, entropy[choice]


def parse_args() -> Args:
    return parse_options(Args, __doc__.splitlines()[0])


if __name__ == "__main__":
    args = parse_args()
    try:
        check_estimator(args.advantage)
        require_extra("verl", "verl")
    except (MissingExtraError, ValueError) as exc:
        print(f"grpo_local.py: error: {exc}", file=sys.stderr)  # one line and status 2, as the command line
        raise SystemExit(2) from None
    from transformers import LogitsProcessor, LogitsProcessorList

    from kernelgym.training.local_grpo import GenerateClient, GRPOSettings, JudgeOnce, LocalGRPO

    torch.set_num_threads(1)  # a tiny model: more threads only contend with the judges for the cores
    random.seed(args.seed)
    np.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="grpo-local-"))
    model, tokenizer = build_policy(workdir / "policy", args.seed)
    grammar = Grammar(tokenizer)

    class TurnGrammar(LogitsProcessor):
        """Masks each sampled position of a turn to the grammar's tokens there."""

        def __init__(self, prompt_length: int) -> None:
            self.prompt_length = prompt_length

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            return grammar.mask(scores, torch.full(scores.shape[:1], input_ids.shape[1] - self.prompt_length))

    client = GenerateClient(model, tokenizer, len(grammar.allowed), lambda n: LogitsProcessorList([TurnGrammar(n)]))
    judge = JudgeOnce(
        Verifier("cpp", config=VerifierConfig(timing=False, check_variants=False), num_workers=args.num_workers),
        args.judge_once,
    )
    trainer = LocalGRPO(
        model, tokenizer, workdir / "policy", client, judge, "cpp", GRPOSettings.from_options(args),
        torch.optim.Adam(model.parameters(), lr=args.learning_rate),
        log_probs=lambda m, batch, rows: policy_log_probs(m, grammar, batch, rows), seed=args.seed,
    )
    suite = load_suite("cpu")
    missing = [t for t in TASKS if t not in suite.ids()]
    if missing:
        raise SystemExit(f"the cpu suite lacks {missing}")

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log = out_path.open("w")
    run_start = time.perf_counter()
    for step in range(1, args.steps + 1):
        record = {"step": step, **trainer.step([fresh_row(str(t)) for t in rng.permutation(TASKS)]),
                  "seconds/total": round(time.perf_counter() - run_start, 2)}
        if not all(math.isfinite(v) for v in record.values() if isinstance(v, float)):
            raise SystemExit(f"step {step}: a metric is not finite: {record}")
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(
            f"step {step:3d}  score {record['score']:.3f}  best-turn {record['best_turn_score']:.3f}  "
            f"popped {record['mirrorpop/popped_fraction']:.2f}  d_p90 {record['mirrorpop/d_p90']:.3f}  "
            f"buffer {record['retry/size']} draws {record['retry/draws']} recovered {record['retry/recovered']}  "
            f"judged {record['judge/judged']} reused {record['judge/reused']}  {record['seconds/step']:.1f}s",
            flush=True,
        )
    log.close()
    trainer.close()
