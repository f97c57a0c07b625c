"""How the active party's gradients reach the passive parties and their histograms come back.

A protection is a small class with five steps (a registry, as Opacus registers its
accountants); one instance per party program:

* ``start(endpoint, job, role)`` -- once, before the first tree (keys, say);
* the active party ``release``s the round's per-row gradients and hessians (one
  payload, sent to every passive party);
* a passive party ``receive``s them once per round and ``aggregate``s them into a
  node's per-bin sums as often as asked;
* the active party ``open``s what comes back into a
  :class:`~vflsec.trees.histogram.Histogram`.

The gradients handed to ``release`` are on the job's fixed-point grid
(:meth:`~vflsec.trees.job.TreeJob.quantize`), so every protection that
adds exactly (plain, SecureBoost) opens the same histograms, bit for bit, and grows
the same trees.

* ``plain`` -- no protection: gradients and sums in the clear (the baseline; a
  passive party sees every row's gradient, and so its label).
* ``secureboost`` -- Paillier (:mod:`vflsec.trees.secureboost`).

``seconds`` (per step) and ``bytes_sent`` are what the report breaks a run into.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, Type

import numpy as np

from .histogram import BinLayout, Histogram, build_histogram

__all__ = ["PlainRelease", "Protection", "get_protection", "register_protection"]


class Protection:
    """The steps; see the module docstring."""

    name = ""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = defaultdict(float)

    def start(self, endpoint: Any, job: Any, role: str) -> None:  # noqa: B027 - optional: nothing to set up
        pass

    def release(self, g: np.ndarray, h: np.ndarray) -> Any:
        raise NotImplementedError

    def receive(self, payload: Any, n_samples: int) -> Any:
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
    if name == "secureboost" and name not in _REGISTRY:
        from . import secureboost  # noqa: F401  # registers itself; imports the HE stack only when asked for
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown protection {name!r}; known: {sorted(_REGISTRY)}") from None


def float_vector(value: Any, length: int, what: str) -> np.ndarray:
    """``value`` if it is ``length`` finite float64 values, else ValueError naming ``what``."""
    array = value if isinstance(value, np.ndarray) else None
    if array is None or array.dtype != np.float64 or array.shape != (length,) or not np.isfinite(array).all():
        raise ValueError(f"{what} must be {length} finite float64 values")
    return array


@register_protection
class PlainRelease(Protection):
    name = "plain"

    def release(self, g: np.ndarray, h: np.ndarray) -> Any:
        return {"g": g, "h": h}

    def receive(self, payload: Any, n_samples: int) -> Any:
        if not isinstance(payload, dict):
            raise ValueError("the round's gradients are not {g, h}")
        return (float_vector(payload.get("g"), n_samples, "g"), float_vector(payload.get("h"), n_samples, "h"))

    def aggregate(self, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> Any:
        g, h = gradients
        hist = build_histogram(codes, rows, g, h, layout)
        return {"G": hist.G, "H": hist.H, "C": hist.C}

    def open(self, payload: Any, layout: BinLayout, party: str) -> Histogram:
        if not isinstance(payload, dict):
            raise ValueError(f"party {party!r} sent a histogram that is not {{G, H, C}}")
        G = float_vector(payload.get("G"), layout.total, f"party {party!r}'s gradient sums")
        H = float_vector(payload.get("H"), layout.total, f"party {party!r}'s hessian sums")
        C = payload.get("C")
        if not isinstance(C, np.ndarray) or C.shape != (layout.total,) or C.dtype.kind not in "iu" or (C < 0).any():
            raise ValueError(f"party {party!r}'s row counts must be {layout.total} non-negative integers")
        return Histogram(G, H, C.astype(np.int64))
