"""The small local trainer: GRPO steps on one machine, without vLLM, with verl's algorithms and the real judge.

Holds:
    GRPOSettings: the knobs of a step (group, turns, advantage, MirrorPop, PrimeEcho, Buffered Dynamic Retry).
    JudgeOnce: the real verifier, asked once per distinct (task, answer); it keeps every verdict it gave.
    GenerateClient: verl's ``LLMServerClient`` contract served by ``transformers``' ``generate`` in this process.
    response_logits: the policy's logits that predict each response token of a rollout batch.
    plain_log_probs: the response tokens' log-probs and entropies under a causal LM.
    LocalGRPO: one training step: rollouts through kernelgym's agent loop, advantages, the MirrorPop loss.

Every piece is the one the cluster path uses: verl's ``AgentLoopWorker`` runs
kernelgym's ``kernelgym`` agent loop (multi-turn ``KernelEnv`` episodes,
feedback turns masked out, the PrimeEcho trajectory reward), advantages are
verl's GRPO ones or TRLOO's turn-level ones, the loss is the registered
``mirrorpop`` policy loss with the rollout log-probs as ``old_log_prob``, and
wholly failed fresh groups push repair tasks into a ``RetryBuffer``. Used by
``examples/grpo_local.py`` (a grammar-constrained toy policy) and by the
kernel-lm policy (:mod:`kernelgym.training.kernel_lm`). Needs ``pip install 'kernelgym[verl]'``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernelgym.verifier.result import EvalResult

__all__ = ["GRPOSettings", "GenerateClient", "JudgeOnce", "LocalGRPO", "plain_log_probs", "response_logits"]


@dataclass(frozen=True)
class GRPOSettings:
    """The knobs of a local GRPO step (the examples' options of the same names set them).

    Attributes:
        group_size: trajectories per prompt (the GRPO group).
        max_turns: attempts per episode (later attempts see the verifier's feedback).
        advantage: ``grpo`` (verl's, one per trajectory) or ``trloo`` (turn-level leave-one-out).
        ppo_epochs: passes over each step's batch.
        minibatches: optimizer steps per pass; every one after the first is off-policy, which MirrorPop measures.
        loss_agg_mode: verl's loss aggregation.
        entropy_coeff: weight of the entropy bonus (as verl's ``actor.entropy_coeff``).
        tau: MirrorPop threshold on the mean absolute log-ratio against the rollout policy.
        alpha: PrimeEcho anchor weight of the first attempt.
        gamma: PrimeEcho discount of later improvements.
        mix_ratio: probability that a prompt slot goes to a repair task while the retry buffer is not empty.
        capacity: most repair tasks buffered.
        max_retries: re-bufferings of a failing repair task before it is dropped.
        max_feedback_chars: longest feedback turn shown to the model.
        prompt_length: verl's ``rollout.prompt_length`` (tokens).
        response_length: verl's ``rollout.response_length`` (tokens, all turns of a trajectory).
    """

    group_size: int = 8
    max_turns: int = 2
    advantage: str = "grpo"
    ppo_epochs: int = 2
    minibatches: int = 2
    loss_agg_mode: str = "seq-mean-token-mean"
    entropy_coeff: float = 0.02
    tau: float = 0.2
    alpha: float = 0.5
    gamma: float = 0.9
    mix_ratio: float = 0.25
    capacity: int = 16
    max_retries: int = 2
    max_feedback_chars: int = 160
    prompt_length: int = 256
    response_length: int = 96

    @classmethod
    def from_options(cls, options: Any, **overrides: Any) -> GRPOSettings:
        """The settings an options object (a script's dataclass) holds under the same names, then ``overrides``."""
        names = cls.__dataclass_fields__
        return cls(**{**{n: getattr(options, n) for n in names if hasattr(options, n)}, **overrides})


class JudgeOnce:
    """The real verifier, asked once per distinct (task, answer); identical answers reuse its verdict.

    Concurrent requests for the same pair wait for the one evaluation in flight. With ``keep_verdicts``,
    every verdict handed out (judged or reused) is kept in ``verdicts_given``, in order, so a caller can
    check that each reward came from one.
    """

    def __init__(self, verifier: Any, enabled: bool = True, keep_verdicts: bool = False) -> None:
        self.verifier, self.enabled, self.keep_verdicts = verifier, enabled, keep_verdicts
        self.verdicts: dict[tuple[str, str], Future] = {}
        self.verdicts_given: list[EvalResult] = []
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
        result = verdict.result()
        if self.keep_verdicts:
            with self.lock:
                self.verdicts_given.append(result)
        return result

    def evaluate_many(self, pairs: list[tuple[Any, str]]) -> list[EvalResult]:
        """Verdicts in order."""
        return [self.evaluate(task, text) for task, text in pairs]

    def close(self) -> None:
        """Stop the verifier's workers."""
        self.verifier.close()


class GenerateClient:
    """verl's ``LLMServerClient`` contract served by ``transformers``' ``generate`` on the policy in this process.

    The agent loop asks for every trajectory's turn at once (one coroutine each); the requests that arrive
    within ``gather_s`` of the first are sampled together, left-padded, in one ``generate`` call.

    Args:
        model: the policy (a causal LM).
        tokenizer: its tokenizer.
        max_new_tokens: most tokens of one turn.
        processors: ``prompt_length -> LogitsProcessorList`` shaping sampling (``None``: plain sampling);
            whatever shapes sampling must shape the trainer's log-probs too. ``prompt_length`` is the padded
            width of the batch's prompts.
        gather_s: how long the first request of a batch waits for others to join it.
    """

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int,
                 processors: Callable[[int], Any] | None = None, gather_s: float = 0.02) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens = max_new_tokens
        self.processors = processors
        self.gather_s = gather_s
        self.batch_sizes: list[int] = []
        self._pending: list[tuple[list[int], int, asyncio.Future]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):  # noqa: ANN201
        """Sample one turn after ``prompt_ids``; a verl ``TokenOutput`` with the sampled tokens' log-probs."""
        from verl.workers.rollout.replica import TokenOutput

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        limit = min(int(sampling_params.get("max_tokens", self.max_new_tokens)), self.max_new_tokens)
        self._pending.append((list(prompt_ids), limit, future))
        if len(self._pending) == 1:
            loop.call_later(self.gather_s, self._sample_pending)
        tokens, log_probs = await future
        return TokenOutput(token_ids=tokens, log_probs=log_probs, stop_reason="completed")

    def _sample_pending(self) -> None:
        batch, self._pending = self._pending, []
        try:
            results = self.sample([ids for ids, _, _ in batch], [limit for _, limit, _ in batch])
        except Exception as exc:  # noqa: BLE001 - handed to every waiting trajectory
            for _, _, future in batch:
                future.set_exception(exc)
            return
        for (_, _, future), result in zip(batch, results, strict=True):
            future.set_result(result)

    def sample(self, prompts: Sequence[list[int]], limits: Sequence[int]) -> list[tuple[list[int], list[float]]]:
        """One sampled turn per prompt (at most its limit of tokens, through the first end-of-turn token) and the
        log-prob of each sampled token, from one left-padded ``generate`` call."""
        import torch

        self.batch_sizes.append(len(prompts))
        width = max(len(p) for p in prompts)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.model.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.model.device)
        extra = {"logits_processor": self.processors(width)} if self.processors is not None else {}
        with torch.no_grad():
            out = self.model.generate(
                ids, attention_mask=mask, do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
                max_new_tokens=max(limits), pad_token_id=pad, eos_token_id=self.tokenizer.eos_token_id,
                return_dict_in_generate=True, output_scores=True, **extra,
            )
            new = out.sequences[:, width:]
            scores = torch.stack(out.scores, dim=1).float()  # [batch, new tokens, vocabulary]
            chosen = torch.log_softmax(scores, -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = []
        for row, limit in enumerate(limits):
            tokens = new[row, :limit].tolist()
            if self.tokenizer.eos_token_id in tokens:
                tokens = tokens[:tokens.index(self.tokenizer.eos_token_id) + 1]
            results.append((tokens, chosen[row, :len(tokens)].tolist()))
        return results


def response_logits(model: Any, batch: Any, rows: Any) -> Any:
    """The logits that predict each response token, ``[rows, response_width, vocab]``, on the model's device."""
    logits = model(**{name: batch[name][rows].to(model.device)
                      for name in ("input_ids", "attention_mask", "position_ids")}).logits
    width = batch["responses"].shape[1]
    return logits[:, -width - 1:-1].float()


def plain_log_probs(model: Any, batch: Any, rows: Any) -> tuple[Any, Any]:
    """Log-probs of the response tokens under ``model`` (0 outside the response mask) and the entropies there,
    on the batch's device."""
    import torch

    logp = torch.log_softmax(response_logits(model, batch, rows), dim=-1)
    mask = batch["response_mask"][rows].bool().to(logp.device)
    responses = batch["responses"][rows].to(logp.device)
    token_logp = torch.where(mask, logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1), 0.0)
    entropy = -(logp.exp() * logp).sum(-1)
    return token_logp.cpu(), entropy[mask].cpu()


def quantiles(values: Sequence[float], prefix: str) -> dict[str, float]:
    """p50 / p90 / max of ``values`` (zeros when empty)."""
    array = np.asarray(values or [0.0])
    return {f"{prefix}p50": float(np.quantile(array, 0.5)), f"{prefix}p90": float(np.quantile(array, 0.9)),
            f"{prefix}max": float(array.max())}


def verl_config(model_dir: Path, loop_file: Path, settings: GRPOSettings) -> Any:
    """verl's own ``ppo_trainer`` config (Hydra compose) for the agent loop worker and the actor's loss."""
    from hydra import compose, initialize_config_module

    loop_file.write_text(
        "- name: kernelgym\n  _target_: kernelgym.training.agent_loop.KernelGymAgentLoop\n"
        f"  max_turns: {settings.max_turns}\n  alpha: {settings.alpha}\n  gamma: {settings.gamma}\n"
        f"  success_speedup: 0.0\n  max_feedback_chars: {settings.max_feedback_chars}\n"
    )
    overrides = [
        f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.rollout.name=vllm",  # required by the schema; nothing here starts vLLM
        f"actor_rollout_ref.rollout.prompt_length={settings.prompt_length}",
        f"actor_rollout_ref.rollout.response_length={settings.response_length}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.agent.default_agent_loop=kernelgym",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_file}",
        "actor_rollout_ref.actor.policy_loss.loss_mode=mirrorpop",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
    ]
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=overrides)


LogProbs = Callable[[Any, Any, Any], tuple[Any, Any]]


class LocalGRPO:
    """GRPO steps of a policy on kernelgym tasks, in this process: rollouts, Buffered Dynamic Retry, MirrorPop updates.

    Args:
        model: the policy, saved at ``model_dir`` (verl reads its config there).
        tokenizer: the policy's tokenizer (verl's worker is given it instead of loading one by model type).
        model_dir: where the policy was saved.
        client: what serves ``generate`` (:class:`GenerateClient`).
        judge: the verifier the agent loop judges with (a :class:`JudgeOnce`), shared for ``backend``.
        backend: the backend the tasks' rows name.
        settings: the step's knobs.
        optimizer: updates the policy.
        log_probs: ``(model, batch, rows) -> (token log-probs, entropies)``; must match how ``client`` samples.
        seed: seed of the repair draws.

    After a step, ``last_rollout`` holds each trajectory's ``TrajectoryOutcome`` (its per-turn verifier
    scores) and the reward it was trained with.
    """

    def __init__(self, model: Any, tokenizer: Any, model_dir: Path, client: Any, judge: JudgeOnce, backend: str,
                 settings: GRPOSettings, optimizer: Any, log_probs: LogProbs = plain_log_probs, seed: int = 0) -> None:
        from kernelgym.training.advantage import check_estimator

        check_estimator(settings.advantage)
        os.environ["KERNELGYM_MIRRORPOP_TAU"] = str(settings.tau)  # the mirrorpop loss reads its threshold here
        from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        from verl.utils.config import omega_conf_to_dataclass

        import kernelgym.training.verl_plugin  # noqa: F401  (registers the `kernelgym` agent loop and the `mirrorpop` loss)
        from kernelgym.training.reward import set_shared_verifier
        from kernelgym.wrappers.retry import RetryBuffer

        self.model, self.tokenizer, self.judge, self.backend = model, tokenizer, judge, backend
        self.settings, self.optimizer, self.log_probs = settings, optimizer, log_probs
        self.rng = np.random.default_rng(seed)
        loop_file = Path(tempfile.mkdtemp(prefix="kernelgym-grpo-")) / "agent_loop.yaml"
        config = verl_config(model_dir, loop_file, settings)
        self.actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
        self.policy_loss = get_policy_loss_fn("mirrorpop")
        set_shared_verifier(backend, judge)
        self.worker = AgentLoopWorker(config, client)
        self.worker.tokenizer = client.tokenizer = tokenizer
        self.buffer = RetryBuffer(capacity=settings.capacity, max_retries=settings.max_retries)
        self.last_rollout: list[tuple[Any, float]] = []

    def close(self) -> None:
        """Stop sharing the judge and close it."""
        from kernelgym.training.reward import set_shared_verifier

        set_shared_verifier(self.backend, None)
        self.judge.close()

    def step(self, fresh_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """One step on ``fresh_rows`` (dataset rows as ``kernelgym train`` writes them); its metrics."""
        import torch
        from verl.protocol import DataProto

        from kernelgym.training.agent_loop import OUTCOME_FIELD, TrajectoryOutcome
        from kernelgym.training.sampler import REPAIR_FIELD, prompt_fits, repair_row
        from kernelgym.wrappers.retry import repair_prompt

        s = self.settings
        start = time.perf_counter()
        # 1. prompts: a slot given to a repair task with probability mix_ratio, its failed attempt shortened to fit
        rows = []
        fits = prompt_fits(self.tokenizer, s.prompt_length)
        shortened = 0
        for row in fresh_rows:
            repair = self.buffer.draw(self.rng) if len(self.buffer) and self.rng.random() < s.mix_ratio else None
            rows.append(row if repair is None else repair_row(row, repair, fits))
            shortened += repair is not None and rows[-1]["raw_prompt"][-1]["content"] != repair_prompt(
                str(repair.origin_prompt), repair)
        n = len(rows) * s.group_size
        group = np.repeat(np.arange(len(rows)), s.group_size)
        raw = np.empty(n, dtype=object)
        raw[:] = [rows[g]["raw_prompt"] for g in group]
        info = np.empty(n, dtype=object)
        info[:] = [{**rows[g]["extra_info"], "index": int(i)} for i, g in enumerate(group)]
        batch = DataProto.from_dict(
            tensors={"dummy_tensor": torch.zeros(n, 1, dtype=torch.uint8)},
            non_tensors={"raw_prompt": raw, "extra_info": info, "index": np.arange(n)},
        )

        # 2. rollouts through verl's agent loop worker and kernelgym's agent loop (the verifier judges every turn)
        self.model.eval()
        judged, reused, judge_seconds = self.judge.judged, self.judge.reused, self.judge.seconds
        out = asyncio.run(self.worker.generate_sequences(batch))
        rollout_seconds = time.perf_counter() - start
        outcomes = [TrajectoryOutcome.from_dict(o) for o in out.non_tensor_batch[OUTCOME_FIELD]]
        is_repair = np.array([REPAIR_FIELD in rows[g]["extra_info"] for g in group])
        recovered_before = self.buffer.stats.recovered
        self._book_groups(rows, group, outcomes)
        self.last_rollout = [(o, float(r)) for o, r in zip(outcomes, out.batch["rm_scores"].sum(-1).tolist(), strict=True)]

        # 3. advantages, then MirrorPop minibatch updates
        losses, popped, deviations, entropies = self._update(out, group)

        # 4. metrics of the step
        fresh = [o for o, r in zip(outcomes, is_repair, strict=True) if not r]
        repairs = [o for o, r in zip(outcomes, is_repair, strict=True) if r]
        first = [o.scores[0] for o in fresh if o.scores]
        best = [max(o.scores) for o in fresh if o.scores]
        stats = self.buffer.stats
        return {
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
            "mirrorpop/tau": s.tau,
            "retry/size": stats.size, "retry/pushed": stats.pushed, "retry/draws": stats.draws,
            "retry/recovered": stats.recovered, "retry/recovered_this_step": stats.recovered - recovered_before,
            "retry/retried": stats.retried, "retry/dropped": stats.dropped, "retry/evicted": stats.evicted,
            "retry/shortened": shortened,
            "loss": float(np.mean(losses)),
            "expression_entropy": float(np.mean(entropies)) if entropies else 0.0,
            "judge/judged": self.judge.judged - judged, "judge/reused": self.judge.reused - reused,
            "judge/seconds": round(self.judge.seconds - judge_seconds, 2),
            "seconds/rollout": round(rollout_seconds, 2),
            "seconds/step": round(time.perf_counter() - start, 2),
        }

    def _book_groups(self, rows: Sequence[dict[str, Any]], group: Any, outcomes: Sequence[Any]) -> None:
        """Buffered Dynamic Retry: a wholly failed fresh group pushes a repair task; a repair group reports back."""
        from kernelgym.training.sampler import REPAIR_FIELD
        from kernelgym.wrappers.retry import RepairTask, most_advanced_failure

        for g, row in enumerate(rows):
            members = [outcomes[i] for i in np.flatnonzero(group == g)]
            repair_data = row["extra_info"].get(REPAIR_FIELD)
            self.buffer.book_group(
                members[0].task_id,
                solved=any(o.solved for o in members),
                failure=most_advanced_failure(o.failure for o in members if o.failure is not None),
                repair=RepairTask(**repair_data) if repair_data is not None else None,
                origin_prompt=row["raw_prompt"][-1]["content"],
            )

    def _update(self, out: Any, group: Any) -> tuple[list[float], list[float], list[float], list[float]]:
        """GRPO (verl) or TRLOO advantages, then ``ppo_epochs`` x ``minibatches`` MirrorPop updates."""
        import torch
        from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

        from kernelgym.training.advantage import trloo_advantages
        from kernelgym.training.agent_loop import TURN_REWARDS_FIELD
        from kernelgym.training.mirrorpop import sequence_deviation

        s = self.settings
        response_mask = out.batch["response_mask"].float()
        if s.advantage == "trloo":
            advantages = trloo_advantages(list(out.non_tensor_batch[TURN_REWARDS_FIELD]), response_mask, group)
        else:
            advantages, _ = compute_grpo_outcome_advantage(
                token_level_rewards=out.batch["rm_scores"], response_mask=response_mask, index=group
            )
        old_log_prob = out.batch["rollout_log_probs"].float()
        self.model.train()
        losses, popped, deviations, entropies = [], [], [], []
        for _ in range(s.ppo_epochs):
            for rows_mb in torch.randperm(len(group)).chunk(s.minibatches):
                log_prob, entropy = self.log_probs(self.model, out.batch, rows_mb)
                mask = response_mask[rows_mb]
                loss, metrics = self.policy_loss(
                    old_log_prob=old_log_prob[rows_mb], log_prob=log_prob, advantages=advantages[rows_mb],
                    response_mask=mask, loss_agg_mode=s.loss_agg_mode, config=self.actor_config,
                )
                if s.entropy_coeff and entropy.numel():
                    loss = loss - s.entropy_coeff * entropy.mean()
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                losses.append(float(loss.detach()))
                popped.append(metrics["actor/mirrorpop/popped_fraction"])
                deviations += sequence_deviation(log_prob, old_log_prob[rows_mb], mask).tolist()
                entropies += entropy.detach().tolist()
        self.model.eval()
        return losses, popped, deviations, entropies
