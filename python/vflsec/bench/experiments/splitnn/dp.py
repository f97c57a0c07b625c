"""The sections ``dp_vfl`` and ``fedpass`` of ``vflsec bench splitnn``: DP-VFL curves and FedPass settings.

* :func:`run_dp_vfl` -- Ranbaduge & Ding's experiment: accuracy (Adult) or
  MSE (Energy, California housing) of the split MLP trained with DP-SGD on
  every data owner's bottom model, for epsilon in {1, 1.5, 2, 5, 10, 50, 100}
  at delta = 1e-3, with 3, 4 and 5 owners holding equal shares of the
  attributes, once per per-sample clip (default: C = 1, fixed before the run;
  the paper's percentile rule, which has no guarantee, on request:
  :mod:`vflsec.bench.dp_sgd_clip`); plus the non-private VFL and the
  centralized references.
* :func:`run_fedpass` -- FedPass test accuracy against the passport range
  ``N`` and variance ``sigma^2`` (the paper's Tables 8 and 9 sweeps), with the
  unprotected model as reference.

Both take already-loaded :class:`vflsec.data.Dataset` objects and a callable
that builds the estimator, and return result rows::

    {"dataset", "defense", "variant", "parties", "epsilon", "epsilon_composed",
     "delta", "seed", "metric" ("accuracy" or "mse"), "value", "privacy_warning"}

(``variant``: a DP-SGD row's clip, ``"clip=1"`` or ``"clip=p80"``;
``privacy_warning``: the PrivacyWarnings its training raised, e.g. a delta
of at least 1/n, else None.)

The paper's training settings (SGD, lr 2e-4, batch 100, 100 epochs) are the
defaults of :func:`dp_vfl_estimator_factory`; they are expensive on a CPU
(Adult: 26,000 steps, each with per-sample gradients for every owner), so
pass smaller ``epochs`` for a quick run.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...._arrays import check_positive_int, check_real
from ....vfl.runner import PartyError
from ...dp_sgd_clip import DEFAULT_CLIP_NORM, check_clip, clip_kwargs, clip_variant
from .papers import DP_VFL, FEDPASS

__all__ = [
    "DP_VFL_EPSILONS",
    "DP_VFL_OWNERS",
    "FEDPASS_SETTINGS",
    "dp_vfl_estimator_factory",
    "fedpass_estimator_factory",
    "prepare_split",
    "run_dp_vfl",
    "run_fedpass",
    "split_attributes_equally",
]

# The papers' settings (papers/dp_vfl.toml, papers/fedpass.toml).
DP_VFL_EPSILONS: Tuple[float, ...] = DP_VFL.epsilons
DP_VFL_OWNERS: Tuple[int, ...] = DP_VFL.owners
DP_VFL_DELTA = DP_VFL.delta
# Table 8 sweep (sigma^2 = 1, N varies) and Table 9 sweep (N = 100, sigma^2 varies).
FEDPASS_SETTINGS: Tuple[Tuple[float, float], ...] = FEDPASS.settings

EstimatorFactory = Callable[..., Any]


def split_attributes_equally(dataset: Any, owners: int) -> List[np.ndarray]:
    """Column indices of ``owners`` blocks of (near-)equal numbers of
    attributes, in column order; a one-hot attribute stays in one block."""
    owners = check_positive_int(owners, "owners")
    attributes = [cols for _, cols in dataset.attributes]
    if owners > len(attributes):
        raise ValueError(f"cannot split {len(attributes)} attributes among {owners} owners")
    blocks = np.array_split(np.arange(len(attributes)), owners)
    return [np.asarray([c for a in block for c in attributes[a]], dtype=np.int64) for block in blocks]


def prepare_split(dataset: Any, *, test_fraction: float = 0.2, seed: int = 0) -> Dict[str, Any]:
    """Shuffled train/test rows (the paper holds out 20 %), features
    standardized with training statistics (each column is one party's own
    statistic, so no party learns another's); regression targets
    standardized for training, kept in original units for the MSE."""
    test_fraction = check_real(test_fraction, "test_fraction", low=0.0, low_inclusive=False, high=1.0,
                               high_inclusive=False)
    X = np.asarray(dataset.X, dtype=np.float64)
    y = np.asarray(dataset.y)
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    n_test = max(1, int(round(test_fraction * n)))
    test, train = order[:n_test], order[n_test:]
    mean, std = X[train].mean(axis=0), X[train].std(axis=0)
    std[std == 0] = 1.0
    Xs = ((X - mean) / std).astype(np.float32)
    out = {"X_train": Xs[train], "X_test": Xs[test], "y_train": y[train], "y_test": y[test],
           "regression": dataset.task == "regression", "y_mean": 0.0, "y_std": 1.0}
    if out["regression"]:
        y_mean, y_std = float(y[train].mean()), float(y[train].std()) or 1.0
        out.update(y_mean=y_mean, y_std=y_std, y_train=((y[train] - y_mean) / y_std).astype(np.float32))
    return out


def dp_vfl_estimator_factory(*, epochs: int = 100, batch_size: int = 100, lr: float = 2e-4,
                             optimizer: str = "sgd", device: Optional[str] = "cpu") -> EstimatorFactory:
    """``make(task, owners, defense, seed, centralized=False)`` building the
    DP-VFL paper's split MLP in a :class:`~vflsec.splitnn.SplitNNClassifier`
    or :class:`~vflsec.splitnn.SplitNNRegressor` (defaults: the paper's SGD,
    lr 2e-4, batch 100, 100 epochs). ``centralized=True``: one party holding
    every feature with the unsplit MLP ``p -> 48 -> 96 -> 196 -> out`` cut
    after its second hidden layer (an identity split: the same function and
    gradients as centralized training)."""
    from ....splitnn import SplitNNClassifier, SplitNNRegressor
    from ....splitnn.defenses.dp_sgd import dp_vfl_centralized_model, dp_vfl_models

    def bottom(p: int):
        return dp_vfl_models([p], 1)[0][0]

    def head(width: int, n_out: int):
        owners, rest = divmod(width, 32)
        if rest:
            raise ValueError(f"DP-VFL head expects 32 values per owner, got {width}")
        return dp_vfl_models([1] * owners, n_out)[1]

    def central_bottom(p: int):
        return dp_vfl_centralized_model(p, 1)[:4]  # p -> 48 -> 96 (ReLU after each)

    def central_head(width: int, n_out: int):
        full = dp_vfl_centralized_model(1, n_out)
        return full[4:]  # 96 -> 196 -> out

    def make(task: str, owners: int, defense: Any, seed: int, centralized: bool = False):
        cls = SplitNNRegressor if task == "regression" else SplitNNClassifier
        return cls(bottoms=central_bottom if centralized else bottom, head=central_head if centralized else head,
                   defense=defense, epochs=epochs, batch_size=batch_size, lr=lr, optimizer=optimizer,
                   seed=seed, device=device)

    return make


def fedpass_estimator_factory(*, bottom: Any = None, head: Any = None, epochs: int = 20, batch_size: int = 64,
                              lr: float = 1e-2, optimizer: str = "sgd",
                              device: Optional[str] = "cpu") -> EstimatorFactory:
    """``make(task, parties, defense, seed)`` with FedPass's Table 6 training
    settings (SGD, lr 1e-2, batch 64); ``bottom``/``head`` as the estimators
    take them (None: their defaults)."""
    from ....splitnn import SplitNNClassifier, SplitNNRegressor

    def make(task: str, parties: int, defense: Any, seed: int, centralized: bool = False):
        cls = SplitNNRegressor if task == "regression" else SplitNNClassifier
        return cls(bottoms=bottom, head=head, defense=defense, epochs=epochs, batch_size=batch_size, lr=lr,
                   optimizer=optimizer, seed=seed, device=device)

    return make


def _metric(estimator: Any, parts: List[np.ndarray], split: Dict[str, Any]) -> Tuple[str, float]:
    if split["regression"]:
        pred = estimator.predict(parts) * split["y_std"] + split["y_mean"]
        return "mse", float(np.mean((pred - np.asarray(split["y_test"], dtype=np.float64)) ** 2))
    return "accuracy", float(np.mean(estimator.predict(parts) == split["y_test"]))


def _composed(estimator: Any) -> Optional[float]:
    spent = [s for s in getattr(estimator, "privacy_spent_", {}).values() if s is not None]
    if not spent or any(s.epsilon is None for s in spent):
        return None  # no DP, or no guarantee (e.g. the percentile clip): the report labels which
    return max(s.epsilon for s in spent)


#: the message the receiver of a non-finite array raises (vflsec.vfl.received): a diverged training
NON_FINITE = "non-finite"
#: a regression cell whose test MSE exceeds this multiple of the test targets' variance (the mean
#: predictor's MSE) diverged: far beyond any model that learned something
DIVERGED_MSE_FACTOR = 100.0


def _divergence(value: float, metric: str, split: Dict[str, Any]) -> Optional[str]:
    """Why a finished cell counts as diverged (None: it did not)."""
    if not math.isfinite(value):
        return f"the test {metric} is not finite"
    if metric == "mse":
        baseline = float(np.var(np.asarray(split["y_test"], dtype=np.float64)))
        if value > DIVERGED_MSE_FACTOR * baseline:
            return (f"test MSE {value:.3g}, over {DIVERGED_MSE_FACTOR:g}x the mean predictor's "
                    f"{baseline:.3g}")
    return None


def _row(dataset: str, defense: str, variant: Optional[str], parties: int, epsilon: Optional[float],
         composed: Optional[float], delta: Optional[float], seed: int, metric: str, value: float,
         privacy_warning: Optional[str] = None) -> Dict[str, Any]:
    return {"dataset": dataset, "defense": defense, "variant": variant, "parties": parties, "epsilon": epsilon,
            "epsilon_composed": composed, "delta": delta, "seed": seed, "metric": metric, "value": value,
            "privacy_warning": privacy_warning}


def _check_datasets(datasets: Any) -> Dict[str, Any]:
    if isinstance(datasets, Mapping):
        items = dict(datasets)
    else:
        items = {d.name: d for d in datasets}
    if not items:
        raise ValueError("datasets must name at least one dataset")
    for name, d in items.items():
        if not (hasattr(d, "X") and hasattr(d, "y") and hasattr(d, "attributes")):
            raise TypeError(f"datasets[{name!r}] must be a vflsec.data.Dataset")
    return items


def _quiet_accountant() -> None:
    # dp-accounting logs a warning for every fractional RDP order it drops at small sigma.
    logging.getLogger("absl").setLevel(logging.ERROR)


def run_dp_vfl(datasets: Any, make_estimator: Optional[EstimatorFactory] = None, *,
               epsilons: Sequence[float] = DP_VFL_EPSILONS, owners: Sequence[int] = DP_VFL_OWNERS,
               delta: float = DP_VFL_DELTA, clips: Sequence[Union[float, str]] = (DEFAULT_CLIP_NORM,),
               seeds: Iterable[int] = (0,), references: bool = True,
               dp_kwargs: Optional[Dict[str, Any]] = None, test_fraction: float = 0.2,
               progress: Optional[Callable[[Dict[str, Any]], None]] = None,
               noise_seed: Optional[int] = None) -> List[Dict[str, Any]]:
    """DP-VFL curves: one row per (dataset, owners, epsilon, clip, seed), plus
    the non-private VFL (``defense="none"``, ``variant="vfl"``) per owner count
    and the centralized model (``defense="centralized"``, ``parties=1``).

    ``datasets``: a mapping name -> Dataset or a sequence of Datasets.
    ``make_estimator(task, owners, defense, seed, centralized=False)``:
    default :func:`dp_vfl_estimator_factory` (the paper's settings).
    ``clips``: DP-SGD's per-sample clip, every epsilon cell once per entry
    (:func:`vflsec.bench.dp_sgd_clip.check_clip`): a clip norm ``C > 0``
    fixed before the run (default 1.0: each row's epsilon is a guarantee)
    or ``"pNN"``, the paper's percentile rule (``variant="clip=pNN"``: no
    guarantee). ``dp_kwargs``: other
    :class:`~vflsec.splitnn.defenses.dp_sgd.DPSGD` arguments (e.g.
    ``calibration_steps``, ``seed``; the clip is ``clips``'s).
    ``noise_seed``: the benchmark's ``--seed``; each DP-SGD cell's noise then
    comes from a generator seeded from it and the cell (an experiment setting;
    default None: OS entropy). A ``seed`` in ``dp_kwargs`` wins.
    """
    from ....splitnn.defenses.dp_sgd import DPSGD
    from ...common import derived_seed, privacy_warnings, warning_text

    _quiet_accountant()
    datasets = _check_datasets(datasets)
    make = make_estimator if make_estimator is not None else dp_vfl_estimator_factory()
    epsilons = [check_real(e, "epsilons[]", low=0.0, low_inclusive=False) for e in epsilons]
    owners = [check_positive_int(m, "owners[]") for m in owners]
    seeds = [check_positive_int(s, "seeds[]", minimum=0) for s in seeds]
    if isinstance(clips, (str, bytes)) or not clips:
        raise ValueError(f"clips must be a non-empty sequence of clip entries, got {clips!r}")
    clip_settings = [clip_kwargs(check_clip(c, f"clips[{i}]")) for i, c in enumerate(clips)]
    dp_kwargs = dict(dp_kwargs or {})
    given = sorted({"clip_norm", "clip_percentile"} & set(dp_kwargs))
    if given:
        raise ValueError(f"dp_kwargs must not set {', '.join(given)}: the clip is given by clips")
    rows: List[Dict[str, Any]] = []

    def emit(row: Dict[str, Any]) -> None:
        rows.append(row)
        if progress is not None:
            progress(row)

    for name, dataset in datasets.items():
        task = "regression" if dataset.task == "regression" else "classification"
        for seed in seeds:
            split = prepare_split(dataset, test_fraction=test_fraction, seed=seed)
            if references:
                est = make(task, 1, None, seed, centralized=True)
                est.fit([split["X_train"]], split["y_train"])
                metric, value = _metric(est, [split["X_test"]], split)
                emit(_row(name, "centralized", None, 1, None, None, None, seed, metric, value))
            for m in owners:
                blocks = split_attributes_equally(dataset, m)
                train = [np.ascontiguousarray(split["X_train"][:, b]) for b in blocks]
                test = [np.ascontiguousarray(split["X_test"][:, b]) for b in blocks]
                if references:
                    est = make(task, m, None, seed).fit(train, split["y_train"])
                    metric, value = _metric(est, test, split)
                    emit(_row(name, "none", "vfl", m, None, None, None, seed, metric, value))
                for eps in epsilons:
                    for clip in clip_settings:
                        cell_kwargs = dict(dp_kwargs, **clip)
                        if noise_seed is not None:
                            # One noise stream per cell, shared by its clip entries: they differ only in the clip.
                            cell_kwargs.setdefault("seed", derived_seed(noise_seed, "dp_vfl", name, m, eps, seed))
                        defense = DPSGD(epsilon=eps, delta=delta, **cell_kwargs)
                        diverged: Optional[str] = None
                        metric, value = ("mse" if split["regression"] else "accuracy"), math.nan
                        with privacy_warnings() as warned:  # e.g. delta >= 1/n: the row is labelled
                            try:
                                est = make(task, m, defense, seed).fit(train, split["y_train"])
                            except PartyError as exc:
                                if NON_FINITE not in str(exc):
                                    raise
                                diverged = f"training stopped on non-finite values ({str(exc).splitlines()[0]})"
                        composed = None  # a training stopped midway reports none (its rows say why)
                        if diverged is None:
                            metric, value = _metric(est, test, split)
                            diverged = _divergence(value, metric, split)
                            composed = _composed(est)
                        row = _row(name, "dp_sgd", clip_variant(defense.clip_norm, defense.clip_percentile), m,
                                   eps, composed, delta, seed, metric, value, warning_text(warned))
                        if diverged is not None:  # a result, not a crash: kept out of the means and plots
                            row.update(diverged=diverged, value=math.nan, value_measured=value)
                        emit(row)
    return rows


def run_fedpass(datasets: Any, make_estimator: Optional[EstimatorFactory] = None, *,
                settings: Sequence[Tuple[float, float]] = FEDPASS_SETTINGS, parties: Sequence[int] = (2,),
                where: Sequence[str] = ("passive", "active"), seeds: Iterable[int] = (0,),
                references: bool = True, test_fraction: float = 0.2,
                partition: Optional[Callable[[Any, int], List[np.ndarray]]] = None,
                progress: Optional[Callable[[Dict[str, Any]], None]] = None) -> List[Dict[str, Any]]:
    """FedPass accuracy (or MSE) against passport settings ``(N, sigma^2)``:
    one row per (dataset, parties, setting, seed), ``variant = "N=..,sigma2=.."``,
    plus the unprotected model (``defense="none"``) per party count.

    ``partition(dataset, parties)`` gives each party's column indices
    (default: equal shares of the attributes; pass one that cuts images into
    vertical halves for MNIST). ``make_estimator(task, parties, defense,
    seed)``: default :func:`fedpass_estimator_factory`.
    """
    from ....splitnn.defenses.fedpass import FedPass

    datasets = _check_datasets(datasets)
    make = make_estimator if make_estimator is not None else fedpass_estimator_factory()
    partition = partition if partition is not None else split_attributes_equally
    settings = [(check_real(n, "N", low=0.0, low_inclusive=False),
                 check_real(s, "sigma2", low=0.0, low_inclusive=False)) for n, s in settings]
    parties = [check_positive_int(p, "parties[]") for p in parties]
    seeds = [check_positive_int(s, "seeds[]", minimum=0) for s in seeds]
    rows: List[Dict[str, Any]] = []

    def emit(row: Dict[str, Any]) -> None:
        rows.append(row)
        if progress is not None:
            progress(row)

    for name, dataset in datasets.items():
        task = "regression" if dataset.task == "regression" else "classification"
        for seed in seeds:
            split = prepare_split(dataset, test_fraction=test_fraction, seed=seed)
            for k in parties:
                blocks = partition(dataset, k)
                train = [np.ascontiguousarray(split["X_train"][:, b]) for b in blocks]
                test = [np.ascontiguousarray(split["X_test"][:, b]) for b in blocks]
                if references:
                    est = make(task, k, None, seed).fit(train, split["y_train"])
                    metric, value = _metric(est, test, split)
                    emit(_row(name, "none", None, k, None, None, None, seed, metric, value))
                for n_range, sigma2 in settings:
                    defense = FedPass(n_range=n_range, sigma2=sigma2, where=tuple(where))
                    est = make(task, k, defense, seed).fit(train, split["y_train"])
                    metric, value = _metric(est, test, split)
                    emit(_row(name, "fedpass", defense.variant, k, None, None, None, seed, metric, value))
    return rows

