"""Binary randomized response with a prior: pure epsilon label-DP (Ghazi et al., NeurIPS 2021).

RRWithPrior (Ghazi, Golowich, Kumar, Manurangsi & Zhang, "Deep Learning with
Label Differential Privacy", NeurIPS 2021, Algorithm 2) releases a label ``y``
given a prior ``q`` over the labels that does **not** depend on ``y``: it picks
the ``k`` most likely labels under ``q`` maximising the chance of a correct
answer, then runs randomized response over those ``k`` (RR-Top-k). With two
labels there are two choices:

* ``k = 1``: answer the prior's top label, whatever ``y`` is (right with
  probability ``q_top``);
* ``k = 2``: plain randomized response: keep ``y`` with probability
  ``e^eps / (1 + e^eps)``, else flip it (right with that probability);

so ``k = 1`` exactly when ``q_top >= e^eps / (1 + e^eps)``. Either way the
output's law under ``y`` and under ``y'`` differ by a factor of at most
``e^eps`` (``k = 1``: not at all), so each label's release is ``eps``-DP for
replace-one neighbours that differ in that label (pure: delta = 0), for any
prior computed without that label. Releasing every label once is ``eps``-label-DP
(parallel composition over disjoint labels); a multi-stage use (priors from a
model trained on earlier stages' released labels) stays ``eps``-label-DP, since
a later prior is post-processing of earlier releases and of data the guarantee
does not cover.

Exactness. The keep decision compares a 64-bit word of the CSPRNG
(:class:`vflsec.kernels.NoiseGenerator`) with an integer ``K`` whose keep
probability ``K / 2^64`` is at most ``e^eps / (1 + e^eps)`` (computed from a
lower bound of ``e^eps`` in exact rational arithmetic) and at least 1/2, so the
likelihood ratio ``K / (2^64 - K)`` is at most ``e^eps`` exactly, not up to
floating-point error. One word is drawn per label whatever the prior says, so
the number of draws does not depend on the data.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any, Optional

import numpy as np

from .._arrays import check_real
from .accountant import DEFAULT_NEIGHBOURS, PrivacySpent, check_neighbours

__all__ = ["PURE_ACCOUNTANT", "RandomizedResponseMechanism", "check_binary_labels"]

PURE_ACCOUNTANT = "pure epsilon (each label released once)"
"""``PrivacySpent.accountant`` of a randomized-response release: no composition is involved."""

_WORD = 1 << 64


def check_binary_labels(labels: Any, what: str = "labels") -> np.ndarray:
    """``labels`` as an int64 array if every value is 0 or 1 (randomized response's precondition), else ValueError."""
    array = np.asarray(labels)
    if array.dtype.kind not in "biuf" or array.size and not np.isin(array, (0, 1)).all():
        raise ValueError(f"{what} must be 0 or 1 (binary randomized response), got values "
                         f"{np.unique(array)[:5].tolist() if array.dtype.kind in 'biuf' else array.dtype}")
    return array.astype(np.int64)


def _keep_words(epsilon: float) -> int:
    """The largest ``K`` with ``K / (2^64 - K) <= e^epsilon``: ``floor(2^64 e / (1 + e))`` for ``e``
    a lower bound of ``e^epsilon`` (the decimal module's exp, correctly rounded to 60 digits, lowered
    by a relative 1e-50)."""
    context = Context(prec=60)
    # e^64 > 2^64: K is 2^64 - 1 from there on (and exp of a huge epsilon would overflow).
    e = Fraction(context.exp(Decimal(min(epsilon, 64.0)))) * (1 - Fraction(1, 10 ** 50))
    return min(_WORD - 1, int(_WORD * e / (1 + e)))


@dataclass(frozen=True)
class RandomizedResponseMechanism:
    """Binary RRWithPrior at ``epsilon`` (pure DP per label; module docstring), created under a
    name of :data:`vflsec.dp.mechanisms.MECHANISMS`."""

    name: str
    epsilon: float
    neighbours: str = DEFAULT_NEIGHBOURS

    def __post_init__(self) -> None:
        from .mechanisms import mechanism_info

        if not mechanism_info(self.name).claims:
            raise ValueError(f"mechanism {self.name!r} claims no guarantee; it is not a randomized response")
        object.__setattr__(self, "epsilon", check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False))
        check_neighbours(self.neighbours)

    @property
    def keep_words(self) -> int:
        """``K``: a label is kept when its 64-bit word is below ``K``."""
        return _keep_words(self.epsilon)

    @property
    def keep_probability(self) -> float:
        """``K / 2^64`` (rounded to float64): at most ``e^eps / (1 + e^eps)``, at least 1/2."""
        return float(Fraction(self.keep_words, _WORD))

    def answers_top(self, prior_one: np.ndarray) -> np.ndarray:
        """Where RRWithPrior answers the prior's top label (``k = 1``): ``max(q, 1 - q) >= keep``
        for ``q = P(label 1)`` under the prior."""
        q = np.asarray(prior_one, dtype=np.float64)
        return np.maximum(q, 1.0 - q) >= self.keep_probability

    def release(self, labels: Any, prior_one: Any = None, *, generator: Any = None) -> np.ndarray:
        """The released labels (int64, the shape of ``labels``, every value 0 or 1).

        ``prior_one``: each label's prior probability of 1 (the shape of ``labels``), computed
        without that label; None: the uniform prior (plain randomized response).
        ``generator``: a :class:`vflsec.kernels.NoiseGenerator` (None: the shared OS-entropy one)."""
        from ..kernels.noise import NoiseGenerator, default_generator

        y = check_binary_labels(labels)
        gen = default_generator() if generator is None else generator
        if not isinstance(gen, NoiseGenerator):
            raise TypeError(f"generator must be a vflsec NoiseGenerator or None, got {type(gen).__name__}")
        words = gen.random_raw(y.size).reshape(y.shape)  # one word per label, whatever the prior
        keep = words < np.uint64(self.keep_words)
        released = np.where(keep, y, 1 - y)
        if prior_one is None:
            return released
        q = np.asarray(prior_one, dtype=np.float64)
        if q.shape != y.shape or not np.isfinite(q).all() or (q < 0.0).any() or (q > 1.0).any():
            raise ValueError(f"prior_one must be {y.shape} probabilities in [0, 1]")
        top = (q >= 0.5).astype(np.int64)  # ties never answer top: keep > 1/2
        return np.where(self.answers_top(q), top, released)

    def privacy_spent(self, caveat: Optional[str] = None) -> PrivacySpent:
        """The guarantee of releasing each label once: ``epsilon`` at delta 0."""
        return PrivacySpent(self.epsilon, 0.0, 1, self.epsilon, PURE_ACCOUNTANT, self.neighbours, caveat)
