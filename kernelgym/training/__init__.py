"""Training an LLM policy on kernelgym tasks with verl or TRL.

Holds nothing itself (verl is an optional extra, imported by the modules that need it); the modules:
    verl_plugin: everything registered with verl (``verl.plugins`` entry point).
    agent_loop: the multi-turn ``kernelgym`` agent loop, rewarded with PrimeEcho.
    sampler: the Buffered Dynamic Retry sampler and its dataset.
    reward: ``compute_score`` for the single-turn path, and the per-process shared verifiers.
    mirrorpop: the MirrorPop sequence filter (no verl needed).
    advantage: TRLOO's turn-level leave-one-out advantages, selectable beside GRPO's (no verl needed).
    trl_reward: the kernelgym reward for TRL's ``GRPOTrainer`` and the suites as TRL datasets.
    launcher: ``kernelgym train`` (data rows, Hydra overrides, the verl command).
    corpus: the kernel-writing corpus (tasks and honest Triton answers, judged ``ok``) and its held-out split.
    local_grpo: the small local trainer's GRPO step (verl's algorithms, the agent loop, the real judge; no vLLM).
    kernel_lm: the small kernel-writing model: BPE tokenizer, decoder, pretraining and fine-tuning, checkpoints.
    corpus_families: the corpus's task families (elementwise chains, row reductions, normalizations, softmax, matmul).
"""

from __future__ import annotations

__all__: list[str] = []
