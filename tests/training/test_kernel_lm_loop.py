"""The whole kernel-lm loop at toy size on a CPU: corpus, tokenizer, pretraining, fine-tuning, two GRPO steps.

The RL steps are kernelgym's local trainer (verl's GRPO advantages, the MirrorPop loss, Buffered
Dynamic Retry, the multi-turn ``kernelgym`` agent loop with PrimeEcho rewards, two attempts per episode) and every answer is judged by the real verifier on
the ``triton`` backend: Triton's interpreter checks correctness on a CPU with nothing to compile,
where the ``cpp`` backend would spend a C++ build (~15 s of a core) on every distinct answer.
The toy model is fine-tuned until it nearly reproduces its task's answer, so sampled answers are
judged for real (some pass, some do not), not only refused as unparsable text. The RL example
(``examples/kernel_lm_grpo.py``) runs one step in a subprocess and saves a checkpoint the agent loads.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

needs_extras = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("verl", "transformers", "triton")),
    reason="needs verl, transformers and triton: pip install 'kernelgym[verl,triton]'",
)


@pytest.mark.slow
@needs_extras
def test_two_grpo_steps_change_the_policy_and_pay_only_verdicts(tmp_path: Path, cache_dir: Path) -> None:
    import torch

    from kernelgym import Verifier
    from kernelgym.tasks import load_suite
    from kernelgym.training.corpus import generate, write_suite
    from kernelgym.training.kernel_lm import (
        SIZES,
        build_model,
        finetuning_pair,
        pretraining_texts,
        save_checkpoint,
        tokenizer_texts,
        train_causal_lm,
        train_tokenizer,
    )
    from kernelgym.training.launcher import task_rows
    from kernelgym.training.local_grpo import GenerateClient, GRPOSettings, JudgeOnce, LocalGRPO
    from kernelgym.verifier import VerifierConfig
    from kernelgym.wrappers.prime_echo import prime_echo_rewards

    torch.set_num_threads(1)
    torch.manual_seed(0)
    items = [min(generate(10, seed=0, families=["elementwise"]), key=lambda item: len(item.answer_source))]
    suite_dir = tmp_path / "suite"
    (task_id,) = write_suite(items, suite_dir)
    suite_spec = f"kernelbench:{suite_dir}"
    task = load_suite(suite_spec)[task_id]

    size = SIZES["toy"]
    tokenizer = train_tokenizer(tokenizer_texts(items), size.vocab_size)
    model = build_model(tokenizer, size, seed=0)
    train_causal_lm(model, tokenizer, pretraining_texts(items), steps=4, batch_size=2, learning_rate=1e-2)
    pair = finetuning_pair(task, items[0].answer_source, tokenizer)
    finetune = train_causal_lm(model, tokenizer, [pair], steps=300, batch_size=1, learning_rate=1e-2, seed=1)
    assert finetune[-1] < 0.01 < finetune[0]
    policy_dir = save_checkpoint(tmp_path / "policy", model, tokenizer, {"size": "toy"})

    rows = [{"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "reward_model": row["reward_model"]}
            for row in task_rows(suite_spec, "triton", "train")]
    prompt_tokens = len(tokenizer.encode(pair[0]))
    assert pair[0] == tokenizer.apply_chat_template(rows[0]["raw_prompt"], tokenize=False, add_generation_prompt=True)
    answer_tokens = len(tokenizer.encode(pair[1])) + 8
    # Two attempts per episode: a failed first answer gets the judge's feedback and a second try (PrimeEcho pays both).
    settings = GRPOSettings(group_size=4, max_turns=2, ppo_epochs=1, minibatches=2, mix_ratio=0.0,
                            prompt_length=prompt_tokens + 16, response_length=2 * answer_tokens + 160)
    judge = JudgeOnce(Verifier("triton", config=VerifierConfig(timing=False), num_workers=2, cache_dir=cache_dir),
                      keep_verdicts=True)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = LocalGRPO(model, tokenizer, policy_dir, GenerateClient(model, tokenizer, answer_tokens), judge,
                        "triton", settings, torch.optim.Adam(model.parameters(), lr=1e-3))
    try:
        trajectories = []
        for _ in range(2):
            metrics = trainer.step(rows)
            assert metrics["judge/judged"] + metrics["judge/reused"] == settings.group_size * metrics["attempts"]
            trajectories += trainer.last_rollout
    finally:
        trainer.close()

    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    # Every reward is the PrimeEcho reward of the judge's own scores, one verdict per attempt, none a judge failure.
    verdicts = judge.verdicts_given
    assert len(verdicts) == sum(len(outcome.scores) for outcome, _ in trajectories) >= 2 * settings.group_size
    assert sorted(s for outcome, _ in trajectories for s in outcome.scores) == sorted(v.score for v in verdicts)
    assert all(v.status.value != "judge_error" for v in verdicts)
    for outcome, reward in trajectories:
        assert reward == pytest.approx(prime_echo_rewards(outcome.scores, settings.alpha, settings.gamma).trajectory_reward)
    assert any(v.status.value != "format_error" for v in verdicts), [v.status.value for v in verdicts]
    assert any(len(outcome.scores) == 2 for outcome, _ in trajectories)  # a failed first answer was tried again


@pytest.mark.slow
@needs_extras
def test_the_rl_example_runs_a_step_and_saves_a_checkpoint_the_agent_loads(tmp_path: Path) -> None:
    import json

    from kernelgym.agents import make_agent
    from kernelgym.training.corpus import generate, write_suite
    from kernelgym.training.kernel_lm import SIZES, build_model, save_checkpoint, tokenizer_texts, train_tokenizer

    from .example_runs import ROOT, run_example

    items = generate(1, seed=0)
    write_suite(items, tmp_path / "suite")
    tokenizer = train_tokenizer(tokenizer_texts(items), SIZES["toy"].vocab_size)
    start = save_checkpoint(tmp_path / "start", build_model(tokenizer, SIZES["toy"]), tokenizer, {"size": "toy"})
    done = run_example(
        ROOT / "examples" / "kernel_lm_grpo.py", "--checkpoint", str(start), "--suite", f"kernelbench:{tmp_path / 'suite'}",
        "--steps", "1", "--tasks-per-step", "1", "--group-size", "2", "--max-turns", "1", "--max-new-tokens", "16",
        "--num-workers", "1", "--save", str(tmp_path / "rl"), "--out", str(tmp_path / "metrics.jsonl"), timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (record,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert record["step"] == 1 and record["judge/judged"] + record["judge/reused"] == 2
    assert json.loads((tmp_path / "rl" / "kernel_lm.json").read_text())["rl"]["steps"] == 1
    assert make_agent("kernel-lm", model=str(tmp_path / "rl")).name == "kernel-lm"


def test_without_verl_the_rl_example_ends_in_one_line() -> None:
    from .example_runs import ROOT, run_without

    done = run_without("verl", ROOT / "examples" / "kernel_lm_grpo.py")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kernel_lm_grpo.py: error: 'verl' is not installed; install it with: pip install 'kernelgym[verl]'"
    ]
