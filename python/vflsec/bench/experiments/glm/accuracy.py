"""The accuracy side of ``vflsec bench glm``: a loop over the experiment.

Produces one row per (dataset, family, method, calibration, epsilon, split
seed, noise draw) with the test accuracy and the configuration used. The
phases: (1) cross-validation of HDP-VFL over the wide grid on every split's
training rows; (2) the headline configuration of each dataset, selected on
the other datasets' CV scores; (3) test accuracy of the references, the
headline, the tuned configurations, private selection and Figure 2; (4) the DP
spectrum (:mod:`.spectrum`). The HE accuracy cells (Paillier, CKKS) are those
the grid's ``he_accuracy`` names, the MPC ones (:mod:`.mpc_cells`) those of ``mpc_accuracy``.
"""
from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from ...._progress import progress
from .cpu import CPUClock
from .fits import (
    PreparedSplit,
    cv_accuracy,
    cv_plain_accuracy,
    fit_accuracies,
    fit_scores,
    hdp_jobs,
    plain_job,
    prepare_split,
    reference_accuracy,
)
from .grid import DELTA, MPC_METHODS, PAPER, GLMBenchConfig, HyperParams, cell_seed

__all__ = ["REFERENCE_METHODS", "run_accuracy", "search_epsilon", "select_headline"]

# Reference rows on every table: majority class, the active party alone, centralized scikit-learn and
# centralized mini-batch GD (same schedule, no clip), plain VFL, the HE-VFL flow (taylor in the clear,
# Paillier and CKKS encrypted) and plain VFL's recursion on secret shares (MPC).
REFERENCE_METHODS = ("majority", "single_party", "centralized_sklearn", "centralized_gd", "plain",
                     "plain_headline", "taylor", "paillier", "ckks") + MPC_METHODS


def _load(name: str, data_dir: Optional[Path], max_rows: Optional[int]) -> Any:
    from ....data import load_dataset

    ds = load_dataset(name, data_dir=data_dir)
    if max_rows is not None and ds.X.shape[0] > max_rows:
        idx = np.random.default_rng(0).permutation(ds.X.shape[0])[:max_rows]
        ds = dataclasses.replace(ds, X=ds.X[idx], y=ds.y[idx])
    return ds


def _parties(name: str, ds: Any) -> Any:
    from ....data import PAPER_SPLITS

    if name in PAPER_SPLITS:
        return PAPER_SPLITS[name]
    half = len(ds.attribute_names) // 2
    return [half, len(ds.attribute_names) - half]


def select_headline(cv: Dict[str, np.ndarray], dataset: str, grid: Sequence[HyperParams]) -> Tuple[int, List[str]]:
    """Index of the headline configuration of ``dataset``: the best mean CV
    accuracy over the budgets on the *other* datasets in ``cv`` (name ->
    (grid, eps) scores of split 0), never on ``dataset`` itself."""
    pool = [name for name in cv if name != dataset]
    if not pool:
        raise ValueError(f"no other dataset to select {dataset!r}'s headline configuration on")
    score = np.mean([cv[name].mean(axis=1) for name in pool], axis=0)
    return int(np.argmax(score)), pool


def search_epsilon(epsilon: float, runs: int) -> float:
    """Epsilon (at delta = :data:`DELTA`) of ``runs`` Gaussian mechanisms
    each calibrated (analytic) to ``(epsilon, DELTA)``, composed by the DP
    layer's accountant: what the cross-validation search costs a record that
    appears in every run's training rows. The validation scoring is not
    counted (it is not private), so this is a lower bound of the search's
    true cost."""
    from ....dp import GaussianMechanism

    # An HDP run's mechanism calibrated to (epsilon, DELTA); its multiplier does not depend on the
    # sensitivity (1 here), and privacy_spent composes `runs` releases of it (exactly: they are
    # unsubsampled Gaussians, one Gaussian together).
    mechanism = GaussianMechanism.calibrated("hdp_passive_ir", epsilon=epsilon, delta=DELTA, sensitivity=1.0,
                                             method="analytic")
    epsilon_spent = mechanism.privacy_spent(count=runs).epsilon
    assert epsilon_spent is not None  # a Gaussian mechanism always has a guarantee
    return float(epsilon_spent)


