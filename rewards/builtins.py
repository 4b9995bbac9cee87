"""Registration of the studio's built-in verifiers under their names (filled as verifiers are added)."""

from __future__ import annotations


def register_builtins() -> None:
    """Register each built-in verifier with its default configuration."""
    from rewards.registry import register_reward

    _ = register_reward
