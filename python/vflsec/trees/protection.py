"""How the active party's gradients reach the passive parties and their histograms come back.

A protection is a small class with four steps (a registry, as Opacus registers
its accountants): the active party ``release``s the round's per-row gradients and
hessians to a passive party; that party ``receive``s them once per round and
``aggregate``s them into a node's per-bin sums as often as asked; the active party
``open``s what comes back into a :class:`~vflsec.trees.histogram.Histogram`.

* ``plain`` -- no protection: gradients and sums in the clear (the baseline; a
  passive party sees every row's gradient, and so its label).

SecureBoost (Paillier) and the DP releases plug in here.
"""
from __future__ import annotations

from typing import Any, Dict, Type

import numpy as np

from .histogram import BinLayout, Histogram, build_histogram

__all__ = ["PlainRelease", "Protection", "get_protection", "register_protection"]


class Protection:
    """The four steps; see the module docstring."""

    name = ""

    def release(self, g: np.ndarray, h: np.ndarray, party: str) -> Any:
        raise NotImplementedError

    def receive(self, payload: Any, n_samples: int, party: str) -> Any:
        raise NotImplementedError

    def aggregate(self, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> Any:
        raise NotImplementedError

    def open(self, payload: Any, layout: BinLayout, party: str) -> Histogram:
        raise NotImplementedError


_REGISTRY: Dict[str, Type[Protection]] = {}


def register_protection(cls: Type[Protection]) -> Type[Protection]:
    _REGISTRY[cls.name] = cls
    return cls


def get_protection(name: str) -> Protection:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown protection {name!r}; known: {sorted(_REGISTRY)}") from None


def _float_vector(value: Any, length: int, what: str) -> np.ndarray:
    array = np.asarray(value) if isinstance(value, np.ndarray) else None
    if array is None or array.dtype != np.float64 or array.shape != (length,) or not np.isfinite(array).all():
        raise ValueError(f"{what} must be {length} finite float64 values")
    return array


@register_protection
class PlainRelease(Protection):
    name = "plain"

    def release(self, g: np.ndarray, h: np.ndarray, party: str) -> Any:
        return {"g": g, "h": h}

    def receive(self, payload: Any, n_samples: int, party: str) -> Any:
        if not isinstance(payload, dict):
            raise ValueError("the round's gradients are not {g, h}")
        return (_float_vector(payload.get("g"), n_samples, "g"), _float_vector(payload.get("h"), n_samples, "h"))

    def aggregate(self, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> Any:
        g, h = gradients
        hist = build_histogram(codes, rows, g, h, layout)
        return {"G": hist.G, "H": hist.H, "C": hist.C}

    def open(self, payload: Any, layout: BinLayout, party: str) -> Histogram:
        if not isinstance(payload, dict):
            raise ValueError(f"party {party!r} sent a histogram that is not {{G, H, C}}")
        G = _float_vector(payload.get("G"), layout.total, f"party {party!r}'s gradient sums")
        H = _float_vector(payload.get("H"), layout.total, f"party {party!r}'s hessian sums")
        C = np.asarray(payload.get("C"))
        if C.shape != (layout.total,) or C.dtype.kind not in "iu" or (C < 0).any():
            raise ValueError(f"party {party!r}'s row counts must be {layout.total} non-negative integers")
        return Histogram(G, H, C.astype(np.int64))
