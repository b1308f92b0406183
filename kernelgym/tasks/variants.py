"""Shape variants derived from a task file that declares none (placeholder until the derivation lands).

Holds:
    derive_variants: proposed rebindings of a task's module-level size constants.
"""

from __future__ import annotations

__all__ = ["derive_variants"]


def derive_variants(source: str) -> tuple[dict[str, int], ...]:
    """No derived variants yet."""
    return ()
