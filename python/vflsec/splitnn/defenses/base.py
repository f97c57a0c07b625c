"""The contract between the split-learning trainer and a defense.

A defense is a composable object applied at the party that owns it. The
trainer calls these hooks, each a no-op by default, so a defense overrides
only what it changes:

passive party P, per batch::

    h_raw  = bottom_P(x_P)                         # wrap_bottom() may have replaced layers
    h_sent = defense.transform_embedding(P, h_raw, batch)      # clip / rescale / noise
    send h_sent (a message: bytes counted by the Channel)
    ... receive g = dL/dh_sent from the active party ...
    loss_P = (h_sent * g).sum()                    # chain rule through the defense
             + defense.regularizer(P, h_raw, h_sent, batch)    # e.g. VFL-AFE's KL term
             + defense.adjust_loss(P, h_sent, g, batch)        # e.g. VFL-AFE's FCM contrastive term
    if not defense.bottom_backward(P, bottom_P, optimizer_P, x_P, h_sent_fn, g, batch):
        loss_P.backward(); optimizer_P.step()

active party, per batch::

    z = head(concat(h_sent_1 .. h_sent_m [, own embedding]))   # wrap_head() may have replaced layers
    loss = criterion(z, y); loss.backward()
    grads = defense.transform_gradient({P: dL/dh_sent_P}, batch)  # gradient noise / sparsification
    send grads[P] to each P

Prediction (the estimator's ``inference``): by default a passive party sends
its bottom's output ``h_raw`` (deterministic; not a DP release), so
``predict`` gives the same answer every time. ``inference="defended"``
(opt-in) sends ``transform_embedding``'s output instead: a DP defense counts
such an inference pass (batches with ``global_step == -1``, numbered from step
0, each row once per pass) as one more release in its ``privacy_spent()``.

Every noisy release goes through a mechanism object named in
:data:`vflsec.dp.mechanisms.MECHANISMS` (:func:`gaussian_release` applies it
with autograd passing through). ``privacy_spent()`` reports the guarantee
(per release and composed over the run, from the same mechanism that
calibrated the noise) for DP defenses: a :class:`vflsec.dp.PrivacySpent`
whose ``epsilon`` is None where the release reads data it protects without
accounting for it; ``None`` for a defense that claims no guarantee.

Parameters follow scikit-learn's estimator contract (``sklearn.base``): every
constructor argument is keyword-only and stored unchanged under its own name
(no validation or conversion in ``__init__``), ``get_params(deep=...)`` /
``set_params(**params)`` come from :class:`sklearn.base.BaseEstimator`, so
``sklearn.base.clone`` works on a defense and on an estimator holding one.
Settings are validated by :meth:`Defense.check_params`, which ``setup()``
calls (the point where a defense is attached to a job), with the errors the
constructors used to raise.
"""
from __future__ import annotations

import hashlib
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from sklearn.base import BaseEstimator

from ..._arrays import check_real

__all__ = ["BatchInfo", "Defense", "DefenseContext", "NoDefense", "UnaccountedNoise", "gaussian_release"]


@dataclass(frozen=True)
class DefenseContext:
    """What the trainer tells a defense before training (after validation)."""

    n_classes: Optional[int]          # None for regression
    passive_parties: tuple            # names of the parties that send embeddings
    n_samples: int                    # training rows
    batch_size: int
    epochs: int
    device: str = "cpu"
    seed: Optional[int] = None        # None: the defense draws noise from the secure generator
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchInfo:
    epoch: int
    step: int                          # step within the epoch
    global_step: int
    indices: Any                       # row indices of the batch in the training set (numpy int64)


