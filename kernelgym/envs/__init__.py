"""Gymnasium environments.

Holds:
    KernelEnv: text actions (the answer program), one episode = up to ``max_turns`` attempts at one task.
    KernelVectorEnv: N KernelEnvs whose answers are judged as one batch per step.
    KernelTuneEnv: MultiDiscrete template parameters -> measured speed (SB3-ready); MultiDiscreteToDiscrete for DQN.
    build_prompt: the task prompt a KernelEnv shows.
    register_envs: register ``kernelgym/CPU-v0``, ``kernelgym/GPU-v0``, ``kernelgym/KernelBench-v0``,
        ``kernelgym/Tune-CPU-v0``, ``kernelgym/Tune-GPU-v0``.
"""

from __future__ import annotations

from kernelgym.envs.kernel_env import KernelEnv
from kernelgym.envs.prompt import CODE_CHARSET, build_prompt
from kernelgym.envs.registration import register_envs
from kernelgym.envs.tune_env import KernelTuneEnv, MultiDiscreteToDiscrete
from kernelgym.envs.vector import KernelVectorEnv

__all__ = [
    "CODE_CHARSET", "KernelEnv", "KernelTuneEnv", "KernelVectorEnv", "MultiDiscreteToDiscrete", "build_prompt",
    "register_envs",
]
