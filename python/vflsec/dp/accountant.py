"""Privacy accountants: one interface over dp-accounting's PLD and RDP, with the
neighbour relation explicit.

Modelled on Opacus' ``accountants/accountant.py``: an accountant keeps a
history of what was released (:meth:`PrivacyAccountant.step`), answers
:meth:`~PrivacyAccountant.get_epsilon` for a delta, and round-trips its
history through :meth:`~PrivacyAccountant.state_dict` /
:meth:`~PrivacyAccountant.load_state_dict`, so a checkpointed job resumes with
the releases it made counted. Every epsilon vflsec reports is computed here
(the mechanisms in :mod:`.mechanisms` build the releases; nothing else
composes).

Neighbour relations (``NEIGHBOUR_RELATIONS``):

* ``"replace_one"`` (the VFL default): neighbouring datasets have the same
  rows, one of which has different values. After PSI every party knows which
  rows take part, so "is this person in the data" is public and the secret is
  what their values are.
* ``"add_remove"``: one dataset has one row more (the relation of Opacus and
  most central-DP libraries); opt-in.

What a release's ``noise_multiplier`` is measured against:

* without subsampling (``sampling_rate == 1``): ``sigma / Delta`` with
  ``Delta`` the largest L2 distance between the released vectors of two
  neighbouring datasets *under the accountant's relation*: the mechanism
  states it (e.g. ``2t`` for one row's embedding clipped to norm ``t`` under
  replace-one, ``t`` under add/remove). The relation changes ``Delta``, not
  the Gaussian's privacy curve.
* with Poisson subsampling (``sampling_rate < 1``, DP-SGD): ``sigma / C`` with
  ``C`` the norm bound of one record's contribution to the released sum (a
  ball around 0). Under replace-one a neighbour moves the sum by up to ``2C``
  when the record is sampled; the PLD of dp-accounting's ``REPLACE_ONE``
  relation is exactly that mixture. RDP has no replace-one bound for Poisson
  subsampling: the RDP accountant refuses it (use PLD).

Every epsilon includes the lattice release's corrections
(:func:`vflsec.dp.lattice.implemented_guarantee`): the sampler's per-draw
error over all noise draws and its finite support over all releases.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

from .._arrays import check_positive_int, check_real

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_NEIGHBOURS",
    "NEIGHBOUR_RELATIONS",
    "PLD_MIN_DELTA",
    "PLDAccountant",
    "PrivacyAccountant",
    "PrivacySpent",
    "RDPAccountant",
    "Release",
    "check_neighbours",
    "make_accountant",
]

NEIGHBOUR_RELATIONS = ("replace_one", "add_remove")
DEFAULT_NEIGHBOURS = "replace_one"

PLD_MIN_DELTA = 1e-15
"""Smallest delta the PLD accountant accepts: dp_accounting's privacy loss
distribution truncates its tails at about this mass, so it cannot resolve a
smaller delta. Use the RDP accountant for smaller deltas."""

_PLD_DISCRETIZATION = 1e-4  # dp_accounting's PLDAccountant default


def check_neighbours(neighbours: Any) -> str:
    """``neighbours`` if it names a relation of ``NEIGHBOUR_RELATIONS``."""
    if not isinstance(neighbours, str):
        raise TypeError(f"neighbours must be a string, one of {NEIGHBOUR_RELATIONS}, got {type(neighbours).__name__}")
    if neighbours not in NEIGHBOUR_RELATIONS:
        raise ValueError(f"neighbours must be one of {NEIGHBOUR_RELATIONS}, got {neighbours!r}")
    return neighbours


def _check_delta(delta: Any) -> float:
    return check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)


@dataclass(frozen=True)
class PrivacySpent:
    """A guarantee as vflsec reports it.

    ``epsilon``: the composed value over ``releases`` releases at ``delta``;
    ``None`` when the path has **no** proven guarantee (``caveat`` says why;
    a report prints "no guarantee", never a number). ``epsilon_per_release``:
    what one release costs (the figure papers usually quote; ``None`` where a
    single release has no standalone meaning, as for one DP-SGD step).
    ``neighbours``: the relation the guarantee is stated for. ``caveat``: what
    the guarantee does not cover (or why there is none).
    """

    epsilon: Optional[float]
    delta: float
    releases: int
    epsilon_per_release: Optional[float]
    accountant: str
    neighbours: str = DEFAULT_NEIGHBOURS
    caveat: Optional[str] = None

    @property
    def has_guarantee(self) -> bool:
        return self.epsilon is not None

    def __str__(self) -> str:
        if self.epsilon is None:
            return f"no DP guarantee ({self.caveat})" if self.caveat else "no DP guarantee"
        text = f"epsilon {self.epsilon:.4g} (delta {self.delta:.3g}, {self.neighbours.replace('_', '-')})"
        return f"{text}; not covered: {self.caveat}" if self.caveat else text


@dataclass(frozen=True)
class Release:
    """``count`` releases of a Gaussian mechanism, as an accountant records them.

    ``noise_multiplier``: sigma over the sensitivity (see the module docstring
    for what it is measured against); ``sampling_rate``: Poisson rate (1: every
    record takes part); ``coordinates``: noise draws per release (for the
    sampler's error bound).
    """

    noise_multiplier: float
    sampling_rate: float = 1.0
    coordinates: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_real(self.noise_multiplier, "noise_multiplier", low=0.0,
                                                                low_inclusive=False))
        object.__setattr__(self, "sampling_rate", check_real(self.sampling_rate, "sampling_rate", low=0.0,
                                                             low_inclusive=False, high=1.0))
        object.__setattr__(self, "coordinates", check_positive_int(self.coordinates, "coordinates"))
        object.__setattr__(self, "count", check_positive_int(self.count, "count"))

    def shift_ratio(self, neighbours: str) -> float:
        """Largest shift of one release between neighbours, in units of sigma."""
        if self.sampling_rate < 1.0 and neighbours == "replace_one":
            return 2.0 / self.noise_multiplier
        return 1.0 / self.noise_multiplier

    def as_list(self) -> List[Any]:
        return [self.noise_multiplier, self.sampling_rate, self.coordinates, self.count]


def _dp_accounting():
    try:
        import dp_accounting
    except ImportError as exc:  # pragma: no cover - dependency declared in pyproject
        raise ImportError("privacy accounting needs the 'dp-accounting' package (pip install dp-accounting)") from exc
    return dp_accounting


class PrivacyAccountant:
    """Composes the releases of one party's mechanisms about one individual.

    ``step(release)`` records releases; ``get_epsilon(delta)`` is the composed
    epsilon of everything recorded, lattice corrections included (``inf`` when
    the corrections alone use up half of delta: a noise multiplier far too
    small to mean anything); ``state_dict()`` / ``load_state_dict()`` make the
    history part of a checkpoint. Subclasses name an ``ideal_epsilon`` method
    (the ideal Gaussian mechanisms' epsilon at a delta).
    """

    name: ClassVar[str] = ""

    def __init__(self, *, neighbours: str = DEFAULT_NEIGHBOURS) -> None:
        self.neighbours = check_neighbours(neighbours)
        self.history: List[Release] = []

    # -- recording ----------------------------------------------------------------------
    def step(self, release: Release) -> None:
        """Record ``release.count`` more releases (checked against what this accountant supports)."""
        if not isinstance(release, Release):
            raise TypeError(f"step() takes a vflsec.dp.accountant.Release, got {type(release).__name__}")
        self._check_supported(release)
        last = self.history[-1] if self.history else None
        if last is not None and (last.noise_multiplier, last.sampling_rate, last.coordinates) == (
                release.noise_multiplier, release.sampling_rate, release.coordinates):
            self.history[-1] = Release(last.noise_multiplier, last.sampling_rate, last.coordinates,
                                       last.count + release.count)
        else:
            self.history.append(release)

    def _check_supported(self, release: Release) -> None:
        """ValueError where this accountant has no valid bound for ``release``."""

    def __len__(self) -> int:
        return sum(r.count for r in self.history)

    # -- the guarantee ------------------------------------------------------------------
    def ideal_epsilon(self, delta: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_delta(self, delta: Any) -> float:
        return _check_delta(delta)

    def get_epsilon(self, delta: Any) -> float:
        """Composed epsilon at ``delta`` of every recorded release (0 for none)."""
        from .lattice import implemented_guarantee, support_failure

        delta = self.check_delta(delta)
        if not self.history:
            return 0.0
        draws = sum(r.count * r.coordinates for r in self.history)
        support = sum(r.count * support_failure(r.shift_ratio(self.neighbours)) for r in self.history)
        slack = draws * _per_draw_log_ratio()
        ideal_delta = (delta * math.exp(-slack) - support) * (1.0 - 1e-9)
        if not ideal_delta > 0.5 * delta:
            return math.inf
        eps = float(self.ideal_epsilon(ideal_delta))
        if not math.isfinite(eps):
            return math.inf
        worst_ratio = max(r.shift_ratio(self.neighbours) for r in self.history)
        eps_impl, delta_impl = implemented_guarantee(eps, ideal_delta, draws=draws, ratio=worst_ratio,
                                                     releases=len(self))
        if delta_impl > delta:  # pragma: no cover - excluded by the choice of ideal_delta
            return math.inf
        return eps_impl

    # -- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """JSON-able history: ``{"accountant", "neighbours", "history": [[z, q, coordinates, count], ...]}``."""
        return {"accountant": self.name, "neighbours": self.neighbours,
                "history": [r.as_list() for r in self.history]}

    def load_state_dict(self, state: Any) -> None:
        """Replace the history with a :meth:`state_dict`'s (same accountant and relation)."""
        if not isinstance(state, dict) or set(state) != {"accountant", "neighbours", "history"}:
            raise ValueError("an accountant state must be a dict with keys accountant, neighbours and history")
        if state["accountant"] != self.name:
            raise ValueError(f"the saved state is of accountant {state['accountant']!r}, not {self.name!r}")
        if state["neighbours"] != self.neighbours:
            raise ValueError(f"the saved state is for neighbours {state['neighbours']!r}, this accountant "
                             f"is for {self.neighbours!r}")
        history = state["history"]
        if not isinstance(history, list):
            raise ValueError("an accountant state's history must be a list")
        releases = []
        for i, item in enumerate(history):
            if not isinstance(item, (list, tuple)) or len(item) != 4:
                raise ValueError(f"history[{i}] must be [noise_multiplier, sampling_rate, coordinates, count]")
            release = Release(*item)
            self._check_supported(release)
            releases.append(release)
        self.history = releases

    def __repr__(self) -> str:
        return f"{type(self).__name__}(neighbours={self.neighbours!r}, releases={len(self)})"


def _per_draw_log_ratio() -> float:
    from ..kernels.noise import PER_DRAW_LOG_RATIO

    return PER_DRAW_LOG_RATIO


class PLDAccountant(PrivacyAccountant):
    """Privacy loss distributions (dp-accounting's, pessimistic discretization):
    tight for Gaussian releases, with or without subsampling, under either relation."""

    name = "pld"

    def check_delta(self, delta: Any) -> float:
        delta = _check_delta(delta)
        if delta < PLD_MIN_DELTA:
            raise ValueError(f"delta={delta:g} is below the PLD accountant's floor {PLD_MIN_DELTA:g} (its tail "
                             "truncation cannot resolve it); use accountant='rdp' for smaller deltas")
        return delta

    def ideal_epsilon(self, delta: float) -> float:
        return _pld_epsilon(tuple(self.history), self.neighbours, delta)


def _gaussian_mu(history: Tuple[Release, ...]) -> Optional[float]:
    """Gaussian DP's mu of ``history`` when every release is an unsubsampled Gaussian
    (their (Delta/sigma)^2 add up: the composition is one Gaussian), else None."""
    if any(r.sampling_rate != 1.0 for r in history):
        return None
    return math.sqrt(sum(r.count / r.noise_multiplier ** 2 for r in history))


@functools.lru_cache(maxsize=4096)
def _pld_epsilon(history: Tuple[Release, ...], neighbours: str, delta: float) -> float:
    """Epsilon at ``delta`` of the composed PLD (cached: reading it off a long PMF
    takes tens of milliseconds, and calibration searches and reports ask again).

    Where every release is an unsubsampled Gaussian the composition is one Gaussian
    and its epsilon is read off the exact curve instead: a discretized PLD of a large
    mu (epsilon in the hundreds) needs gigabytes of PMF, and is only a pessimistic
    approximation of that same curve."""
    mu = _gaussian_mu(history)
    if mu is not None:
        from .gaussian import gaussian_epsilon_of_ratio

        return gaussian_epsilon_of_ratio(mu, delta)
    return float(_pld_of(history, neighbours).get_epsilon_for_delta(delta))


@functools.lru_cache(maxsize=256)
def _pld_of(history: Tuple[Release, ...], neighbours: str) -> Any:
    """The composed PLD of ``history`` (cached: calibration searches ask again)."""
    pld = None
    dp = _dp_accounting()
    PLD = dp.pld.privacy_loss_distribution
    rel = dp.NeighboringRelation
    # Gaussians without subsampling compose exactly into one Gaussian: (Delta/sigma)^2 adds
    # up (Gaussian DP's mu^2), so they become one PLD, not one per entry.
    mu_squared = sum(r.count / r.noise_multiplier ** 2 for r in history if r.sampling_rate == 1.0)
    if mu_squared > 0.0:
        pld = PLD.from_gaussian_mechanism(standard_deviation=1.0 / math.sqrt(mu_squared), sensitivity=1.0,
                                          value_discretization_interval=_PLD_DISCRETIZATION)
    relation = rel.REPLACE_ONE if neighbours == "replace_one" else rel.ADD_OR_REMOVE_ONE
    for r in history:
        if r.sampling_rate == 1.0:
            continue
        part = PLD.from_gaussian_mechanism(standard_deviation=r.noise_multiplier, sensitivity=1.0,
                                           sampling_prob=r.sampling_rate, neighboring_relation=relation,
                                           value_discretization_interval=_PLD_DISCRETIZATION)
        if r.count > 1:
            part = part.self_compose(r.count)
        pld = part if pld is None else pld.compose(part)
    return pld


class RDPAccountant(PrivacyAccountant):
    """Renyi DP (dp-accounting's RDP accountant and its conversion to (epsilon, delta)):
    an upper bound, fast for long runs; no replace-one bound for Poisson subsampling."""

    name = "rdp"

    def _check_supported(self, release: Release) -> None:
        if release.sampling_rate < 1.0 and self.neighbours == "replace_one":
            raise ValueError("the RDP accountant has no bound for Poisson subsampling under replace-one neighbours "
                             "(the VFL default); use accountant='pld', or neighbours='add_remove' where rows may "
                             "be added or removed")

    def ideal_epsilon(self, delta: float) -> float:
        dp = _dp_accounting()
        acc = dp.rdp.RdpAccountant()
        for r in self.history:
            gaussian = dp.GaussianDpEvent(r.noise_multiplier)
            event = gaussian if r.sampling_rate == 1.0 else dp.PoissonSampledDpEvent(r.sampling_rate, gaussian)
            acc.compose(event, r.count)
        return float(acc.get_epsilon(delta))


ACCOUNTANTS: Dict[str, Type[PrivacyAccountant]] = {"pld": PLDAccountant, "rdp": RDPAccountant}


def make_accountant(name: Any, *, neighbours: str = DEFAULT_NEIGHBOURS) -> PrivacyAccountant:
    """A fresh accountant of the registered ``name`` ("pld" or "rdp")."""
    if not isinstance(name, str) or name not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {tuple(ACCOUNTANTS)}, got {name!r}")
    return ACCOUNTANTS[name](neighbours=neighbours)
