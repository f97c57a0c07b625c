"""DP-SGD on each data owner's bottom model (DP-VFL, Ranbaduge & Ding).

Every data owner trains its bottom model with differentially private SGD
(Abadi et al. 2016): per batch it computes the gradient of each sample's loss
with respect to its own bottom parameters, clips each to L2 norm ``C``, sums
them, releases the sum with Gaussian noise and divides by the batch size
before the optimizer step. The release is the owner's mechanism's
(:meth:`vflsec.dp.SubsampledGaussianMechanism.release`: the lattice Gaussian
of :func:`vflsec.kernels.add_gaussian_noise`, a float ``sum + noise`` would
leak the sum through its rounding) with ``sigma = z C`` on the release's sigma
grid; P, the owner's number of trainable parameters, counts the noise draws
for the sampler's error bound. The active party's head is trained normally
(it sees only embeddings).

Per-sample gradients. The owner knows only ``g_i = dL/dh_i`` (what the active
party returned), so sample ``i``'s loss as far as the bottom model goes is
``l_i = s <h(x_i), g_i>`` with ``s = B`` when the active party's criterion
averages over the batch (``loss_reduction="mean"``, the usual case, as in
Opacus) and ``s = 1`` for a summed criterion: its gradient is then the
per-sample gradient of the sample's own loss. They are computed with
``torch.func`` (``functional_call`` + ``vmap(grad)``): exact, any layer type,
no extra dependency. Opacus' ``GradSampleModule`` would need wrapping the
bottom model in ``wrap_bottom`` (changing what every other hook sees) and
supports only the layer types it has hooks for; ``vmap`` only requires the
bottom model to treat samples independently (no BatchNorm), as Opacus does too.

Neighbour relation. VFL rows are fixed by PSI: every party knows which rows
take part, so a neighbouring dataset *replaces* one row's features
(``neighbours="replace_one"``, the default). A replaced record moves the
sampled sum of clipped gradients by up to ``2C`` (from one point of the
C-ball to the opposite one), twice the ``C`` of the add/remove relation of
Opacus and the paper; ``neighbours="add_remove"`` is the opt-in for that
relation (less noise at the same epsilon).

Privacy accounting. Each owner's release is a
:class:`vflsec.dp.SubsampledGaussianMechanism` (catalogue name ``dp_sgd``,
``mechanisms_[party]``), calibrated at the owner's first step by
``SubsampledGaussianMechanism.calibrated``: the smallest noise multiplier
``z = sigma / C`` whose composed epsilon over the whole run, ``steps = epochs
* ceil(n / B)`` releases of a Poisson-subsampled Gaussian with rate ``q = B /
n``, each of P noise draws (P: the owner's trainable parameters), stays
within ``epsilon`` at ``delta`` under ``neighbours`` (``epsilon`` is the
whole run's budget, as Opacus' ``target_epsilon``; ``delta`` None, the default,
is :func:`vflsec.dp.default_delta` of the training rows, ``min(1e-5, 1/(10
n))``, and an explicit delta of at least ``1/n`` is kept with a
:class:`~vflsec.dp.PrivacyWarning`). The release
(``mechanism.release(sum, clip=C)``), :meth:`DPSGD.privacy_spent` and
:meth:`DPSGD.planned_privacy` are that same mechanism's, so the calibration and
the reported epsilon take the same accountant path and the report never
exceeds the target. The accountant is PLD by default: RDP has no bound for
Poisson subsampling under replace-one, so ``accountant="rdp"`` is refused
there (it is accepted with ``neighbours="add_remove"``, or when every row is in
every batch). The accountant assumes **Poisson sampling** (each row
independently with probability ``q``), as Opacus' accountants do; the trainer
draws shuffled fixed-size batches, for which the subsampling amplification is
the commonly used approximation, not a proven bound. A step beyond the planned
number is refused (it would exceed ``epsilon``). The guarantee is per data
owner, about that owner's features (each owner runs its own mechanism with its
own noise).

Clip threshold. ``clip_norm=None`` follows the paper: the
``clip_percentile``-th percentile (80th) of the per-sample gradient norms seen
over the first ``calibration_steps`` (50) iterations of that owner. During
those iterations clipping uses the running estimate (the percentile of all
norms seen so far, the current batch included) and noise ``z * C_t`` is added
already. **That threshold reads the data the release protects** (a percentile
of raw gradient norms, not noised), so such a run has **no** guarantee:
``privacy_spent()`` reports ``epsilon=None`` with that caveat (it is never
reported as a number); pass a fixed ``clip_norm`` for an end-to-end guarantee.

Copies. The noise generators are never copied or pickled (a copy would repeat
the noise): a copy or an unpickled defense starts its own, as a loaded one does
(:mod:`vflsec.splitnn.persistence`).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..._arrays import check_positive_int, check_real
from ...dp.accountant import ACCOUNTANTS, DEFAULT_NEIGHBOURS, PrivacySpent, check_neighbours
from ...dp.mechanisms import SubsampledGaussianMechanism
from .base import BatchInfo, Defense, DefenseContext, check_seed
from .registry import register_defense

__all__ = ["DPSGD", "LOSS_REDUCTIONS", "SCOPE", "dp_vfl_centralized_model", "dp_vfl_models",
           "split_features_equally"]

LOSS_REDUCTIONS = ("mean", "sum")
NON_PRIVATE_CLIP = ("the clip threshold is a non-private percentile of the gradient norms (clip_norm=None); "
                    "pass clip_norm for a guarantee")
#: What a DP-SGD epsilon does not cover (PrivacySpent prints it as "not covered: ..."; measured in
#: tests/splitnn/test_deviating_parties.py, stated in docs/threat-model.md).
SCOPE = ("the embeddings each owner sends in its forward passes (the epsilon covers its bottom-model weights: its "
         "noisy sums of clipped per-sample gradients), and an active party that returns a row's gradient computed "
         "from other rows' embeddings")
# Guards the clip factor C / ||g_i|| against a zero gradient (Opacus uses 1e-6).
_NORM_FLOOR = 1e-12


def _party_generator(seed: Optional[int], party: str):
    """Each owner draws from its own generator: secure unless a seed is given."""
    from ...kernels import NoiseGenerator

    if seed is None:
        return NoiseGenerator()
    return NoiseGenerator(f"vflsec.dp_sgd/{seed}/{party}".encode())


_WRAPPER_CLASS: Any = None


def _embed_wrapper(module: Any, embed: Callable[[Any], Any]) -> Any:
    """A module holding the bottom as ``.module`` whose forward is the trainer's
    ``embed``: ``functional_call`` on it swaps the bottom's parameters while
    ``embed`` (which closes over that same bottom) runs."""
    global _WRAPPER_CLASS
    if _WRAPPER_CLASS is None:
        import torch

        class _EmbedWrapper(torch.nn.Module):
            def __init__(self, module: Any, embed: Callable[[Any], Any]) -> None:
                super().__init__()
                self.module = module
                # Not registered as a submodule even when ``embed`` is the bottom
                # itself: an aliased submodule breaks functional_call's restore.
                object.__setattr__(self, "_embed", embed)

            def forward(self, x):
                return self._embed(x)

        _WRAPPER_CLASS = _EmbedWrapper
    return _WRAPPER_CLASS(module, embed)


def per_sample_gradients(module: Any, embed: Callable[[Any], Any], x: Any, grad: Any,
                         scale: float) -> Tuple[List[str], List[Any]]:
    """Gradients of ``scale * <embed(x_i), grad_i>`` w.r.t. each trainable
    parameter of ``module``, one per sample: tensors of shape ``(B, *p.shape)``."""
    from torch.func import functional_call, vmap
    from torch.func import grad as func_grad

    names = [n for n, p in module.named_parameters() if p.requires_grad]
    if not names:
        raise ValueError("DP-SGD: the bottom model has no trainable parameters")
    params = {"module." + n: p.detach() for n, p in module.named_parameters() if p.requires_grad}
    wrapper = _embed_wrapper(module, embed)

    def sample_loss(p, xi, gi):
        h = functional_call(wrapper, p, (xi.unsqueeze(0),))
        return scale * (h.squeeze(0) * gi).sum()

    try:
        per_sample = vmap(func_grad(sample_loss), in_dims=(None, 0, 0), randomness="different")(
            params, x, grad.detach())
    except (RuntimeError, ValueError) as exc:
        raise RuntimeError(
            "DP-SGD could not compute per-sample gradients of the bottom model with torch.func.vmap: the "
            "embedding must be a torch function of each sample alone (no BatchNorm or other batch statistics, "
            f"no numpy inside the forward pass). Original error: {exc}") from exc
    return names, [per_sample["module." + n] for n in names]


class DPSGD(Defense):
    """DP-SGD on each data owner's bottom model (DP-VFL, Ranbaduge & Ding).

    Parameters
    ----------
    epsilon : float > 0
        Target epsilon for the whole run, per data owner.
    delta : float in (0, 1) or None (default: ``min(1e-5, 1/(10 n))`` for n
        training rows, :func:`vflsec.dp.default_delta`; the paper uses 1e-3)
    clip_norm : float > 0 or None
        Per-sample gradient norm bound ``C``. ``None`` (default): the paper's
        rule, the ``clip_percentile``-th percentile of the per-sample gradient
        norms over the first ``calibration_steps`` iterations (data-dependent:
        such a run reports no guarantee; see the module docstring).
    clip_percentile : float in (0, 100], default 80
    calibration_steps : int >= 1, default 50
    neighbours : "replace_one" (default: a neighbour replaces one row's
        features, moving a sampled sum by up to 2C) or "add_remove" (opt-in: C)
    accountant : "pld" (default) or "rdp" (refused with Poisson subsampling
        under replace-one: RDP has no bound for it)
    loss_reduction : "mean" (default) or "sum"
        How the active party's criterion reduces over the batch; fixes the
        scale of the per-sample losses (see the module docstring).
    seed : int >= 0 or None
        ``None``: noise from a cryptographically secure generator per owner
        (the trainer's ``DefenseContext.seed`` is used if it gives one).
        An int: reproducible noise for experiments, not for deployment.

    Attributes (after training starts)
    ----------------------------------
    mechanisms_ : dict party -> that owner's
        :class:`vflsec.dp.SubsampledGaussianMechanism` (set at its first step,
        for ``coordinates_[party]`` noise draws per step): the release and the
        guarantee it claims
    noise_multipliers_ : dict party -> the ``z = sigma / C`` of that owner's mechanism
    noise_multiplier_ : float, the smallest of them (AttributeError before any step)
    coordinates_ : dict party -> trainable parameters of that owner's bottom model
    sampling_rate_, planned_steps_ : the accountant's ``q`` and step count
    delta_ : the delta in force (``delta``, or the default for the training rows)
    clip_norm_ : dict party -> threshold in force (final after calibration)
    steps_ : dict party -> DP-SGD steps taken
    calibration_norms_ : dict party -> per-sample norms recorded while calibrating
    last_clipped_norms_ : dict party -> per-sample norms after clipping, last step
    """

    name = "dp_sgd"

    def __init__(self, *, epsilon: float, delta: Optional[float] = None, clip_norm: Optional[float] = None,
                 clip_percentile: float = 80, calibration_steps: int = 50, neighbours: str = DEFAULT_NEIGHBOURS,
                 accountant: str = "pld", loss_reduction: str = "mean", seed: Optional[int] = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.clip_norm = clip_norm
        self.clip_percentile = clip_percentile
        self.calibration_steps = calibration_steps
        self.neighbours = neighbours
        self.accountant = accountant
        self.loss_reduction = loss_reduction
        self.seed = seed

    def check_params(self) -> None:
        check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False)
        if self.delta is not None:
            check_real(self.delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)
        if self.clip_norm is not None:
            check_real(self.clip_norm, "clip_norm", low=0.0, low_inclusive=False)
        check_real(self.clip_percentile, "clip_percentile", low=0.0, low_inclusive=False, high=100.0)
        check_positive_int(self.calibration_steps, "calibration_steps")
        check_neighbours(self.neighbours)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {tuple(ACCOUNTANTS)}, got {self.accountant!r}")
        if self.loss_reduction not in LOSS_REDUCTIONS:
            raise ValueError(f"loss_reduction must be one of {LOSS_REDUCTIONS}, got {self.loss_reduction!r}")
        check_seed(self.seed)

    # -- setup --------------------------------------------------------------------------
    def setup(self, context: DefenseContext) -> None:
        from ...dp.delta_rule import check_delta_for_rows, default_delta

        super().setup(context)
        n = check_positive_int(context.n_samples, "n_samples")
        self.delta_ = default_delta(n) if self.delta is None else check_delta_for_rows(self.delta, n, who="delta")
        b = check_positive_int(context.batch_size, "batch_size")
        epochs = check_positive_int(context.epochs, "epochs")
        b = min(b, n)
        self.sampling_rate_ = b / n
        self.planned_steps_ = epochs * math.ceil(n / b)
        if self.accountant == "rdp" and self.neighbours == "replace_one" and self.sampling_rate_ < 1.0:
            raise ValueError(
                "DP-SGD: the RDP accountant has no bound for Poisson subsampling under replace-one neighbours "
                f"(sampling rate {self.sampling_rate_:.4g}; replace-one is the VFL default: after PSI a neighbour "
                "replaces one row's features); use accountant='pld' (the default), or neighbours='add_remove' "
                "where rows may be added or removed")
        self.mechanisms_: Dict[str, SubsampledGaussianMechanism] = {}
        self.noise_multipliers_: Dict[str, float] = {}
        self.coordinates_: Dict[str, int] = {}
        self._noise_seed = self.seed if self.seed is not None else check_seed(context.seed)
        self._generators: Dict[str, Any] = {}
        self.steps_: Dict[str, int] = {}
        self.clip_norm_: Dict[str, float] = {}
        self.calibration_norms_: Dict[str, np.ndarray] = {}
        self.last_clipped_norms_: Dict[str, np.ndarray] = {}
        self._spent_cache: Dict[Tuple[str, int], PrivacySpent] = {}

    def __getstate__(self) -> Dict[str, Any]:
        # Noise generators cannot (and must not) be copied: every copy starts its own.
        state = dict(self.__dict__)
        if "_generators" in state:
            state["_generators"] = {}
        return state

    @property
    def noise_multiplier_(self) -> float:
        if not getattr(self, "noise_multipliers_", None):
            raise AttributeError("noise_multiplier_ is calibrated per owner at its first DP-SGD step")
        return min(self.noise_multipliers_.values())

    def mechanism(self, party: str, coordinates: int) -> SubsampledGaussianMechanism:
        """The owner's mechanism for ``coordinates`` noise draws per step (calibrated once, at its first step)."""
        mech = self.mechanisms_.get(party)
        if mech is None:
            mech = SubsampledGaussianMechanism.calibrated(
                "dp_sgd", epsilon=float(self.epsilon), delta=self.delta_, sampling_rate=self.sampling_rate_,
                steps=self.planned_steps_, coordinates=coordinates, neighbours=self.neighbours,
                accountant=self.accountant)
            self.mechanisms_[party] = mech
            self.noise_multipliers_[party] = mech.noise_multiplier
            self.coordinates_[party] = coordinates
        elif mech.coordinates != coordinates:
            raise ValueError(f"DP-SGD: party {party!r} has {coordinates} trainable parameters, its noise was "
                             f"calibrated for {mech.coordinates}")
        return mech

    # -- clip threshold -----------------------------------------------------------------
    def _clip_for_step(self, party: str, norms: np.ndarray) -> float:
        if self.clip_norm is not None:
            self.clip_norm_[party] = float(self.clip_norm)
            return self.clip_norm_[party]
        if self.steps_.get(party, 0) >= self.calibration_steps:
            return self.clip_norm_[party]
        seen = np.concatenate([self.calibration_norms_.get(party, np.empty(0)), norms])
        self.calibration_norms_[party] = seen
        clip = float(np.percentile(seen, self.clip_percentile))
        if not math.isfinite(clip):
            raise FloatingPointError(f"DP-SGD: non-finite per-sample gradient norms at party {party!r}")
        if clip <= 0.0:
            # All gradients so far are zero: any positive bound is honoured; the
            # smallest positive norm seen, else 1, keeps the noise meaningful.
            positive = seen[seen > 0]
            clip = float(positive.min()) if positive.size else 1.0
        self.clip_norm_[party] = clip
        return clip

    # -- the DP-SGD step ----------------------------------------------------------------
    def bottom_backward(self, party: str, module: Any, optimizer: Any, x: Any,
                        embed: Callable[[Any], Any], grad: Any, batch: BatchInfo) -> bool:
        import torch

        if not hasattr(self, "planned_steps_"):
            raise RuntimeError("DPSGD.setup(context) must be called before training")
        taken = self.steps_.get(party, 0)
        if taken >= self.planned_steps_:
            raise RuntimeError(
                f"DP-SGD: party {party!r} would take step {taken + 1} but the noise was calibrated for "
                f"{self.planned_steps_} steps (epsilon={float(self.epsilon)}); more steps would exceed the budget")
        batch_size = int(x.shape[0])
        if batch_size == 0:
            raise ValueError("DP-SGD: empty batch")
        if tuple(grad.shape[:1]) != (batch_size,):
            raise ValueError(f"DP-SGD: grad has {grad.shape[0]} rows for a batch of {batch_size}")
        scale = float(batch_size) if self.loss_reduction == "mean" else 1.0
        names, per_sample = per_sample_gradients(module, embed, x, grad, scale)

        flat = torch.cat([g.reshape(batch_size, -1) for g in per_sample], dim=1)
        norms = torch.linalg.vector_norm(flat, dim=1)
        norms_np = norms.detach().to(torch.float64).cpu().numpy()
        clip = self._clip_for_step(party, norms_np)
        factor = (clip / norms.clamp_min(_NORM_FLOOR)).clamp(max=1.0)
        clipped = flat * factor.unsqueeze(1)
        self.last_clipped_norms_[party] = (norms_np * factor.detach().to(torch.float64).cpu().numpy())

        generator = self._generators.get(party)
        if generator is None:
            generator = self._generators[party] = _party_generator(self._noise_seed, party)
        mechanism = self.mechanism(party, int(flat.shape[1]))
        # The lattice release with sigma = z C on its grid (sigma / C >= z).
        released = mechanism.release(clipped.sum(dim=0).detach(), clip=clip, generator=generator)
        noisy_mean = released / batch_size  # post-processing of the release

        params = dict(module.named_parameters())
        offset = 0
        for name, _sample_grads in zip(names, per_sample):
            p = params[name]
            size = p.numel()
            p.grad = noisy_mean[offset:offset + size].view_as(p).to(p.dtype).clone()
            offset += size
        optimizer.step()

        self.steps_[party] = taken + 1
        return True

    def _worst(self, steps: Optional[int]) -> PrivacySpent:
        """The worst owner's guarantee after its own steps taken (``steps`` None)
        or after ``steps`` steps, from its mechanism."""
        counts = {party: self.steps_.get(party, 0) if steps is None else steps for party in self.mechanisms_}
        if self.clip_norm is None:
            return PrivacySpent(None, self.delta_, max(counts.values()), None, self.accountant,
                                self.neighbours, NON_PRIVATE_CLIP)
        worst: Optional[PrivacySpent] = None
        for party, mech in self.mechanisms_.items():
            key = (party, counts[party])
            spent = self._spent_cache.get(key)
            if spent is None:
                spent = self._spent_cache[key] = mech.privacy_spent(steps=counts[party], caveat=SCOPE)
            if worst is None or float(spent.epsilon or 0.0) > float(worst.epsilon or 0.0):
                worst = spent
        assert worst is not None  # callers check that a mechanism exists
        return worst

    # -- reporting ----------------------------------------------------------------------
    def privacy_spent(self) -> Optional[PrivacySpent]:
        """Composed (epsilon, delta) of the worst data owner over the steps it
        has taken, from its mechanism (``epsilon_per_release`` is None: one
        DP-SGD step has no standalone figure). ``epsilon`` is None (no
        guarantee) with the percentile clip (``clip_norm=None``)."""
        if not hasattr(self, "planned_steps_"):
            return None
        if not self.mechanisms_:
            caveat = NON_PRIVATE_CLIP if self.clip_norm is None else None
            return PrivacySpent(None if caveat else 0.0, self.delta_, 0, None, self.accountant,
                                self.neighbours, caveat)
        return self._worst(None)

    def planned_privacy(self) -> PrivacySpent:
        """The guarantee for the whole planned run (what the noise was
        calibrated to), worst owner, from the same mechanism: at most
        ``epsilon``. Each owner's noise is calibrated at its first step, so
        this needs one. ``epsilon`` is None with ``clip_norm=None``."""
        if not getattr(self, "mechanisms_", None):
            raise RuntimeError("DPSGD: no owner has taken a step yet (each owner's noise is calibrated to its "
                               "parameter count at its first step)")
        return self._worst(self.planned_steps_)


# ------------------------------------------------------------------------ paper models

DP_VFL_HIDDEN = (48, 96, 196)
DP_VFL_EMBEDDING = 32


def split_features_equally(n_features: int, owners: int) -> List[np.ndarray]:
    """Column indices of ``owners`` contiguous, (near-)equal feature blocks
    (the paper splits attributes equally; sizes differ by at most one)."""
    n_features = check_positive_int(n_features, "n_features")
    owners = check_positive_int(owners, "owners")
    if owners > n_features:
        raise ValueError(f"cannot split {n_features} features among {owners} owners")
    return [np.asarray(block, dtype=np.int64) for block in np.array_split(np.arange(n_features), owners)]


def dp_vfl_models(features_per_owner: Sequence[int], n_outputs: int, *,
                  embedding_dim: int = DP_VFL_EMBEDDING) -> Tuple[List[Any], Any]:
    """Bottom models and head of the DP-VFL paper's split MLP.

    The paper's MLP has hidden layers of 48, 96 and 196 units and is cut at the
    second: with 3 owners the cut layer (96 units) is the concatenation of
    three 32-unit bottom outputs. So each bottom is
    ``Linear(p_k, 48) ReLU Linear(48, 32) ReLU`` and the head is
    ``Linear(32 * owners, 196) ReLU Linear(196, n_outputs)`` (the head's input
    is ``32 * owners``: 96, 128, 160 for 3, 4, 5 owners). ``n_outputs``: 1 for
    binary logits or one regression target, the class count otherwise.
    """
    from ..models import dp_vfl_bottom, dp_vfl_head

    if isinstance(features_per_owner, (str, bytes)) or not hasattr(features_per_owner, "__iter__"):
        raise TypeError("features_per_owner must be a sequence of positive ints")
    counts = [check_positive_int(c, f"features_per_owner[{i}]") for i, c in enumerate(features_per_owner)]
    if not counts:
        raise ValueError("features_per_owner must name at least one owner")
    n_outputs = check_positive_int(n_outputs, "n_outputs")
    embedding_dim = check_positive_int(embedding_dim, "embedding_dim")
    bottoms = [dp_vfl_bottom(p, embedding_dim) for p in counts]
    return bottoms, dp_vfl_head(embedding_dim * len(counts), n_outputs)


def dp_vfl_centralized_model(n_features: int, n_outputs: int) -> Any:
    """The paper's MLP unsplit (the centralized reference):
    ``n_features -> 48 -> 96 -> 196 -> n_outputs`` with ReLU."""
    import torch.nn as nn

    n_features = check_positive_int(n_features, "n_features")
    n_outputs = check_positive_int(n_outputs, "n_outputs")
    h1, h2, h3 = DP_VFL_HIDDEN
    return nn.Sequential(nn.Linear(n_features, h1), nn.ReLU(), nn.Linear(h1, h2), nn.ReLU(),
                         nn.Linear(h2, h3), nn.ReLU(), nn.Linear(h3, n_outputs))


register_defense("dp_sgd", DPSGD)