class Defense(BaseEstimator):
    """Identity defense; subclasses override the hooks they need.

    ``name`` is the defense's name in benchmark results (``none``,
    ``vfl_afe``, ``dp_sgd``, ``fedpass``, ``noise``, ``sparsify``) and
    ``variant`` a sub-setting (VFL-AFE: ``vanilla``, ``R``, ``D``, ``full``).
    Its name in :mod:`.registry` (unique; e.g. ``noise_embedding``) is the
    one :func:`~.registry.make_defense` takes.
    """

    # Why a split-learning run with this defense cannot continue from a
    # checkpoint (None: it can). Checkpoints hold the models and optimizer
    # state only, so a defense with state of its own refuses; stateless
    # defenses set None.
    resume_refusal: Optional[str] = ("its own state (noise generators, privacy accounting, adapted parameters) "
                                     "is not checkpointed")

    name = "none"
    variant: Optional[str] = None

    def check_params(self) -> None:
        """ValueError / TypeError for an invalid setting (no-op here);
        ``setup()`` calls it, and a caller may call it earlier."""

    def setup(self, context: DefenseContext) -> None:
        """Called once before training: validates the settings
        (:meth:`check_params`); a subclass validates them against the job here."""
        self.check_params()
        self.context_ = context

    # -- model surgery -------------------------------------------------------------
    def wrap_bottom(self, party: str, module: Any) -> Any:
        return module

    def wrap_head(self, module: Any) -> Any:
        return module

    def on_batch_start(self, batch: BatchInfo) -> None:
        """E.g. FedPass re-samples its passports here."""

    # -- passive side -----------------------------------------------------------------
    def transform_embedding(self, party: str, h: Any, batch: BatchInfo) -> Any:
        return h

    def regularizer(self, party: str, h_raw: Any, h_sent: Any, batch: BatchInfo) -> Optional[Any]:
        return None

    def adjust_loss(self, party: str, h_sent: Any, grad: Any, batch: BatchInfo) -> Optional[Any]:
        return None

    def bottom_backward(self, party: str, module: Any, optimizer: Any, x: Any,
                        embed: Callable[[Any], Any], grad: Any, batch: BatchInfo) -> bool:
        """Take over the bottom model's backward pass and optimizer step (DP-SGD
        needs per-sample gradients). ``embed(x)`` recomputes the sent embedding
        from inputs. Return True when handled; False lets the trainer do the
        ordinary backward of ``(h_sent * grad).sum()`` plus the extra losses."""
        return False

    # -- active side ------------------------------------------------------------------
    def transform_gradient(self, grads: Dict[str, Any], batch: BatchInfo) -> Dict[str, Any]:
        return grads

    # -- saved defenses ---------------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write this defense (its registry name, parameters, set-up context and
        the state its guarantee depends on) to ``path`` as one JSON document
        (0600, atomic; :mod:`vflsec.splitnn.persistence`). Noise generators
        and seeds are not saved."""
        from ..persistence import save_defense

        save_defense(self, path)

    @classmethod
    def load(cls, path: Any) -> "Defense":
        """The defense saved at ``path`` by :meth:`save`, set up as it was
        (same ``privacy_spent()``; fresh noise generators)."""
        from ..persistence import load_defense

        defense = load_defense(path)
        if not isinstance(defense, cls):
            raise ValueError(f"{path} holds a {type(defense).__name__}, not a {cls.__name__}")
        return defense

    # -- reporting --------------------------------------------------------------------
    def privacy_spent(self) -> Optional[Any]:
        """A :class:`vflsec.dp.PrivacySpent` (``epsilon`` None: no proven
        guarantee, with the caveat saying why), or None for a non-DP defense."""
        return None

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        # Every parameter, defaults included (sklearn's repr shows only changed ones).
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({params})"


class NoDefense(Defense):
    """Unprotected split learning (the baseline every defense is compared with)."""

    name = "none"
    resume_refusal = None


def derived_seed(seed: int, *parts: Any) -> int:
    """A 63-bit seed derived from ``seed`` and ``parts`` (SHA-256): one stream per party, use and step."""
    text = "/".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(b"vflsec.splitnn/" + text).digest()[:8], "little") >> 1


def check_seed(seed: Any) -> Optional[int]:
    """A defense's ``seed``: None (secure noise) or a non-negative int (reproducible, experiments only)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"seed must be None or a non-negative int, got {seed!r}")
    return int(seed)


@dataclass(frozen=True)
class UnaccountedNoise:
    """A noise release that claims no guarantee (the baselines): ``x +
    N(0, sigma^2)`` through the lattice release, under a name of
    :data:`vflsec.dp.mechanisms.MECHANISMS` whose ``claims`` is False.

    The counterpart of :class:`vflsec.dp.GaussianMechanism` for noise that is
    not calibrated to a sensitivity (nothing is clipped): same ``release``
    signature, and :meth:`privacy_spent` is None (no guarantee to report).
    A name that claims a guarantee is refused: such a release goes through its
    ``GaussianMechanism``."""

    name: str
    sigma: float

    def __post_init__(self) -> None:
        from ...dp.mechanisms import mechanism_info

        if mechanism_info(self.name).claims:
            raise ValueError(f"mechanism {self.name!r} claims a guarantee: release it through its "
                             "vflsec.dp.GaussianMechanism, not as unaccounted noise")
        object.__setattr__(self, "sigma", check_real(self.sigma, "sigma", low=0.0, low_inclusive=False))

    def release(self, x: Any, *, generator: Any = None, part: Optional[str] = None) -> Any:
        """``x`` released through :func:`vflsec.kernels.add_gaussian_noise` with ``sigma``."""
        from ...kernels import add_gaussian_noise

        if part is not None:
            raise KeyError(f"mechanism {self.name!r} has one part; got part={part!r}")
        return add_gaussian_noise(x, self.sigma, generator=generator)

    def privacy_spent(self, *args: Any, **kwargs: Any) -> None:
        """None: noise without a sensitivity bound gives no guarantee."""
        return None


_RELEASE_FUNCTION: Any = None


def gaussian_release(x: Any, mechanism: Any, generator: Any, *, part: Optional[str] = None) -> Any:
    """``x`` (a torch tensor) released through the lattice Gaussian
    (:func:`vflsec.kernels.add_gaussian_noise`, the release every noise defense
    uses: ``x + noise`` formed in floating point would leak ``x``).

    ``mechanism``: the :class:`vflsec.dp.GaussianMechanism` (or
    :class:`UnaccountedNoise`) that owns the release, with ``part`` naming the
    part of a multi-part mechanism; or a float sigma (a bare lattice release).

    Autograd sees the identity, as it would for ``x + noise`` with constant
    noise, so the released embedding still trains the bottom model; the
    forward value is the release itself, bit for bit (a detour such as
    ``x + (y - x).detach()`` would round again and leave the lattice)."""
    from ...kernels import add_gaussian_noise

    if isinstance(mechanism, numbers.Real) and not isinstance(mechanism, bool):
        sigma = float(mechanism)
        if part is not None:
            raise TypeError("part names a part of a mechanism; a bare sigma has none")

        def draw(v: Any) -> Any:
            return add_gaussian_noise(v, sigma, generator=generator)
    elif hasattr(mechanism, "release"):
        def draw(v: Any) -> Any:
            return mechanism.release(v, generator=generator, part=part)
    else:
        raise TypeError(f"gaussian_release takes a mechanism or a float sigma, got {type(mechanism).__name__}")
    if not x.requires_grad:
        return draw(x)
    global _RELEASE_FUNCTION
    if _RELEASE_FUNCTION is None:
        import torch

        class _Release(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, draw):
                return draw(x.detach())

            @staticmethod
            def backward(ctx, grad):
                return grad, None

        _RELEASE_FUNCTION = _Release
    return _RELEASE_FUNCTION.apply(x, draw)
