"""How the active party's gradients reach the passive parties and their histograms come back.

A protection is a small class with six steps (a registry, as Opacus registers its
accountants); one instance per party program:

* ``start(endpoint, job, role)`` -- once, before the first tree (keys, say);
* the active party ``release``s the round's per-row gradients and hessians (one
  payload, sent to every passive party);
* a passive party ``receive``s them once per round and ``aggregate``s them into a
  node's per-bin sums as often as asked;
* the active party ``open``s what comes back into a
  :class:`~vflsec.trees.histogram.Histogram`;
* ``received_bounds(job)`` -- what bounds the clear gradients a passive party receives,
  as far as the job tells it (:mod:`vflsec.trees.bounds`).

The gradients handed to ``release`` are on the job's fixed-point grid
(:meth:`~vflsec.trees.job.TreeJob.quantize`; weighted ones on it times a power of two,
:mod:`vflsec.trees.weights`), so every protection that
adds exactly (plain, SecureBoost) opens the same histograms, bit for bit, and grows
the same trees.

The active party's side has four more steps, which the label-DP protections
(:mod:`vflsec.trees.dp`) change and the others inherit: ``training_labels``
(the labels it trains on: its own, or after randomized response),
``baseline`` (the raw score before the first tree), ``gradients`` (each
round's ``g``, ``h`` from the predictions ``p``) and ``grown_from`` (what it
grows the round's tree from: what it computed, or what it released).

* ``plain`` -- no protection: gradients and sums in the clear (the baseline; a
  passive party sees every row's gradient, and so its label).
* ``secureboost`` -- Paillier (:mod:`vflsec.trees.secureboost`).
* ``dp`` -- Gaussian noise on the gradients, label-DP against the passive
  parties; ``label_dp`` -- randomized response on the labels before training
  (:mod:`vflsec.trees.dp`).

``seconds`` (per step) and ``bytes_sent`` are what the report breaks a run into.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Dict, Optional, Tuple, Type

import numpy as np

from .histogram import BinLayout, Histogram, build_histogram
from .weights import weight_scale

__all__ = ["PlainRelease", "Protection", "baseline_score", "get_protection", "register_protection"]

#: protections registered by a module of their own, imported when first asked for
_LAZY = {"secureboost": "secureboost", "dp": "dp", "label_dp": "dp"}


def baseline_score(y: np.ndarray, weight: Optional[np.ndarray] = None) -> float:
    """The raw score before any tree: the log-odds of the positive rate, weighted by ``weight`` when given
    (:mod:`vflsec.trees.weights`), clipped away from 0 and 1."""
    rate = np.mean(y) if weight is None else np.average(y, weights=weight)
    p = min(max(float(rate), 1e-12), 1.0 - 1e-12)
    return math.log(p / (1.0 - p))


class Protection:
    """The steps; see the module docstring."""

    name = ""
    #: whether a passive party holds the round's gradients in the clear (plain, or a DP release) and so scores
    #: its own splits, sending each node's best one instead of its histogram (:mod:`vflsec.trees.protocol`)
    passive_scores = False

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

    def received_bounds(self, job: Any) -> Tuple[Optional[float], Optional[float]]:
        """What a passive party that holds the round's gradients in the clear (``passive_scores``) knows
        bounds them, from ``job`` alone: ``|g| <=`` the first, ``h <=`` the second (None: no bound known).
        None, None by default: the job does not say whether the active party weights its rows, so an
        honest ``g = w (p - y)``, ``h = w p (1 - p)`` has no bound but finiteness and ``h >= 0``
        (:mod:`vflsec.trees.bounds`)."""
        return None, None

    # -- the active party's side ----------------------------------------------------------
    def training_labels(self, y: np.ndarray, codes: np.ndarray, job: Any) -> np.ndarray:
        """The 0/1 labels the active party trains on (``codes``: its own bin codes)."""
        return y

    def baseline(self, y: np.ndarray, weight: Optional[np.ndarray] = None) -> float:
        """The raw score before the first tree (``weight``: each row's, :mod:`vflsec.trees.weights`)."""
        return baseline_score(y, weight)

    def gradients(self, p: np.ndarray, y: np.ndarray, job: Any,
                  weight: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
        """The round's per-row gradient and hessian of the log loss at predictions ``p``, each times the
        row's ``weight`` when given."""
        # float32 values first, as scikit-learn's histogram booster keeps them (the same splits where two
        # are within rounding), then the job's fixed-point grid: every histogram sum is exact, so each
        # protection that adds exactly opens the same histograms.
        if weight is None:
            g = job.quantize((p - y).astype(np.float32).astype(np.float64))
            h = job.quantize((p * (1.0 - p)).astype(np.float32).astype(np.float64))
            return g, h
        # Weighted (scikit-learn: the weight times the float64 gradient, then float32), on the grid scaled by
        # the weights' power-of-two bound s: g / s is on the job's grid, and sums stay exact (weights.py).
        scale = weight_scale(weight)
        g = job.quantize((weight * (p - y)).astype(np.float32).astype(np.float64) / scale) * scale
        h = job.quantize((weight * (p * (1.0 - p))).astype(np.float32).astype(np.float64) / scale) * scale
        return g, h

    def grown_from(self, g: np.ndarray, h: np.ndarray, released: Any) -> Tuple[np.ndarray, np.ndarray]:
        """The gradients the active party grows the round's tree from, given what it ``released``."""
        return g, h


_REGISTRY: Dict[str, Type[Protection]] = {}


def register_protection(cls: Type[Protection]) -> Type[Protection]:
    _REGISTRY[cls.name] = cls
    return cls


def get_protection(name: str) -> Protection:
    if name in _LAZY and name not in _REGISTRY:
        import importlib

        # The module registers itself on import (SecureBoost's imports the HE stack only when asked for).
        importlib.import_module(f"{__package__}.{_LAZY[name]}")
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
    passive_scores = True

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
