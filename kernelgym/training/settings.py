"""Training settings that processes read without importing torch (the command line reads them on every start).

Holds:
    DEFAULT_TAU: MirrorPop's default threshold on a sequence's mean |log-ratio| (see :mod:`kernelgym.training.mirrorpop`).
    TAU_ENV_VAR: the environment variable that carries the threshold to verl's workers.
"""

from __future__ import annotations

__all__ = ["DEFAULT_TAU", "TAU_ENV_VAR"]

DEFAULT_TAU = 0.2
TAU_ENV_VAR = "KERNELGYM_MIRRORPOP_TAU"
