"""Defenses for split learning; the hook contract is in :mod:`.base`."""
from .base import BatchInfo, Defense, DefenseContext, NoDefense

__all__ = ["BatchInfo", "Defense", "DefenseContext", "NoDefense"]