class _Rows:
    """Collects result rows with the fields every row has."""

    def __init__(self, seeded: bool):
        self.rows: List[Dict[str, Any]] = []
        self.seeded = seeded

    def add(self, prep: PreparedSplit, family: str, method: str, accuracy: Optional[float], *,
            hp: Optional[HyperParams],
            epsilon: Optional[float] = None, calibration: Optional[str] = None, draw: Optional[int] = None,
            **extra: Any) -> None:
        dp = method.startswith("hdp")
        self.rows.append({
            "dataset": prep.dataset, "family": family, "method": method, "calibration": calibration,
            "epsilon": epsilon, "delta": DELTA if dp else None,
            # Classic calibration is run only where it is valid (epsilon < 1). DP rows always carry an epsilon.
            "valid_dp": (calibration == "analytic" or (calibration == "classic" and cast(float, epsilon) < 1.0))
            if dp else None,
            "split_seed": prep.split_seed, "noise_draw": draw,
            "noise": ("seeded (experiment setting)" if self.seeded else "OS-entropy CSPRNG") if dp else None,
            "accuracy": None if accuracy is None else float(accuracy),
            "config": None if hp is None else hp.for_rows(prep.n_train).as_dict(),
            **extra,
        })


def _hdp_rows(rows: _Rows, prep: PreparedSplit, family: str, hp: HyperParams, epsilons: Sequence[float],
              config: GLMBenchConfig, calibration: str, extra_by_eps: Optional[Dict[float, Dict]] = None) -> None:
    eps_list = [e for e in epsilons for _ in range(config.noise_draws)]
    draws = [d for _ in epsilons for d in range(config.noise_draws)]
    seeds = [cell_seed(config.seed, family, prep.dataset, prep.split_seed, calibration, e, d)
             for e, d in zip(eps_list, draws)]
    jobs = hdp_jobs(prep.n_train, prep.n_parties, hp, epsilons=eps_list, calibration=calibration,
                    noise_seeds=seeds, split_seed=prep.split_seed)
    acc, area, precision_area = fit_scores(prep.train, prep.y_train, prep.test, prep.y_test, jobs)
    for a, u, pr, e, d in zip(acc, area, precision_area, eps_list, draws):
        rows.add(prep, family, "hdp", a, hp=hp, epsilon=e, calibration=calibration, draw=d, auc=float(u),
                 pr_auc=pr, **(extra_by_eps or {}).get(e, {}))


def run_accuracy(config: GLMBenchConfig, *, data_dir: Optional[Path] = None, state: Optional[Dict[str, Any]] = None,
                 log: Callable[[str], None] = print) -> Dict[str, Any]:
    """All accuracy rows of ``config``, the CV scores and the selections.
    ``state["accuracy"]`` (if given) holds the same, growing cell by cell, so
    an interrupted run can still write what it finished."""
    rows = _Rows(seeded=config.seed is not None)
    wide = config.wide_grid
    headline: Dict[str, Dict[str, Any]] = {}
    cv: Dict[str, List[np.ndarray]] = {}
    result = {"rows": rows.rows, "headline": headline, "cv": {}, "grid": [h.as_dict() for h in wide]}
    if state is not None:
        state["accuracy"] = result
    preps: Dict[str, List[PreparedSplit]] = {}
    for name in config.datasets:
        ds = _load(name, data_dir, config.max_rows)
        preps[name] = [prepare_split(ds, _parties(name, ds), split_seed=s, test_size=config.test_size)
                       for s in range(config.split_seeds)]
        log(f"[glm] {name}: {ds.X.shape[0]} rows, {[X.shape[1] for X in preps[name][0].train]} columns per party "
            f"(active incl. intercept), {preps[name][0].n_train} training rows")

    # Phase 1: cross-validation over the wide grid on every split's training rows.
    todo = [(name, prep) for name in config.datasets for prep in preps[name]]
    pool_cv: Dict[str, np.ndarray] = {}
    if len(config.datasets) == 1:  # select the headline on built-in synthetic data instead
        from ....data import make_synthetic

        synth = make_synthetic(n_samples=2000, features_per_party=(10, 10), seed=1)
        todo.append(("synthetic", prepare_split(synth, [10, 10], split_seed=0, test_size=config.test_size)))
    start = time.perf_counter()
    # Work per split grows with its training rows: the estimate is weighted by them.
    rows_total, rows_done = sum(p.n_train for _, p in todo), 0
    for name, prep in progress(todo, desc="cross-validation (wide grid x budgets)", unit="split"):
        scores = cv_accuracy(prep, wide, config.epsilons, folds=config.cv_folds, base_seed=config.seed,
                             tag="tune")
        if name in preps:
            cv.setdefault(name, []).append(scores)
        if prep.split_seed == 0:
            pool_cv[name] = scores
        elapsed = time.perf_counter() - start
        rows_done += prep.n_train
        log(f"[glm] CV {name} split {prep.split_seed}: {len(wide) * len(config.epsilons) * config.cv_folds} "
            f"fits, {elapsed:.0f} s so far, about {elapsed / rows_done * (rows_total - rows_done):.0f} s to go")

    result["cv"] = {name: [s.tolist() for s in scores] for name, scores in cv.items()}
    # Phase 2: the headline configuration of each dataset, selected on the others.
    for name in config.datasets:
        index, pool = select_headline(pool_cv, name, wide)
        headline[name] = {"config": wide[index].as_dict(), "label": wide[index].label(), "selected_on": pool}
        log(f"[glm] headline for {name}: {wide[index].label()} (selected on {', '.join(pool)})")

    # Phase 3: test accuracy.
    for name in config.datasets:
        hp = HyperParams(**headline[name]["config"])
        paper_idx = [wide.index(h) for h in config.paper_grid]
        cells = list(preps[name])
        for prep in progress(cells, desc=f"accuracy {name}", unit="split"):
            _reference_rows(rows, prep, hp, config, log)
            _hdp_rows(rows, prep, "headline", hp, config.epsilons, config, "analytic")
            if config.classic_epsilons:
                _hdp_rows(rows, prep, "headline", hp, config.classic_epsilons, config, "classic")
            scores = cv[name][prep.split_seed]
            for family, members in (("tuned_paper_grid", paper_idx), ("tuned_wide_grid", list(range(len(wide))))):
                for j, eps in enumerate(config.epsilons):
                    best = members[int(np.argmax(scores[members, j]))]
                    runs = len(members) * (config.cv_folds - 1) + 1
                    extra = {eps: {"cv_accuracy": float(scores[best, j]), "search_runs": runs,
                                   "search_epsilon": search_epsilon(eps, runs)}}
                    _hdp_rows(rows, prep, family, wide[best], [eps], config, "analytic", extra)
            _private_selection_rows(rows, prep, config)
        if config.figure2 and name == "breast":
            _figure2_rows(rows, preps[name], config)
    # Phase 4: the DP spectrum (central-DP ceiling, HDP-VFL, HE+DP and MPC+DP at the same budgets).
    from .spectrum import run_spectrum

    run_spectrum(config, preps, rows.rows, result, log)
    return result


