"""The verl agent loop that trains an LLM on kernelgym tasks, several attempts per episode.

Holds:
    OUTCOME_FIELD: the ``extra_fields`` key of a trajectory's :class:`TrajectoryOutcome`.
    TURN_REWARDS_FIELD: the ``extra_fields`` key of a trajectory's PrimeEcho step rewards (one per turn).
    TrajectoryOutcome: what one trajectory achieved (per-turn scores, solved, its most advanced failure).
    KernelGymAgentLoop: the ``kernelgym`` agent loop (``AgentLoopBase`` subclass).

One trajectory is one :class:`~kernelgym.envs.KernelEnv` episode: the model
answers the prompt, the verifier judges the answer, its feedback is appended as a
user turn (:func:`~kernelgym.envs.prompt.repair_message`, as every kernelgym
conversation does; ``response_mask`` 0: the model is not trained on it) and the model
repairs, up to ``max_turns`` attempts or until an attempt succeeds. The
trajectory's reward is the PrimeEcho trajectory reward of the per-turn scores
(:func:`~kernelgym.wrappers.prime_echo.prime_echo_rewards`), returned as
``reward_score`` so verl skips its reward loop; the per-turn step rewards, whose
sum it is, go beside it for turn-level advantages
(:func:`~kernelgym.training.advantage.trloo_advantages`).

Needs ``pip install 'kernelgym[verl]'``; verl finds the loop through the
``verl.plugins`` entry point (``kernelgym.training.verl_plugin``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.utils.profiler import simple_timer

from kernelgym.agents.base import strip_reasoning
from kernelgym.envs.kernel_env import KernelEnv
from kernelgym.envs.prompt import repair_message
from kernelgym.errors import TaskError
from kernelgym.training.reward import ScoreSettings, cached_suite
from kernelgym.verifier.result import EvalResult
from kernelgym.wrappers.prime_echo import prime_echo_rewards
from kernelgym.wrappers.retry import Attempt, most_advanced_failure

__all__ = ["OUTCOME_FIELD", "TURN_REWARDS_FIELD", "KernelGymAgentLoop", "TrajectoryOutcome"]

OUTCOME_FIELD = "kernelgym"
TURN_REWARDS_FIELD = "turn_rewards"


@dataclass(frozen=True)
class TrajectoryOutcome:
    """What one trajectory achieved, stored in its ``extra_fields`` for the Buffered Dynamic Retry sampler.

    Attributes:
        task_id: the task the trajectory attempted.
        scores: the verifier score of each attempt, in turn order.
        solved: some attempt was legal and correct.
        failure: the trajectory's most advanced unsolved attempt (``None`` if every attempt was solved).
    """

    task_id: str
    scores: tuple[float, ...]
    solved: bool
    failure: Attempt | None

    @classmethod
    def from_attempts(cls, task_id: str, attempts: list[Attempt]) -> TrajectoryOutcome:
        """Summarise a trajectory's judged attempts."""
        return cls(
            task_id=task_id,
            scores=tuple(float(a.result.score) for a in attempts),
            solved=any(a.solved for a in attempts),
            failure=most_advanced_failure(attempts),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the failure's result as :meth:`EvalResult.to_dict`)."""
        failure = None if self.failure is None else {"text": self.failure.text, "result": self.failure.result.to_dict()}
        return {"task_id": self.task_id, "scores": list(self.scores), "solved": self.solved, "failure": failure}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrajectoryOutcome:
        """Inverse of :meth:`to_dict`.

        Example:
            >>> outcome = TrajectoryOutcome("t", (0.1,), False, Attempt("x", EvalResult("t", "cpp", "compile_error")))
            >>> TrajectoryOutcome.from_dict(outcome.to_dict()) == outcome
            True
        """
        failure = data.get("failure")
        attempt = None if not failure else Attempt(str(failure["text"]), EvalResult.from_dict(dict(failure["result"])))
        return cls(
            task_id=str(data["task_id"]),
            scores=tuple(float(s) for s in data.get("scores", ())),
            solved=bool(data["solved"]),
            failure=attempt,
        )


@register("kernelgym")
class KernelGymAgentLoop(AgentLoopBase):
    """Multi-turn kernel writing against a :class:`~kernelgym.envs.KernelEnv`, rewarded with PrimeEcho.

    Each dataset row names its task in ``extra_info`` (``task_id``, ``suite``,
    ``backend``; ``kernelgym train`` writes such rows) and brings its chat
    messages in ``raw_prompt``. Per turn the loop generates at most the response
    budget that is left, judges the answer (a leading ``<think>`` block dropped)
    with the process-wide shared verifier, and appends the feedback as a user
    message. Feedback that does not fit in ``rollout.response_length`` ends the
    trajectory; the outputs are cut to ``response_length``.

    Outputs: ``reward_score`` = PrimeEcho trajectory reward;
    ``extra_fields["turn_scores"]`` = per-turn verifier scores;
    ``extra_fields["turn_rewards"]`` = per-turn PrimeEcho step rewards (they sum to ``reward_score``);
    ``extra_fields["reward_extra_info"]`` = ``first_score``, ``best_score``,
    ``solved``, ``attempts`` (logged by verl); ``extra_fields["kernelgym"]`` =
    the :class:`TrajectoryOutcome` (read by the Buffered Dynamic Retry sampler).

    Settings (keyword arguments, from an ``agent_loop_config_path`` entry):
        max_turns: attempts per trajectory.
        success_speedup: speedup that ends the episode early (0: correct is enough).
        alpha: PrimeEcho anchor weight of the first attempt.
        gamma: PrimeEcho discount of later improvements.
        suite: suite for rows whose ``extra_info`` names none.
        backend: backend for rows whose ``extra_info`` names none.
        executor: executor of the shared verifier (``"local"`` or ``"ray"``).
        num_workers: worker processes of the shared verifier.
        cache_dir: build cache of the shared verifier.
        max_feedback_chars: longest feedback message.

    Example (``agent_loop_config_path`` file)::

        - name: kernelgym
          _target_: kernelgym.training.agent_loop.KernelGymAgentLoop
          max_turns: 4
          alpha: 0.5
          gamma: 0.9
    """

    def __init__(
        self,
        *args: Any,
        max_turns: int = 4,
        success_speedup: float = 1.0,
        alpha: float = 0.5,
        gamma: float = 0.9,
        suite: str | None = None,
        backend: str | None = None,
        executor: str = "local",
        num_workers: int | None = None,
        cache_dir: str | None = None,
        max_feedback_chars: int = 4000,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if max_turns < 1:
            raise ValueError(f"kernelgym agent loop: max_turns must be at least 1, got {max_turns}")
        prime_echo_rewards([], alpha, gamma)  # raises early on an alpha or gamma out of range
        self.max_turns = max_turns
        self.success_speedup = success_speedup
        self.alpha = alpha
        self.gamma = gamma
        self.judge_defaults = {
            "suite": suite, "backend": backend, "executor": executor,
            "num_workers": num_workers, "cache_dir": cache_dir,
        }
        self.max_feedback_chars = max_feedback_chars
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one episode; see the class docstring.

        Raises:
            TaskError: the row names no task, or an unknown one.
        """
        extra_info = dict(kwargs.get("extra_info") or {})
        task_id = extra_info.get("task_id") or (kwargs.get("reward_model") or {}).get("ground_truth")
        if not task_id:
            raise TaskError("kernelgym agent loop: the row names no task (extra_info.task_id)")
        settings = ScoreSettings.resolve(extra_info, **self.judge_defaults)
        env = await self.loop.run_in_executor(None, self._make_env, settings)
        await self.loop.run_in_executor(None, lambda: env.reset(options={"task_id": str(task_id)}))

        messages = [dict(m) for m in kwargs["raw_prompt"]]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime_ids = list(prompt_ids)
        response_mask: list[int] = []
        response_logprobs: list[float] | None = None
        attempts: list[Attempt] = []
        timing: dict[str, float] = {}
        request_id = uuid4().hex

        for _ in range(self.max_turns):
            budget = self.response_length - len(response_mask)
            if budget < 1:
                break
            with simple_timer("generate_sequences", timing):
                output = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=runtime_ids,
                    sampling_params={**sampling_params, "max_tokens": budget},
                )
            if output.log_probs and response_logprobs is None:
                response_logprobs = [0.0] * len(response_mask)
            merged, response_mask, response_logprobs = await self.ct_merge_assistant_token(
                runtime_ids, output.token_ids, response_mask, response_logprobs,
                assistant_logprobs=output.log_probs or None,
            )
            runtime_ids = merged.token_ids
            text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            answer = strip_reasoning(text)
            with simple_timer("tool_calls", timing):
                obs, _, terminated, truncated, info = await self.loop.run_in_executor(None, env.step, answer)
            attempts.append(Attempt(answer, EvalResult.from_dict(info["result"])))
            if terminated or truncated:
                break
            previous = [*messages, {"role": "assistant", "content": text}]
            messages = [*previous, {"role": "user", "content": repair_message(obs["feedback"])}]
            merged, grown_mask, grown_logprobs = await self.ct_merge_context_msg(
                previous, messages, runtime_ids, response_mask, response_logprobs
            )
            if len(grown_mask) >= self.response_length:
                break
            runtime_ids, response_mask = merged.token_ids, grown_mask
            if response_logprobs is not None:
                response_logprobs = grown_logprobs

        return self._output(str(task_id), runtime_ids, response_mask, response_logprobs, attempts, timing)

    def _make_env(self, settings: ScoreSettings) -> KernelEnv:
        return KernelEnv(
            suite=cached_suite(settings.suite),
            backend=settings.backend,
            verifier=settings.verifier(),
            max_turns=self.max_turns,
            success_speedup=self.success_speedup,
            max_feedback_chars=self.max_feedback_chars,
        )

    def _output(
        self,
        task_id: str,
        runtime_ids: list[int],
        response_mask: list[int],
        response_logprobs: list[float] | None,
        attempts: list[Attempt],
        timing: dict[str, float],
    ) -> AgentLoopOutput:
        scores = [float(a.result.score) for a in attempts]
        rewards = prime_echo_rewards(scores, self.alpha, self.gamma)
        outcome = TrajectoryOutcome.from_attempts(task_id, attempts)
        length = self.response_length
        # Continuous Token merges may trim the prompt side, so the split follows the mask, as in verl's own loops.
        prompt_ids = runtime_ids[: len(runtime_ids) - len(response_mask)]
        response_ids = runtime_ids[len(prompt_ids) :]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:length],
            response_mask=response_mask[:length],
            response_logprobs=response_logprobs[:length] if response_logprobs else None,
            reward_score=rewards.trajectory_reward,
            num_turns=2 * len(attempts),
            metrics=AgentLoopMetrics(**timing),
            extra_fields={
                "turn_scores": scores,
                TURN_REWARDS_FIELD: list(rewards.step_rewards),
                "reward_extra_info": {
                    "first_score": scores[0] if scores else 0.0,
                    "best_score": max(scores, default=0.0),
                    "solved": float(outcome.solved),
                    "attempts": float(len(attempts)),
                },
                OUTCOME_FIELD: outcome.to_dict(),
            },
        )
