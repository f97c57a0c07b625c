"""DP mechanisms: the one home of every release vflsec makes under a guarantee.

A mechanism object owns what a guarantee depends on -- the sensitivity, the
neighbour relation it is stated for, the calibration, the lattice release and
the epsilon it reports -- so no caller computes a sigma or an epsilon by hand
(model: Google DP's ``NumericalMechanismBuilder`` / ``AddNoise`` /
``GetEpsilon``; OpenDP's Gaussian measurement).

* :class:`GaussianMechanism` -- one release of a vector query through the
  lattice Gaussian (:func:`vflsec.kernels.add_gaussian_noise`), possibly in
  several *parts* (e.g. VFL-AFE +R: a noisy batch centre, noisy distance
  statistics and the noisy embeddings, each with its own sensitivity and
  sigma). Parts about the same individual compose exactly like one Gaussian
  with ``(Delta/sigma)^2 = sum_i (Delta_i/sigma_i)^2`` (Gaussian DP composes
  by adding ``mu^2``), which is how the calibration splits a budget among
  them and how the accountant counts them.
* :class:`SubsampledGaussianMechanism` -- DP-SGD's release: the sum of
  per-record contributions clipped to norm ``C``, Poisson-subsampled at rate
  ``q``, plus ``N(0, (zC)^2)``.
* :class:`vflsec.dp.objective_perturbation.ObjectivePerturbationMechanism` --
  a minimiser of a regularised GLM objective with a Gaussian linear term
  (its guarantee is the objective-perturbation theorem, not a Gaussian's).
* :class:`vflsec.dp.randomized_response.RandomizedResponseMechanism` --
  binary randomized response with a prior (pure epsilon per label).

Every mechanism is created under a name of :data:`MECHANISMS`, the catalogue
of the product's DP paths; ``vflsec audit`` has an audit for each name and a
test keeps the two lists equal, so a new DP path cannot ship without one.
Names whose ``claims`` is False are noise releases without a guarantee (the
baselines): they are audited too, and report no epsilon.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from .._arrays import check_positive_int, check_real
from .accountant import DEFAULT_NEIGHBOURS, PrivacySpent, Release, check_neighbours

__all__ = [
    "MECHANISMS",
    "GaussianMechanism",
    "GaussianPart",
    "MechanismInfo",
    "SubsampledGaussianMechanism",
    "mechanism_info",
]


@dataclass(frozen=True)
class MechanismInfo:
    """A catalogue entry: what the mechanism releases, who uses it, the
    sensitivity bound in words, and whether it claims a guarantee."""

    name: str
    releases: str
    sensitivity: str
    used_by: str
    claims: bool = True


def _catalogue(*infos: MechanismInfo) -> Dict[str, MechanismInfo]:
    return {info.name: info for info in infos}


MECHANISMS: Dict[str, MechanismInfo] = _catalogue(
    MechanismInfo("lattice_gaussian", "x + N(0, sigma^2 I) on the release's lattice, for any vector query",
                  "the caller's stated L2 sensitivity", "vflsec.kernels.add_gaussian_noise, vflsec.dp.gaussian_sigma"),
    MechanismInfo("hdp_passive_ir", "a passive party's whole sequence of intermediate results X_B[s] w_B (HDP-VFL)",
                  "Lemma 3 (corrected for P coupled parties) over all epochs, with the received IR_A in [-L, L]",
                  "vflsec.glm.hdp"),
    MechanismInfo("hdp_active_ir", "the active party's whole sequence of IR_A = dl/dtheta (HDP-VFL)",
                  "Lemma 4 (corrected for P coupled parties) over all epochs", "vflsec.glm.hdp"),
    MechanismInfo("vfl_afe_embedding", "one batch's embeddings, each row clipped to norm t (VFL-AFE without +R)",
                  "2t under replace-one (t under add/remove)", "vflsec.splitnn.defenses.vfl_afe"),
    MechanismInfo("vfl_afe_rescale", "VFL-AFE +R: a noisy batch centre, noisy pairwise-distance statistics, "
                  "then the embeddings rescaled about that centre and clipped to norm t around it",
                  "centre 2t/n, statistics sqrt(2) in units of (4t/n, 8t^2/n), embeddings 2t (replace-one)",
                  "vflsec.splitnn.defenses.vfl_afe"),
    MechanismInfo("dp_sgd", "the Poisson-subsampled sum of per-sample bottom-model gradients clipped to norm C",
                  "C per record (a replaced record moves a sampled sum by up to 2C)",
                  "vflsec.splitnn.defenses.dp_sgd"),
    MechanismInfo("selection_score", "one run's validation count of correct predictions (private selection)",
                  "1 (one row changes the count by at most 1)", "vflsec.glm.tuning"),
    MechanismInfo("central_dp_sgd", "the central-DP reference's Poisson-subsampled sum of per-row logistic-loss "
                  "gradients on the joined rows (||x|| <= 1), each clipped to norm C",
                  "C per record (a replaced record moves a sampled sum by up to 2C; C under add/remove)",
                  "vflsec.glm.central_dp"),
    MechanismInfo("mpc_dp_sgd", "the secret-shared Poisson-subsampled sum of per-row logistic-loss gradients on "
                  "the joined rows inside MPC (each block's rows ||x_p|| <= 1, |phi'| <= 1), plus every party's "
                  "noise share",
                  "C = sqrt(P) + fixed-point slack per record (a replaced record moves a sampled sum by up to 2C)",
                  "vflsec.glm.mpc_dp"),
    MechanismInfo("central_output_perturbation", "the central-DP reference's minimiser of the mean logistic loss "
                  "+ (lam/2)||theta||^2 on the joined rows (||x|| <= 1), plus Gaussian noise",
                  "2 / (n lam) under replace-one (Chaudhuri, Monteleoni & Sarwate 2011, Cor. 8), times 1 + 1e-6 for "
                  "the solver's gradient tolerance", "vflsec.glm.central_dp"),
    MechanismInfo("central_objective_perturbation", "the central-DP reference's minimiser of the mean logistic loss "
                  "+ (lam/2)||theta||^2 + b.theta/n on the joined rows (||x|| <= 1), b Gaussian",
                  "a replaced row moves the objective's gradient by up to 2 (in the span of the two rows) and its "
                  "Hessian by one rank-1 term <= 1/4 (Kifer, Smith & Thakurta 2012, Thm 2, replace-one; "
                  "vflsec.dp.objective_perturbation)", "vflsec.glm.central_dp"),
    MechanismInfo("he_dp_gradient", "one step's gradients of every data party's block in HE-VFL with a DP model "
                  "(paillier_dp, ckks_dp, taylor_dp): the key holder rounds each masked decryption to the noise "
                  "lattice and adds the lattice Gaussian; composed over the epochs (each row in one batch per epoch)",
                  "sqrt(P) (P k + 2 max|s(y)|) in units of X^T (theta + s(y)) per replaced row, replace-one (P data "
                  "parties, rows of norm <= 1 per party, weights clipped to k), plus fixed-point / CKKS / float "
                  "errors and the lattice rounding", "vflsec.glm.he_dp"),
    MechanismInfo("trees_gradient", "each boosting round's per-row log-loss gradients g = p - y (the active "
                  "party's labels) + N(0, sigma^2) per row, sent to the passive parties; composed over max_iter "
                  "rounds", "1 in L2 per round under replace-one label: g_i moves by exactly 1 (labels 0/1, g "
                  "computed exactly); h = p(1 - p) and p are functions of earlier releases only, as the active "
                  "party grows every tree from the released g", "vflsec.trees.dp"),
    MechanismInfo("trees_label_rr", "every training label once, before the boosting, through binary randomized "
                  "response with a prior (RRWithPrior, Ghazi et al. 2021; priors from a model on earlier stages' "
                  "released labels)", "pure epsilon per label under replace-one label: keep probability "
                  "K / 2^64 <= e^eps / (1 + e^eps) exactly; a label's prior never reads that label",
                  "vflsec.trees.dp"),
    MechanismInfo("noise_embedding", "embeddings + N(0, scale^2) with no clipping (a baseline)",
                  "unbounded: no guarantee", "vflsec.splitnn.defenses.baselines", claims=False),
    MechanismInfo("noise_gradient", "returned gradients + N(0, scale^2) with no clipping (a baseline)",
                  "unbounded: no guarantee", "vflsec.splitnn.defenses.baselines", claims=False),
)


def mechanism_info(name: Any) -> MechanismInfo:
    """The catalogue entry of ``name`` (ValueError for a name not in :data:`MECHANISMS`)."""
    if not isinstance(name, str) or name not in MECHANISMS:
        raise ValueError(f"unknown DP mechanism {name!r}: every DP path is one of {sorted(MECHANISMS)} "
                         "(add it to vflsec.dp.mechanisms.MECHANISMS together with its audit)")
    return MECHANISMS[name]


def _sigma(epsilon: float, delta: float, sensitivity: float, method: str, coordinates: int) -> float:
    """gaussian_sigma; for "classic" at epsilon >= 1 without its PrivacyWarning,
    because :meth:`GaussianMechanism._verified` then checks the result exactly
    (and refuses it when the target is not met)."""
    import warnings

    from .gaussian import PrivacyWarning, gaussian_sigma

    with warnings.catch_warnings():
        if method == "classic":
            warnings.simplefilter("ignore", PrivacyWarning)
        return gaussian_sigma(epsilon, delta, sensitivity, method=method, coordinates=coordinates)


@dataclass(frozen=True)
class GaussianPart:
    """One vector of a release: ``coordinates`` values with L2 sensitivity
    ``sensitivity`` (under the mechanism's relation) and noise ``sigma`` (on
    the release's grid)."""

    label: str
    sensitivity: float
    sigma: float
    coordinates: int = 1

    @property
    def ratio(self) -> float:
        """``Delta / sigma``: the part's shift in units of its noise (Gaussian DP's mu)."""
        return self.sensitivity / self.sigma


def _combined_ratio(parts: Sequence[GaussianPart]) -> float:
    return math.sqrt(sum(p.ratio ** 2 for p in parts))


@dataclass(frozen=True)
class GaussianMechanism:
    """A (possibly multi-part) Gaussian release about one individual.

    Build it with :meth:`calibrated` (from a target (epsilon, delta)) or
    :meth:`with_sigma`; release with :meth:`release`; report with
    :meth:`privacy_spent`; record in an accountant with :meth:`accounting`.
    ``target`` is the (epsilon, delta) it was calibrated to, if any.
    """

    name: str
    parts: Tuple[GaussianPart, ...]
    neighbours: str = DEFAULT_NEIGHBOURS
    target: Optional[Tuple[float, float]] = None

    def __post_init__(self) -> None:
        info = mechanism_info(self.name)
        if not info.claims:
            raise ValueError(f"mechanism {self.name!r} claims no guarantee; it is not a GaussianMechanism")
        check_neighbours(self.neighbours)
        if not self.parts or not all(isinstance(p, GaussianPart) for p in self.parts):
            raise TypeError("a GaussianMechanism needs at least one GaussianPart")
        labels = [p.label for p in self.parts]
        if len(set(labels)) != len(labels):
            raise ValueError(f"part labels must be unique, got {labels}")

    # -- builders -----------------------------------------------------------------------
    @classmethod
    def calibrated(cls, name: str, *, epsilon: float, delta: float, sensitivity: Optional[float] = None,
                   coordinates: int = 1, method: str = "analytic", neighbours: str = DEFAULT_NEIGHBOURS,
                   parts: Optional[Sequence[Tuple[str, float, int, float]]] = None) -> "GaussianMechanism":
        """The mechanism whose one release is (``epsilon``, ``delta``)-DP under
        ``neighbours``, lattice corrections included.

        Either ``sensitivity`` and ``coordinates`` (one part), or ``parts``:
        ``(label, sensitivity, coordinates, share)`` tuples whose shares (> 0)
        sum to 1: part i gets ``share_i`` of the budget in Gaussian DP's
        ``mu^2`` (``mu_i = mu sqrt(share_i)``).
        ``method``: "analytic" (Balle & Wang; every epsilon) or "classic"
        (Dwork & Roth, as HDP-VFL and VFL-AFE use it; proved for epsilon < 1
        only: beyond, its sigma is checked by exact accounting and refused
        if it does not meet the target).
        """
        from .lattice import sigma_for_multiplier

        if (sensitivity is None) == (parts is None):
            raise TypeError("give either sensitivity (one part) or parts, not both or neither")
        if sensitivity is not None:
            sigma = _sigma(epsilon, delta, sensitivity, method, coordinates)
            part = GaussianPart("release", float(check_real(sensitivity, "sensitivity", low=0.0,
                                                            low_inclusive=False)), sigma,
                                check_positive_int(coordinates, "coordinates"))
            return cls(name, (part,), check_neighbours(neighbours), (float(epsilon), float(delta)))._verified(method)
        assert parts is not None  # exactly one of the two is given
        specs = list(parts)
        if not specs:
            raise ValueError("parts must not be empty")
        shares = [check_real(s[3], f"parts[{i}] share", low=0.0, low_inclusive=False, high=1.0)
                  for i, s in enumerate(specs)]
        if abs(sum(shares) - 1.0) > 1e-9:
            raise ValueError(f"the parts' shares must sum to 1, got {sum(shares)!r}")
        draws = sum(check_positive_int(s[2], f"parts[{i}] coordinates") for i, s in enumerate(specs))
        # The whole release's mu from one calibration over all its draws (sensitivity 1).
        mu = 1.0 / _sigma(epsilon, delta, 1.0, method, draws)
        built = []
        for (label, part_sensitivity, coords, _), share in zip(specs, shares):
            delta_i = check_real(part_sensitivity, f"sensitivity of part {label!r}", low=0.0, low_inclusive=False)
            # sigma on the grid, rounded up: each part's mu is at most its share.
            built.append(GaussianPart(str(label), delta_i, sigma_for_multiplier(1.0 / (mu * math.sqrt(share)),
                                                                                  delta_i), int(coords)))
        mechanism = cls(name, tuple(built), check_neighbours(neighbours), (float(epsilon), float(delta)))
        if mechanism.ratio > mu * (1.0 + 1e-12):  # pragma: no cover - excluded by rounding sigma up
            raise ValueError("calibration of the parts exceeded the budget")
        return mechanism._verified(method)

    def _verified(self, method: str) -> "GaussianMechanism":
        """The classic formula is proved for epsilon < 1 only; beyond, its sigma is
        kept only if the exact accounting of that sigma meets the target (it
        usually does: the formula is conservative there), else the target cannot
        be honoured by it and that is an error."""
        if method != "classic" or self.target is None or self.target[0] < 1.0:
            return self
        epsilon, delta = self.target
        exact = self.privacy_spent().epsilon
        if exact is None or not exact <= epsilon * (1.0 + 1e-9):
            raise ValueError(f"the classic Gaussian calibration does not give epsilon={epsilon:g} at delta={delta:g} "
                             f"for mechanism {self.name!r} (its sigma is only {exact:.4g}-DP by exact accounting; the "
                             "formula is proved for epsilon < 1 only); use method='analytic'")
        return self

    @classmethod
    def with_sigma(cls, name: str, *, sigma: float, sensitivity: float, coordinates: int = 1,
                   neighbours: str = DEFAULT_NEIGHBOURS) -> "GaussianMechanism":
        """A one-part mechanism with a given sigma (moved to the release's grid)."""
        from ..kernels.noise import lattice_sigma

        sigma = lattice_sigma(check_real(sigma, "sigma", low=0.0, low_inclusive=False))
        sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
        return cls(name, (GaussianPart("release", sensitivity, sigma, check_positive_int(coordinates,
                                                                                        "coordinates")),),
                   check_neighbours(neighbours))

    @classmethod
    def with_multiplier(cls, name: str, *, noise_multiplier: float, sensitivity: float, coordinates: int = 1,
                        neighbours: str = DEFAULT_NEIGHBOURS) -> "GaussianMechanism":
        """A one-part mechanism whose sigma (on the release's grid) is at least
        ``noise_multiplier * sensitivity``."""
        from .lattice import sigma_for_multiplier

        sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_inclusive=False)
        sigma = sigma_for_multiplier(noise_multiplier, sensitivity)
        return cls(name, (GaussianPart("release", sensitivity, sigma, check_positive_int(coordinates,
                                                                                        "coordinates")),),
                   check_neighbours(neighbours))

    # -- properties ---------------------------------------------------------------------
    def part(self, label: str = "release") -> GaussianPart:
        for p in self.parts:
            if p.label == label:
                return p
        raise KeyError(f"mechanism {self.name!r} has no part {label!r} (parts: {[p.label for p in self.parts]})")

    @property
    def sigma(self) -> float:
        """The noise std of a one-part mechanism."""
        if len(self.parts) != 1:
            raise AttributeError(f"mechanism {self.name!r} has {len(self.parts)} parts: use part(label).sigma")
        return self.parts[0].sigma

    @property
    def sensitivity(self) -> float:
        if len(self.parts) != 1:
            raise AttributeError(f"mechanism {self.name!r} has {len(self.parts)} parts: use part(label).sensitivity")
        return self.parts[0].sensitivity

    @property
    def ratio(self) -> float:
        """Gaussian DP's mu of one release: ``sqrt(sum (Delta_i / sigma_i)^2)``."""
        return _combined_ratio(self.parts)

    @property
    def noise_multiplier(self) -> float:
        """``1 / ratio``: what an accountant composes."""
        return 1.0 / self.ratio

    @property
    def coordinates(self) -> int:
        """Noise draws of one release (all parts)."""
        return sum(p.coordinates for p in self.parts)

    # -- the release --------------------------------------------------------------------
    def release(self, x: Any, *, generator: Any = None, part: Optional[str] = None) -> Any:
        """``x`` released through the lattice Gaussian with the part's sigma
        (``part`` may be omitted for a one-part mechanism). ``generator``: a
        :class:`vflsec.kernels.NoiseGenerator` (None: a fresh OS-entropy one)."""
        from ..kernels import add_gaussian_noise

        sigma = self.sigma if part is None else self.part(part).sigma
        return add_gaussian_noise(x, sigma, generator=generator)

    # -- the guarantee ------------------------------------------------------------------
    def accounting(self, count: int = 1) -> Release:
        """What an accountant records for ``count`` releases of this mechanism."""
        return Release(self.noise_multiplier, 1.0, self.coordinates, count)

    def privacy_spent(self, delta: Optional[float] = None, *, count: int = 1, accountant: str = "pld",
                      caveat: Optional[str] = None) -> PrivacySpent:
        """The guarantee of ``count`` releases at ``delta`` (default: the
        calibration's delta): ``epsilon_per_release`` from PLD, ``epsilon``
        composed by ``accountant``."""
        from .accounting import composed_gaussian

        if delta is None:
            if self.target is None:
                raise TypeError(f"mechanism {self.name!r} was not calibrated to a delta: pass delta")
            delta = self.target[1]
        spent = composed_gaussian(self.noise_multiplier, count, delta, accountant=accountant,
                                  coordinates=self.coordinates, neighbours=self.neighbours)
        if caveat is None:
            return spent
        return PrivacySpent(spent.epsilon, spent.delta, spent.releases, spent.epsilon_per_release, spent.accountant,
                            spent.neighbours, caveat)