def _reference_rows(rows: _Rows, prep: PreparedSplit, headline: HyperParams, config: GLMBenchConfig,
                    log: Callable[[str], None]) -> None:
    """References of one split. The non-private VFL references (plain,
    centralized GD, HE-VFL) use the configuration CV selects for plain VFL on
    this split's training rows (tuning them costs no privacy); plain VFL at
    the DP headline configuration is reported too ("plain_headline")."""
    plain_grid = config.plain_grid
    scores = cv_plain_accuracy(prep, plain_grid, folds=config.cv_folds)
    hp = plain_grid[int(np.argmax(scores))]
    for method in ("majority", "single_party", "centralized_sklearn"):
        acc, area, pr, warned = reference_accuracy(method, prep, hp, key_bits=config.he_key_bits)
        rows.add(prep, "reference", method, acc, hp=None if method == "majority" else hp, warnings=warned, auc=area,
                 pr_auc=pr)
    jobs = [plain_job(prep.n_train, prep.n_parties, hp, split_seed=prep.split_seed, clip=False),
            plain_job(prep.n_train, prep.n_parties, hp, split_seed=prep.split_seed)]
    (gd, plain), (gd_auc, plain_auc), (gd_pr, plain_pr) = fit_scores(prep.train, prep.y_train, prep.test,
                                                                      prep.y_test, jobs)
    rows.add(prep, "reference", "centralized_gd", gd, hp=dataclasses.replace(hp, k=math.inf), auc=float(gd_auc),
             pr_auc=gd_pr)
    rows.add(prep, "reference", "plain", plain, hp=hp, cv_accuracy=float(scores.max()), auc=float(plain_auc),
             pr_auc=plain_pr)
    same, same_auc, same_pr = fit_scores(prep.train, prep.y_train, prep.test, prep.y_test,
                                         [plain_job(prep.n_train, prep.n_parties, headline,
                                                    split_seed=prep.split_seed)])
    rows.add(prep, "reference", "plain_headline", same[0], hp=headline, auc=float(same_auc[0]), pr_auc=same_pr[0])
    if prep.split_seed < config.he_split_seeds:
        _mpc_rows(rows, prep, hp, config, log)
    # HE-VFL refuses a batch no larger than a passive block (the passive party's
    # gradient would reveal the residuals): its rows then use the best plain
    # configuration (same CV scores) whose batch is larger.
    widest = max((block.shape[1] for block in prep.raw_train[1:]), default=0)
    admissible = [i for i, h in enumerate(plain_grid) if h.for_rows(prep.n_train).batch_size > widest]
    if not admissible:
        log(f"[glm] HE-VFL rows on {prep.dataset} skipped: no batch size in the grid exceeds the widest "
            f"passive block ({widest} columns)")
        return
    if hp.for_rows(prep.n_train).batch_size <= widest:
        hp = plain_grid[max(admissible, key=lambda i: (scores[i], -i))]
        log(f"[glm] HE-VFL rows on {prep.dataset} split {prep.split_seed} use {hp.label()}: plain's batch is "
            f"not larger than the widest passive block ({widest} columns)")
    acc, area, pr, warned = reference_accuracy("taylor", prep, hp, key_bits=config.he_key_bits)
    rows.add(prep, "reference", "taylor", acc, hp=hp, warnings=warned, auc=area, pr_auc=pr)
    if prep.split_seed >= config.he_split_seeds:
        return
    for method in config.he_accuracy_methods(prep.dataset):
        log(f"[glm] {method} on {prep.dataset} split {prep.split_seed} ({hp.label()})")
        traffic: Dict[str, Any] = {}
        start = time.perf_counter()
        with CPUClock() as cpu:  # beside the MPC cells': equal protection, its cost per dataset
            acc, area, pr, warned = reference_accuracy(method, prep, hp, key_bits=config.he_key_bits,
                                                       traffic=traffic)
        rows.add(prep, "reference", method, acc, hp=hp, warnings=warned, key_bits=config.he_key_bits, auc=area,
                 pr_auc=pr, seconds=time.perf_counter() - start, cpu_seconds=cpu.seconds, **traffic)


