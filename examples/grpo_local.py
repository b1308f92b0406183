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

Every piece of a training step is the one the cluster path uses:

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

import asyncio
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernelgym import Verifier
from kernelgym.errors import MissingExtraError, require_extra
from kernelgym.options import parse_options
from kernelgym.tasks import load_suite
from kernelgym.training.advantage import check_estimator, trloo_advantages
from kernelgym.verifier import VerifierConfig
from kernelgym.verifier.result import EvalResult


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


class GenerateClient:
    """verl's ``LLMServerClient`` contract served by ``transformers``' ``generate`` on the policy in this process."""

    def __init__(self, model: Any, tokenizer: Any, grammar: Grammar) -> None:
        from transformers import LogitsProcessor, LogitsProcessorList

        self.model, self.tokenizer, self.grammar = model, tokenizer, grammar
        self.lock = threading.Lock()

        class TurnGrammar(LogitsProcessor):
            def __init__(self, prompt_length: int) -> None:
                self.prompt_length = prompt_length

            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                position = torch.full(scores.shape[:1], input_ids.shape[1] - self.prompt_length)
                return grammar.mask(scores, position)

        self._processors = lambda n: LogitsProcessorList([TurnGrammar(n)])

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):  # noqa: ANN201
        """Sample one turn after ``prompt_ids``; a verl ``TokenOutput`` with the sampled tokens' log-probs."""
        from verl.workers.rollout.replica import TokenOutput

        ids = torch.tensor([prompt_ids])
        limit = int(sampling_params.get("max_tokens", len(self.grammar.allowed)))
        with self.lock, torch.no_grad():
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
                max_new_tokens=min(limit, len(self.grammar.allowed)), logits_processor=self._processors(ids.shape[1]),
                pad_token_id=self.tokenizer.pad_token_id, return_dict_in_generate=True, output_scores=True,
            )
        new = out.sequences[0, ids.shape[1]:].tolist()
        log_probs = [float(torch.log_softmax(s[0], -1)[t]) for s, t in zip(out.scores, new, strict=False)]
        return TokenOutput(token_ids=new, log_probs=log_probs, stop_reason="completed")


class JudgeOnce:
    """The real verifier, asked once per distinct (task, answer); identical answers reuse its verdict.

    Concurrent requests for the same pair wait for the one evaluation in flight.
    """

    def __init__(self, verifier: Verifier, enabled: bool) -> None:
        self.verifier, self.enabled = verifier, enabled
        self.verdicts: dict[tuple[str, str], Future] = {}
        self.lock = threading.Lock()
        self.judged = self.reused = 0
        self.seconds = 0.0

    def evaluate(self, task: Any, text: str) -> EvalResult:
        """The verdict on ``text`` for ``task``."""
        with self.lock:
            verdict = self.verdicts.get((task.id, text)) if self.enabled else None
            owner = verdict is None
            if owner:
                verdict = Future()
                if self.enabled:
                    self.verdicts[(task.id, text)] = verdict
            else:
                self.reused += 1
        if owner:
            start = time.perf_counter()
            try:
                verdict.set_result(self.verifier.evaluate(task, text))
            except Exception as exc:  # noqa: BLE001 (handed to every waiter, raised below)
                verdict.set_exception(exc)
            with self.lock:
                self.judged += 1
                self.seconds += time.perf_counter() - start
        return verdict.result()

    def evaluate_many(self, pairs: list[tuple[Any, str]]) -> list[EvalResult]:
        """Verdicts in order."""
        return [self.evaluate(task, text) for task, text in pairs]

    def close(self) -> None:
        """Stop the verifier's workers."""
        self.verifier.close()


def verl_config(model_dir: Path, loop_file: Path, args: Args) -> Any:
    """verl's own ``ppo_trainer`` config (Hydra compose) for the agent loop worker and the actor's loss."""
    from hydra import compose, initialize_config_module

    loop_file.write_text(
        "- name: kernelgym\n  _target_: kernelgym.training.agent_loop.KernelGymAgentLoop\n"
        f"  max_turns: {args.max_turns}\n  alpha: {args.alpha}\n  gamma: {args.gamma}\n  success_speedup: 0.0\n"
        f"  max_feedback_chars: {args.max_feedback_chars}\n"
    )
    overrides = [
        f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.rollout.name=vllm",  # required by the schema; nothing here starts vLLM
        "actor_rollout_ref.rollout.prompt_length=256",
        "actor_rollout_ref.rollout.response_length=96",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.agent.default_agent_loop=kernelgym",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_file}",
        "actor_rollout_ref.actor.policy_loss.loss_mode=mirrorpop",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    ]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=overrides)


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
    input_ids = batch["input_ids"][rows]
    responses = batch["responses"][rows]
    response_mask = batch["response_mask"][rows]
    logits = model(
        input_ids=input_ids, attention_mask=batch["attention_mask"][rows], position_ids=batch["position_ids"][rows]
    ).logits
    width = responses.shape[1]
    logits = logits[:, -width - 1 : -1].float()
    positions = turn_positions(response_mask)
    logp = torch.log_softmax(grammar.mask(logits, positions), dim=-1)
    # feedback and padding tokens fall outside the grammar (log-prob -inf): they are zeroed, as the mask excludes them
    token_logp = torch.where(response_mask.bool(), logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1), 0.0)
    choice = (positions == 1) & response_mask.bool()
    probs = logp.exp()
    entropy = -(probs * torch.nan_to_num(logp, neginf=0.0)).sum(-1)
    return token_logp, entropy[choice]


