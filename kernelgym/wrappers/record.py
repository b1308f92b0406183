"""Recording of episodes as JSON lines.

Holds:
    RecordEpisodes: a wrapper that appends one JSON line per step to a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

__all__ = ["RecordEpisodes"]


class RecordEpisodes(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Append one JSON line per step to ``path``, flushed at once.

    Each line holds ``episode`` (0-based count of resets of this wrapper),
    ``task_id``, ``turn``, ``action``, ``result`` (the verifier's
    ``info["result"]``), ``reward`` (as seen at this
    wrapper, so after any reward wrapper below it), ``terminated`` and
    ``truncated``. An existing file is appended to, never truncated; the
    parent directory is created.

    Args:
        env: a ``KernelEnv``-shaped env (``info["task_id"]``, ``info["turn"]``, ``info["result"]``).
        path: the JSONL file.

    Example:
        >>> import gymnasium as gym, json, kernelgym, tempfile
        >>> path = tempfile.mkdtemp() + "/episodes.jsonl"
        >>> env = RecordEpisodes(gym.make("kernelgym/CPU-v0", max_turns=1), path)
        >>> _ = env.reset(seed=0)
        >>> _ = env.step("I do not know.")
        >>> env.close()
        >>> line = json.loads(open(path).readline())
        >>> line["action"], line["result"]["status"], line["truncated"]
        ('I do not know.', 'format_error', True)
    """

    def __init__(self, env: gym.Env, path: str | Path) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, path=str(path))
        gym.Wrapper.__init__(self, env)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._episode = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env and start counting a new episode."""
        self._episode += 1
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the inner env and write the step's line."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        line = {
            "episode": self._episode,
            "task_id": info["task_id"],
            "turn": info["turn"],
            "action": str(action),
            "result": info["result"],
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        }
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Close the file and the inner env."""
        self._file.close()
        super().close()