def _mpc_rows(rows: _Rows, prep: PreparedSplit, hp: HyperParams, config: GLMBenchConfig,
              log: Callable[[str], None]) -> None:
    """The MPC accuracy cells ``mpc_accuracy`` names for this dataset, at plain VFL's configuration
    ``hp`` (they compute its recursion on secret shares, so plain is their like-for-like reference);
    without the ``mpc`` extra each is a row labelled not run."""
    from .mpc_cells import NOT_INSTALLED, counted_engine_links, spu_installed

    for method in config.mpc_accuracy_methods(prep.dataset):
        if not spu_installed():
            log(f"[glm] {method} on {prep.dataset}: {NOT_INSTALLED}")
            rows.add(prep, "reference", method, None, hp=hp, not_run=NOT_INSTALLED)
            continue
        log(f"[glm] {method} on {prep.dataset} split {prep.split_seed} ({hp.label()})")
        traffic: Dict[str, Any] = {}
        start = time.perf_counter()
        # on loopback TCP through a relay that counts the engine's bytes, as the runtime cells
        with counted_engine_links(), CPUClock() as cpu:
            acc, area, pr, warned = reference_accuracy(method, prep, hp, key_bits=config.he_key_bits,
                                                       traffic=traffic)
        rows.add(prep, "reference", method, acc, hp=hp, warnings=warned, auc=area, pr_auc=pr,
                 seconds=time.perf_counter() - start, cpu_seconds=cpu.seconds, **traffic)


def _private_selection_rows(rows: _Rows, prep: PreparedSplit, config: GLMBenchConfig) -> None:
    """Papernot-Steinke random stopping over the wide grid, whose accounted
    total is the row's epsilon (see :mod:`.selection`)."""
    from .selection import private_selection_cell

    wide = config.wide_grid
    for eps in config.epsilons:
        for draw in range(config.noise_draws):
            seed = cell_seed(config.seed, "private_selection", prep.dataset, prep.split_seed, eps, draw)
            cell = private_selection_cell(prep, wide, epsilon=eps,
                                          mean_candidates=config.selection_mean_candidates, seed=seed)
            chosen = cell.pop("chosen")
            rows.add(prep, "private_selection", "hdp", cell.pop("accuracy"), hp=chosen, epsilon=eps,
                     calibration="analytic", draw=draw, **cell)


def _figure2_rows(rows: _Rows, preps: Sequence[PreparedSplit], config: GLMBenchConfig) -> None:
    """The paper's Figure 2: Breast, epsilon = 1, e in {5, 10, 15} x k in {0.1, 0.3, 0.5}."""
    for prep in preps:
        for hp in config.figure2_grid:
            _hdp_rows(rows, prep, "figure2", hp, [PAPER.figure2.epsilon], config, "analytic")
            plain = fit_accuracies(prep.train, prep.y_train, prep.test, prep.y_test,
                                   [plain_job(prep.n_train, prep.n_parties, hp, split_seed=prep.split_seed)])[0]
            rows.add(prep, "figure2", "plain", plain, hp=hp)
