"""The GLM benchmark's building blocks: data per split, grids of fits, CV.

Every vertical fit here goes through :func:`vflsec.glm.fast.fit_grid`, the
vectorized equivalent of the "plain" / "hdp" party programs (tested equal to
them, same noise stream with a seeded generator), so thousands of
cross-validation fits fit on two cores. The HE protocols and the sklearn
references go through :class:`vflsec.glm.VerticalLogisticRegression`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .grid import DELTA, LAM, MPC_METHODS, HyperParams, cell_seed

__all__ = ["RARE_POSITIVES", "PreparedSplit", "auc", "cv_accuracy", "cv_plain_accuracy", "fit_accuracies",
           "fit_scores", "hdp_jobs", "pr_auc", "prepare_split", "reference_accuracy"]


@dataclass(frozen=True, eq=False)
class PreparedSplit:
    """One train/test split as the parties hold it after preprocessing.

    ``train``/``test``: per-party design blocks (the active party's carries
    the intercept column); ``y_train``: labels in {-1, +1}; ``y_test``:
    labels in {-1, +1}; ``raw_train``/``raw_test``: the split's scaled blocks
    before the estimator's intercept step (for the sklearn references).
    """

    dataset: str
    split_seed: int
    train: List[np.ndarray]
    test: List[np.ndarray]
    y_train: np.ndarray
    y_test: np.ndarray
    raw_train: List[np.ndarray]
    raw_test: List[np.ndarray]
    y_train_raw: np.ndarray
    y_test_raw: np.ndarray

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def n_parties(self) -> int:
        return len(self.train)


def prepare_split(dataset: Any, parties: Any, *, split_seed: int, test_size: float) -> PreparedSplit:
    """Split, scale each party on its own training rows (the default
    ``zscore_clip``), and add the active party's intercept column exactly as
    :class:`VerticalLogisticRegression` does."""
    from ....data import vertical_split
    from ....glm.estimator import design_blocks

    split = vertical_split(dataset, parties, test_size=test_size, seed=split_seed)
    train = design_blocks(split.X_train)
    test = design_blocks(split.X_test)
    signed = lambda y: np.where(np.asarray(y) == 1, 1.0, -1.0)  # noqa: E731
    return PreparedSplit(dataset.name, split_seed, train, test, signed(split.y_train), signed(split.y_test),
                         split.X_train, split.X_test, split.y_train, split.y_test)


def hdp_jobs(n: int, n_parties: int, hp: HyperParams, *, epsilons: Sequence[float], calibration: str,
             noise_seeds: Sequence[Optional[int]], split_seed: int, delta: float = DELTA) -> List[Any]:
    """One "hdp" GLMJob per (epsilon, noise seed) pair, in that order, at ``delta``
    (default the paper's :data:`DELTA`)."""
    from ....glm import GLMJob

    hp = hp.for_rows(n)
    passives = tuple(f"passive{i}" for i in range(1, n_parties))
    return [GLMJob("hdp", n_samples=n, lr=hp.lr, epochs=hp.epochs, batch_size=hp.batch_size, k=hp.k, lam=LAM,
                   seed=split_seed, passives=passives, epsilon=float(eps), delta=float(delta), calibration=calibration,
                   noise_seed=seed)
            for eps, seed in zip(epsilons, noise_seeds)]


def plain_job(n: int, n_parties: int, hp: HyperParams, *, split_seed: int, clip: bool = True) -> Any:
    from ....glm import GLMJob

    hp = hp.for_rows(n)
    passives = tuple(f"passive{i}" for i in range(1, n_parties))
    return GLMJob("plain", n_samples=n, lr=hp.lr, epochs=hp.epochs, batch_size=hp.batch_size,
                  k=hp.k if clip else None, lam=LAM, seed=split_seed, passives=passives)


def _accuracy(theta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Accuracy of each column of ``theta`` (n, G) against labels in {-1, +1}."""
    pred = np.where(theta > 0, 1.0, -1.0)
    return np.mean(pred == y[:, None], axis=0)


def auc(theta: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve of scores ``theta`` for labels in {-1, +1}
    (threshold-free: it shows whether a model ranks the rows even when its
    threshold is off)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y > 0, theta))


# Positives below this share of the test rows make the label "rare": the rows then carry PR-AUC too, whose
# reference (a model that ranks at random) is the positive rate, where ROC AUC's is 0.5 whatever the balance.
RARE_POSITIVES = 0.2


def pr_auc(theta: np.ndarray, y: np.ndarray) -> Optional[float]:
    """Area under the precision-recall curve (average precision) of scores ``theta`` for labels in
    {-1, +1} where positives are rare (under :data:`RARE_POSITIVES` of the rows), else None."""
    from sklearn.metrics import average_precision_score

    positive = np.asarray(y) > 0
    if not 0 < positive.mean() < RARE_POSITIVES:
        return None
    return float(average_precision_score(positive, theta))


def _test_thetas(train: List[np.ndarray], y_train: np.ndarray, test: List[np.ndarray],
                 jobs: Sequence[Any]) -> np.ndarray:
    """``(n_test, G)`` linear predictors on ``test`` of the jobs fitted on ``train``."""
    from ....glm.fast import fit_grid

    fitted = fit_grid(train, y_train, list(jobs))
    return np.asarray(fitted.decision_function(test)).reshape(test[0].shape[0], -1)


def fit_scores(train: List[np.ndarray], y_train: np.ndarray, test: List[np.ndarray], y_test: np.ndarray,
               jobs: Sequence[Any]) -> Tuple[np.ndarray, np.ndarray, List[Optional[float]]]:
    """Test accuracy, AUC and PR-AUC (None unless positives are rare: :func:`pr_auc`) of each job
    (all sharing n, batch size and batch seed)."""
    theta = _test_thetas(train, y_train, test, jobs)
    columns = range(theta.shape[1])
    return (_accuracy(theta, y_test), np.array([auc(theta[:, g], y_test) for g in columns]),
            [pr_auc(theta[:, g], y_test) for g in columns])


def fit_accuracies(train: List[np.ndarray], y_train: np.ndarray, test: List[np.ndarray], y_test: np.ndarray,
                   jobs: Sequence[Any]) -> np.ndarray:
    """Test accuracy of each job (all sharing n, batch size and batch seed); no
    AUC, which the cross-validation loops do not need."""
    return _accuracy(_test_thetas(train, y_train, test, jobs), y_test)


def _schedule_groups(grid: Sequence[HyperParams], n: int) -> Dict[Tuple[int, int], List[int]]:
    """Grid indices grouped by (batch size, epochs): one vectorized fit each."""
    groups: Dict[Tuple[int, int], List[int]] = {}
    for i, hp in enumerate(grid):
        h = hp.for_rows(n)
        groups.setdefault((h.batch_size, h.epochs), []).append(i)
    return groups


def _cross_validate(prep: PreparedSplit, grid: Sequence[HyperParams], width: int, *, folds: int,
                    jobs_for: Callable[[int, int, int], List[Any]]) -> np.ndarray:
    """Mean ``folds``-fold CV accuracy, ``(len(grid), width)``, on ``prep``'s
    training rows (stratified folds seeded by the split). ``jobs_for(i, n,
    fold)`` gives configuration ``i``'s ``width`` jobs for ``n`` training
    rows; configurations sharing a schedule are fitted in one grid."""
    from sklearn.model_selection import StratifiedKFold

    scores = np.zeros((len(grid), width))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=prep.split_seed)
    for fold, (tr, va) in enumerate(splitter.split(np.zeros(prep.n_train), prep.y_train)):
        tr, va = np.sort(tr), np.sort(va)
        train = [X[tr] for X in prep.train]
        valid = [X[va] for X in prep.train]
        for _, members in _schedule_groups(grid, len(tr)).items():
            jobs = [job for i in members for job in jobs_for(i, len(tr), fold)]
            acc = fit_accuracies(train, prep.y_train[tr], valid, prep.y_train[va], jobs)
            scores[members, :] += acc.reshape(len(members), width) / folds
    return scores


def cv_accuracy(prep: PreparedSplit, grid: Sequence[HyperParams], epsilons: Sequence[float], *, folds: int,
                base_seed: Optional[int], tag: str, delta: float = DELTA) -> np.ndarray:
    """Mean ``folds``-fold CV accuracy of HDP-VFL (analytic calibration) on
    ``prep``'s training rows: array ``(len(grid), len(epsilons))``. One noise
    draw per fold and cell, seeded from ``base_seed`` (None: OS entropy);
    ``delta`` defaults to the paper's :data:`DELTA`.

    The per-party scaling statistics were computed on the whole training set
    (the folds share them); the folds' validation rows are scored without
    privacy, so the selection itself is not covered by epsilon."""

    def jobs_for(i: int, n: int, fold: int) -> List[Any]:
        seeds = [cell_seed(base_seed, tag, prep.dataset, prep.split_seed, "cv", fold, i, j)
                 for j in range(len(epsilons))]
        return hdp_jobs(n, prep.n_parties, grid[i], epsilons=epsilons, calibration="analytic", noise_seeds=seeds,
                        split_seed=prep.split_seed, delta=delta)

    return _cross_validate(prep, grid, len(epsilons), folds=folds, jobs_for=jobs_for)


def cv_plain_accuracy(prep: PreparedSplit, grid: Sequence[HyperParams], *, folds: int) -> np.ndarray:
    """Mean ``folds``-fold CV accuracy of plain VFL for each configuration
    of ``grid`` on ``prep``'s training rows (non-private, no noise)."""

    def jobs_for(i: int, n: int, fold: int) -> List[Any]:
        return [plain_job(n, prep.n_parties, grid[i], split_seed=prep.split_seed)]

    return _cross_validate(prep, grid, 1, folds=folds, jobs_for=jobs_for)[:, 0]


def reference_accuracy(method: str, prep: PreparedSplit, hp: HyperParams, *, key_bits: int,
                       traffic: Optional[Dict[str, Any]] = None) -> Tuple[float, Optional[float], Optional[float],
                                                                          List[str]]:
    """Test accuracy, AUC and PR-AUC (None unless positives are rare) of a reference method, and the
    warnings it raised
    (recorded, never silenced: the report labels the row with them).

    ``majority``: the training majority class; ``single_party`` /
    ``centralized_sklearn``: scikit-learn logistic regression (lbfgs, to
    convergence, same lam, unpenalized intercept) on the active party's / all
    parties' scaled features; ``taylor``, ``paillier``, ``ckks``: the HE-VFL
    protocols (and their message flow in the clear) with ``hp``; ``mpc_<protocol>``
    (:data:`.grid.MPC_METHODS`): plain VFL's recursion on secret shares with ``hp``, on the
    engine's in-memory link (SPU, the ``mpc`` extra). ``traffic``: a dict that receives the fit's bytes
    sent (``bytes``: the Channel's, and an MPC fit's engine bytes where its link counts them)."""
    from ....glm import VerticalLogisticRegression

    if method == "majority":
        values, counts = np.unique(prep.y_train, return_counts=True)
        # A constant score ranks at random: ROC AUC 0.5, average precision the positive rate.
        rate = float(np.mean(prep.y_test > 0))
        return (float(np.mean(prep.y_test == values[np.argmax(counts)])), 0.5,
                rate if rate < RARE_POSITIVES else None, [])
    protection = {"centralized_sklearn": "centralized"}.get(method, method)
    options: Dict[str, Any] = {}
    if method in MPC_METHODS:
        from .mpc_cells import engine_protocol

        protection, options = "mpc", {"mpc_protocol": engine_protocol(method)}
    h = hp.for_rows(prep.n_train)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = VerticalLogisticRegression(
            protection=protection, lam=LAM, lr=h.lr, epochs=h.epochs, batch_size=h.batch_size, k=h.k,
            seed=prep.split_seed, key_bits=key_bits, **options,
        ).fit(prep.raw_train, prep.y_train_raw)
        acc = model.score(prep.raw_test, prep.y_test_raw)
        scores = model.decision_function(prep.raw_test)
        area, precision_area = auc(scores, prep.y_test), pr_auc(scores, prep.y_test)
    messages = sorted({str(w.message).splitlines()[0] for w in caught})
    if traffic is not None:
        history = getattr(model, "history_", {}) or {}
        if "total_bytes" in history:
            traffic["bytes"] = int(history["total_bytes"]) + int(history.get("engine_total_bytes", 0))
            traffic["engine_bytes_counted"] = "engine_total_bytes" in history
    return float(acc), area, precision_area, messages