def quantiles(values: list[float], prefix: str) -> dict[str, float]:
    """p50 / p90 / max of ``values`` (zeros when empty)."""
    array = np.asarray(values or [0.0])
    return {f"{prefix}p50": float(np.quantile(array, 0.5)), f"{prefix}p90": float(np.quantile(array, 0.9)),
            f"{prefix}max": float(array.max())}


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
    os.environ["KERNELGYM_MIRRORPOP_TAU"] = str(args.tau)  # the mirrorpop loss reads its threshold here
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_policy_loss_fn
    from verl.utils.config import omega_conf_to_dataclass

    import kernelgym.training.verl_plugin  # noqa: F401  (registers the `kernelgym` agent loop and the `mirrorpop` loss)
    from kernelgym.training.agent_loop import OUTCOME_FIELD, TURN_REWARDS_FIELD, TrajectoryOutcome
    from kernelgym.training.mirrorpop import sequence_deviation
    from kernelgym.training.reward import set_shared_verifier
    from kernelgym.training.sampler import REPAIR_FIELD, repair_row
    from kernelgym.wrappers.retry import RepairTask, RetryBuffer, most_advanced_failure

    torch.set_num_threads(1)  # a tiny model: more threads only contend with the judges for the cores
    random.seed(args.seed)
    np.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="grpo-local-"))
    model, tokenizer = build_policy(workdir / "policy", args.seed)
    grammar = Grammar(tokenizer)
    config = verl_config(workdir / "policy", workdir / "agent_loop.yaml", args)
    actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    policy_loss = get_policy_loss_fn("mirrorpop")
    judge = JudgeOnce(
        Verifier("cpp", config=VerifierConfig(timing=False, check_variants=False), num_workers=args.num_workers),
        args.judge_once,
    )
    set_shared_verifier("cpp", judge)
    client = GenerateClient(model, tokenizer, grammar)
    worker = AgentLoopWorker(config, client)
    # verl loads a tokenizer by model type (Qwen2's byte-level BPE); this model speaks the word-level one built here.
    worker.tokenizer = client.tokenizer = tokenizer
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    buffer = RetryBuffer(capacity=args.capacity, max_retries=args.max_retries)
    suite = load_suite("cpu")
    missing = [t for t in TASKS if t not in suite.ids()]
    if missing:
        raise SystemExit(f"the cpu suite lacks {missing}")

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log = out_path.open("w")
    run_start = time.perf_counter()
    for step in range(1, args.steps + 1):
        step_start = time.perf_counter()
        # 1. prompts: every task once, a slot given to a repair task with probability mix_ratio
        rows = []
        for task_id in rng.permutation(TASKS):
            repair = buffer.draw(rng) if len(buffer) and rng.random() < args.mix_ratio else None
            row = fresh_row(str(task_id))
            rows.append(row if repair is None else repair_row(row, repair))
        n = len(rows) * args.group_size
        group = np.repeat(np.arange(len(rows)), args.group_size)
        raw = np.empty(n, dtype=object)
        raw[:] = [rows[g]["raw_prompt"] for g in group]
        info = np.empty(n, dtype=object)
        info[:] = [{**rows[g]["extra_info"], "index": int(i)} for i, g in enumerate(group)]
        batch = DataProto.from_dict(
            tensors={"dummy_tensor": torch.zeros(n, 1, dtype=torch.uint8)},
            non_tensors={"raw_prompt": raw, "extra_info": info, "index": np.arange(n)},
        )

        # 2. rollouts through verl's agent loop worker and kernelgym's agent loop (the verifier judges every turn)
        model.eval()
        judged_before, reused_before, judge_seconds_before = judge.judged, judge.reused, judge.seconds
        out = asyncio.run(worker.generate_sequences(batch))
        rollout_seconds = time.perf_counter() - step_start
        outcomes = [TrajectoryOutcome.from_dict(o) for o in out.non_tensor_batch[OUTCOME_FIELD]]
        is_repair = np.array([REPAIR_FIELD in rows[g]["extra_info"] for g in group])

        # 3. Buffered Dynamic Retry: book every group
        recovered_before = buffer.stats.recovered
        for g, row in enumerate(rows):
            members = [outcomes[i] for i in np.flatnonzero(group == g)]
            repair_data = row["extra_info"].get(REPAIR_FIELD)
            buffer.book_group(
                members[0].task_id,
                solved=any(o.solved for o in members),
                failure=most_advanced_failure(o.failure for o in members if o.failure is not None),
                repair=RepairTask(**repair_data) if repair_data is not None else None,
                origin_prompt=row["raw_prompt"][-1]["content"],
            )

        # 4. advantages: GRPO (verl) on the PrimeEcho trajectory rewards, or TRLOO on its per-turn step rewards
        response_mask = out.batch["response_mask"].float()
        if args.advantage == "trloo":
            advantages = trloo_advantages(list(out.non_tensor_batch[TURN_REWARDS_FIELD]), response_mask, group)
        else:
            advantages, _ = compute_grpo_outcome_advantage(
                token_level_rewards=out.batch["rm_scores"], response_mask=response_mask, index=group
            )
        old_log_prob = out.batch["rollout_log_probs"].float()

        # 5. MirrorPop policy loss (verl registry), minibatch updates
        model.train()
        losses, popped, deviations, entropies = [], [], [], []
        for _ in range(args.ppo_epochs):
            for rows_mb in torch.randperm(n).chunk(args.minibatches):
                log_prob, entropy = policy_log_probs(model, grammar, out.batch, rows_mb)
                mask = response_mask[rows_mb]
                loss, metrics = policy_loss(
                    old_log_prob=old_log_prob[rows_mb], log_prob=log_prob, advantages=advantages[rows_mb],
                    response_mask=mask, loss_agg_mode=args.loss_agg_mode, config=actor_config,
                )
                if args.entropy_coeff:
                    loss = loss - args.entropy_coeff * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                losses.append(float(loss.detach()))
                popped.append(metrics["actor/mirrorpop/popped_fraction"])
                deviations += sequence_deviation(log_prob, old_log_prob[rows_mb], mask).tolist()
                entropies += entropy.detach().tolist()

        # 6. metrics of the step
        fresh = [o for o, r in zip(outcomes, is_repair, strict=True) if not r]
        repairs = [o for o, r in zip(outcomes, is_repair, strict=True) if r]
        first = [o.scores[0] for o in fresh if o.scores]
        best = [max(o.scores) for o in fresh if o.scores]
        stats = buffer.stats
        record = {
            "step": step,
            "score": float(np.mean(first)) if first else 0.0,
            "first_turn_score": float(np.mean(first)) if first else 0.0,
            "best_turn_score": float(np.mean(best)) if best else 0.0,
            "solved_fraction": float(np.mean([o.solved for o in fresh])) if fresh else 0.0,
            "repair_score": float(np.mean([max(o.scores) for o in repairs if o.scores])) if repairs else 0.0,
            "prime_echo_reward": float(out.batch["rm_scores"].sum(-1).mean()),
            "attempts": float(np.mean([len(o.scores) for o in outcomes])),
            "fresh_trajectories": len(fresh),
            "repair_trajectories": len(repairs),
            "mirrorpop/popped_fraction": float(np.mean(popped)),
            **quantiles(deviations, "mirrorpop/d_"),
            "mirrorpop/tau": args.tau,
            "retry/size": stats.size, "retry/pushed": stats.pushed, "retry/draws": stats.draws,
            "retry/recovered": stats.recovered, "retry/recovered_this_step": stats.recovered - recovered_before,
            "retry/retried": stats.retried, "retry/dropped": stats.dropped, "retry/evicted": stats.evicted,
            "loss": float(np.mean(losses)),
            "expression_entropy": float(np.mean(entropies)) if entropies else 0.0,
            "judge/judged": judge.judged - judged_before, "judge/reused": judge.reused - reused_before,
            "judge/seconds": round(judge.seconds - judge_seconds_before, 2),
            "seconds/rollout": round(rollout_seconds, 2),
            "seconds/step": round(time.perf_counter() - step_start, 2),
            "seconds/total": round(time.perf_counter() - run_start, 2),
        }
        if not all(math.isfinite(v) for v in record.values() if isinstance(v, float)):
            raise SystemExit(f"step {step}: a metric is not finite: {record}")
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(
            f"step {step:3d}  score {record['score']:.3f}  best-turn {record['best_turn_score']:.3f}  "
            f"popped {record['mirrorpop/popped_fraction']:.2f}  d_p90 {record['mirrorpop/d_p90']:.3f}  "
            f"buffer {stats.size} draws {stats.draws} recovered {stats.recovered}  "
            f"judged {record['judge/judged']} reused {record['judge/reused']}  {record['seconds/step']:.1f}s",
            flush=True,
        )
    log.close()
    set_shared_verifier("cpp", None)
    judge.close()