@dataclass(frozen=True)
class SubsampledGaussianMechanism:
    """DP-SGD's release: per-record contributions clipped to norm ``C``, summed
    over a Poisson sample of rate ``sampling_rate``, plus ``N(0, (zC)^2 I)``
    on ``coordinates`` values (``z = noise_multiplier``), ``steps`` times."""

    name: str
    noise_multiplier: float
    sampling_rate: float
    steps: int
    coordinates: int
    neighbours: str = DEFAULT_NEIGHBOURS
    accountant: str = "pld"
    target: Optional[Tuple[float, float]] = None

    def __post_init__(self) -> None:
        mechanism_info(self.name)
        check_neighbours(self.neighbours)
        check_real(self.noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
        check_real(self.sampling_rate, "sampling_rate", low=0.0, low_inclusive=False, high=1.0)
        check_positive_int(self.steps, "steps")
        check_positive_int(self.coordinates, "coordinates")
        # Refuses a combination an accountant has no bound for (RDP with replace-one subsampling).
        from .accountant import make_accountant

        make_accountant(self.accountant, neighbours=self.neighbours)._check_supported(self.accounting(1))

    @classmethod
    def calibrated(cls, name: str, *, epsilon: float, delta: float, sampling_rate: float, steps: int,
                   coordinates: int, neighbours: str = DEFAULT_NEIGHBOURS,
                   accountant: str = "pld") -> "SubsampledGaussianMechanism":
        """The smallest multiplier whose ``steps`` releases are (``epsilon``,
        ``delta``)-DP under ``neighbours``, as :meth:`privacy_spent` reports it."""
        from .accounting import noise_multiplier_for_epsilon

        z = noise_multiplier_for_epsilon(epsilon, delta, count=steps, sampling_rate=sampling_rate,
                                         accountant=accountant, coordinates=coordinates, neighbours=neighbours,
                                         per_record=True)
        return cls(name, z, float(sampling_rate), int(steps), int(coordinates), neighbours, accountant,
                   (float(epsilon), float(delta)))

    def sigma(self, clip: float) -> float:
        """The release's sigma for contribution bound ``clip``: on its grid, ``sigma / clip >= z``."""
        from .lattice import sigma_for_multiplier

        return sigma_for_multiplier(self.noise_multiplier, clip)

    def release(self, total: Any, *, clip: float, generator: Any = None) -> Any:
        """The lattice release of ``total`` (the clipped contributions' sum)."""
        from ..kernels import add_gaussian_noise

        return add_gaussian_noise(total, self.sigma(clip), generator=generator)

    def accounting(self, count: int = 1) -> Release:
        if self.sampling_rate == 1.0:  # every record takes part: the neighbours' distance is 2C under replace-one
            factor = 2.0 if self.neighbours == "replace_one" else 1.0
            return Release(self.noise_multiplier / factor, 1.0, self.coordinates, count)
        return Release(self.noise_multiplier, self.sampling_rate, self.coordinates, count)

    def privacy_spent(self, steps: Optional[int] = None, delta: Optional[float] = None,
                      caveat: Optional[str] = None) -> PrivacySpent:
        """The guarantee after ``steps`` releases (default: all planned)."""
        from .accounting import composed_subsampled_gaussian

        steps = self.steps if steps is None else steps
        if delta is None:
            if self.target is None:
                raise TypeError(f"mechanism {self.name!r} was not calibrated to a delta: pass delta")
            delta = self.target[1]
        if steps == 0:
            return PrivacySpent(0.0, float(delta), 0, None, self.accountant, self.neighbours, caveat)
        spent = composed_subsampled_gaussian(self.noise_multiplier, self.sampling_rate, steps, delta,
                                             accountant=self.accountant, coordinates=self.coordinates,
                                             neighbours=self.neighbours)
        return PrivacySpent(spent.epsilon, spent.delta, spent.releases, None, spent.accountant, spent.neighbours,
                            caveat)
