"""kernelgym: Gymnasium environments and a strict judge for GPU-kernel generation.

Importing ``kernelgym`` registers the environments (``kernelgym/CPU-v0``,
``kernelgym/KernelBench-v0``, ...) with Gymnasium. Subpackages: ``tasks``,
``verifier``, ``backends``, ``executor``, ``envs``, ``wrappers``, ``agents``.
"""

from __future__ import annotations

__version__ = "0.1.0"

import kernelgym.executor  # noqa: E402,F401  (registers the local and ray executors)
from kernelgym.envs.registration import register_envs  # noqa: E402

register_envs()

__all__ = ["__version__"]
