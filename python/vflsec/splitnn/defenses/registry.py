"""Registry of split-learning defenses: unique name -> :class:`~.base.Defense` class.

Modelled on Opacus' accountant registry (``opacus/accountants/registry.py``):
a defense module registers its classes at import::

    register_defense("vfl_afe", VFLAFE)

a second registration of a name is refused (``replace=True`` overrides it on
purpose), and a lookup of an unknown name fails with the known names. Code
that builds a defense from a configuration (benchmarks, job files) looks the
class up here instead of branching on strings::

    make_defense("dp_sgd", epsilon=2.0, delta=1e-3)

The names are the registry's own and unique; they can differ from a class's
``name`` attribute, which is the defense's label in results (the two noise
baselines share ``name = "noise"`` and register as ``noise_embedding`` and
``noise_gradient``). Importing :mod:`vflsec.splitnn.defenses` registers every
built-in defense.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Tuple, Type

from .base import Defense, NoDefense

__all__ = ["available_defenses", "get_defense", "make_defense", "register_defense"]

_REGISTRY: Dict[str, Type[Defense]] = {}
_LOCK = threading.Lock()


def register_defense(name: str, defense: Type[Defense], *, replace: bool = False) -> Type[Defense]:
    """Register the class ``defense`` under ``name`` and return it; a name
    already registered is a ValueError unless ``replace=True``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"defense name must be a non-empty str, got {name!r}")
    if not (isinstance(defense, type) and issubclass(defense, Defense)):
        raise TypeError(f"defense must be a subclass of vflsec.splitnn.defenses.Defense, got {defense!r}")
    with _LOCK:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not defense:
            raise ValueError(f"defense {name!r} is already registered (as {_REGISTRY[name].__name__}); "
                             "pass replace=True to override it")
        _REGISTRY[name] = defense
    return defense


def available_defenses() -> Tuple[str, ...]:
    """The registered names, sorted."""
    with _LOCK:
        return tuple(sorted(_REGISTRY))


def get_defense(name: str) -> Type[Defense]:
    """The class registered under ``name`` (ValueError listing the known names)."""
    with _LOCK:
        defense = _REGISTRY.get(name) if isinstance(name, str) else None
    if defense is None:
        raise ValueError(f"unknown defense {name!r}; registered defenses: {', '.join(available_defenses())}")
    return defense


def make_defense(name: str, **params: Any) -> Defense:
    """``get_defense(name)(**params)``: a new, unvalidated defense (its
    settings are checked by ``check_params()`` / ``setup()``)."""
    return get_defense(name)(**params)


register_defense("none", NoDefense)
