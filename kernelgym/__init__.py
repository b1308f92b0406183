"""kernelgym: Gymnasium environments and a strict judge for GPU-kernel generation.

Importing ``kernelgym`` registers the environments (``kernelgym/CPU-v0``,
``kernelgym/KernelBench-v0``, ...) with Gymnasium and the executors (``local``,
``ray``). Subpackages, in layer order (each imports only those before it):
``tasks`` and ``backends``, ``verifier``, ``executor``, ``envs``, ``wrappers``,
then ``agents``, ``bench`` and ``training``, then ``cli``.

Holds:
    Verifier: the judge's front door (``kernelgym.executor.front.Verifier``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from kernelgym.envs.registration import register_envs  # noqa: E402
from kernelgym.executor import Verifier  # noqa: E402  (also registers the local and ray executors)

register_envs()

__all__ = ["Verifier", "__version__"]
