"""Where the verifier's judge workers run during training: never silently on the GPUs that train and generate.

Holds:
    JUDGE_RESOURCE: the default custom Ray resource that marks judge capacity.
    PLACEMENT_ENV_VAR: the environment variable that carries a placement to verl's processes.
    PLACEMENT_MODULE: the module verl must import in every process to apply it (``VERL_USE_EXTERNAL_MODULES``).
    JudgePlacementError: a placement that cannot be honoured, with a sentence saying what to do.
    JudgePlacement: the user's choice (``--judges``): ``local``, ``colocated`` or ``ray[:RESOURCE[:N]]``.
    install_from_env: make this process's shared verifier the placed one (run on import when the variable is set).

During cluster training the ``kernelgym`` agent loop judges with a per-process shared
verifier. With the local executor its worker processes start on the node the agent loop
runs on, one per visible GPU for a GPU backend: that is, on the actor/rollout GPUs. A
placement says instead where judges go:

- ``ray[:RESOURCE[:N]]``: a :class:`~kernelgym.executor.ray_pool.RayExecutor` whose actors each
  require one unit of the custom Ray resource ``RESOURCE`` (default ``kernelgym_judge``), so they
  start only on nodes started with it, e.g. ``ray start --address=HEAD:6379
  --resources='{"kernelgym_judge": 8}'``; ``N`` judge actors (default: every unit the cluster
  offers); GPU judges also take one GPU each, which Ray never hands to two actors. Only nodes
  started with the resource are used, so give the judge nodes the resource and the training
  nodes none. Builds run inside the judge actors (no separate build actors), so no unit is
  spent on them.
- ``local``: the local executor where the agent loop runs; allowed for CPU backends (``cpp``),
  refused for GPU backends, whose judges would share the training GPUs.
- ``colocated``: the same, for any backend; the user accepts judges on the training nodes.

``kernelgym train`` puts the placement in ``KERNELGYM_JUDGES`` and adds this module to
``VERL_USE_EXTERNAL_MODULES``; importing it in a verl process (driver, agent loop worker) installs
a lazily built verifier as the shared verifier of the backend, so nothing starts until the first
answer is judged. A placement the cluster cannot honour (no node offers the resource) fails there
with a :class:`JudgePlacementError`, never falling back to the training GPUs.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from dataclasses import asdict, dataclass
from typing import Any

from kernelgym.errors import KernelGymError, require_extra

__all__ = [
    "JUDGE_RESOURCE",
    "PLACEMENT_ENV_VAR",
    "PLACEMENT_MODULE",
    "JudgePlacement",
    "JudgePlacementError",
    "install_from_env",
]

JUDGE_RESOURCE = "kernelgym_judge"
PLACEMENT_ENV_VAR = "KERNELGYM_JUDGES"
PLACEMENT_MODULE = "kernelgym.training.judge_placement"
_MODES = ("local", "colocated", "ray")


class JudgePlacementError(KernelGymError):
    """A judge placement that cannot be honoured; the message says what to change."""


@dataclass(frozen=True)
class JudgePlacement:
    """Where judge workers run (see the module docstring).

    Attributes:
        mode: ``"local"``, ``"colocated"`` or ``"ray"``.
        backend: the backend answers are judged on.
        resource: the custom Ray resource judge actors require (``ray`` mode).
        num_workers: judge actors (``ray`` mode; ``None``: every unit of ``resource`` in the cluster).
        cache_dir: build cache of the verifier (``None``: its default; give a shared path on a cluster).
    """

    mode: str
    backend: str
    resource: str = JUDGE_RESOURCE
    num_workers: int | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise JudgePlacementError(f"judge placement {self.mode!r} is unknown; use one of {', '.join(_MODES)}")
        if self.num_workers is not None and self.num_workers < 1:
            raise JudgePlacementError(f"judge placement: the number of judges must be >= 1, got {self.num_workers}")
        if self.mode == "local" and self.on_gpu:
            raise JudgePlacementError(
                f"local judges for the GPU backend {self.backend!r} would run on the training GPUs; "
                f"use --judges ray[:RESOURCE] with judge nodes started with that Ray resource, "
                "or --judges colocated to accept judges on the training nodes"
            )

    @property
    def on_gpu(self) -> bool:
        """The backend judges on a GPU."""
        from kernelgym.backends import get_backend

        return get_backend(self.backend).device_type != "cpu"

    @classmethod
    def from_spec(cls, spec: str, backend: str, cache_dir: str | None = None) -> JudgePlacement:
        """Parse ``local``, ``colocated``, ``ray``, ``ray:RESOURCE`` or ``ray:RESOURCE:N``.

        Raises:
            JudgePlacementError: the spec is malformed or not allowed for ``backend``.

        Example:
            >>> JudgePlacement.from_spec("ray:judge_gpus:4", "cpp").num_workers
            4
            >>> JudgePlacement.from_spec("local", "cpp").mode
            'local'
        """
        mode, _, rest = spec.strip().partition(":")
        if mode != "ray" and rest:
            raise JudgePlacementError(f"judge placement {spec!r}: only `ray` takes a resource (ray:RESOURCE[:N])")
        resource, _, count = rest.partition(":")
        if count and not count.isdigit():
            raise JudgePlacementError(f"judge placement {spec!r}: N in ray:RESOURCE:N must be a whole number")
        return cls(mode, backend, resource or JUDGE_RESOURCE, int(count) if count else None, cache_dir)

    def to_env(self) -> str:
        """The value of ``KERNELGYM_JUDGES`` (JSON)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls, value: str) -> JudgePlacement:
        """Inverse of :meth:`to_env`.

        Raises:
            JudgePlacementError: the value is not a placement written by :meth:`to_env`.
        """
        try:
            return cls(**json.loads(value))
        except (TypeError, ValueError) as exc:
            raise JudgePlacementError(f"{PLACEMENT_ENV_VAR}={value!r} is not a judge placement ({exc})") from None

    def executor_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~kernelgym.verifier.Verifier` for this placement.

        In ``ray`` mode this joins (or finds) the Ray cluster and counts the units of the
        resource it offers.

        Raises:
            JudgePlacementError: no node offers the resource, or fewer units than judges asked for.
        """
        if self.mode != "ray":
            return {"executor": "local", "cache_dir": self.cache_dir}
        ray = require_extra("ray", "ray")
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS"))
        units = int(ray.cluster_resources().get(self.resource, 0))
        if units < 1:
            raise JudgePlacementError(
                f"no node of the Ray cluster offers the resource {self.resource!r}, so judges have nowhere to go; "
                f"start the judge nodes with `ray start --address=HEAD:6379 --resources='{{\"{self.resource}\": N}}'`"
            )
        workers = self.num_workers or units
        if workers > units:
            raise JudgePlacementError(
                f"{workers} judges asked for, but the cluster offers only {units} units of {self.resource!r}"
            )
        return {
            "executor": "ray", "cache_dir": self.cache_dir, "num_workers": workers, "num_builders": 0,
            "judges_build_when_idle": True, "resources": {self.resource: 1},
        }

    def verifier(self) -> Any:
        """A new :class:`~kernelgym.verifier.Verifier` placed as said."""
        from kernelgym.executor import Verifier

        return Verifier(backend=self.backend, **self.executor_kwargs())


class _PlacedVerifier:
    """Builds the placed verifier on first use, so importing this module starts nothing."""

    def __init__(self, placement: JudgePlacement) -> None:
        self.placement = placement
        self._verifier: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._verifier is None:
                self._verifier = self.placement.verifier()
            return self._verifier

    def evaluate(self, task: Any, text: str) -> Any:
        """Judge one answer on the placed judges."""
        return self._get().evaluate(task, text)

    def evaluate_many(self, pairs: list[tuple[Any, str]]) -> list[Any]:
        """Judge several answers on the placed judges."""
        return self._get().evaluate_many(pairs)

    def close(self) -> None:
        """Stop the judges, if they were started."""
        with self._lock:
            if self._verifier is not None:
                self._verifier.close()
                self._verifier = None


def install_from_env() -> JudgePlacement | None:
    """Make the placement in ``KERNELGYM_JUDGES`` this process's shared verifier; ``None`` when unset.

    Raises:
        JudgePlacementError: the variable holds no valid placement.
    """
    value = os.environ.get(PLACEMENT_ENV_VAR, "").strip()
    if not value:
        return None
    from kernelgym.training.reward import set_shared_verifier

    placement = JudgePlacement.from_env(value)
    placed = _PlacedVerifier(placement)
    set_shared_verifier(placement.backend, placed)  # the caller owns it: closed here at exit
    atexit.register(placed.close)
    return placement


install_from_env()
