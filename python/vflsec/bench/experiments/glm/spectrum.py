"""The DP spectrum of ``vflsec bench glm``: every DP method at the same (epsilon, delta).

Issue 26's question: is HDP-VFL's loss the price of differential privacy itself
or of HDP-VFL's design? Per dataset, split and budget ``(epsilon, delta)`` of
``spectrum_budgets`` (replace-one neighbours everywhere):

* ``central_dp`` -- the ceiling: :class:`vflsec.glm.CentralDPLogisticRegression`
  on the joined features, the best of DP-SGD (Poisson subsampling, PLD),
  output perturbation and objective perturbation over their candidates;
* ``hdp`` -- HDP-VFL over the wide grid (the other rows' family, at this delta);
* ``taylor_dp`` -- HE-VFL with a DP model (the key holder noises every decrypted
  gradient), its flow in the clear: the accuracy ``paillier_dp`` / ``ckks_dp``
  reach, on every split; the encrypted protocols themselves run on the datasets
  and budgets ``he_dp_accuracy`` / ``he_dp_accuracy_epsilons`` name (first
  ``he_split_seeds`` splits, one noise draw, the same noise seed as taylor_dp's
  draw 0, so the two rows differ only by the encryption);
* ``mpc_dp_semi2k`` / ``mpc_dp_cheetah`` -- MPC+DP: the ceiling's DP-SGD run vertically
  inside secret-sharing MPC (protection ``"mpc_dp"``, :mod:`vflsec.glm.mpc_dp`: a secret
  Poisson sample, every party adding a full-sigma noise share) on the datasets and budgets
  ``mpc_dp_accuracy`` / ``mpc_dp_accuracy_epsilons`` name (first ``he_split_seeds`` splits,
  one noise draw, every spectrum delta), at the ceiling's own DP-SGD selection: the DP-SGD
  candidate ranked best by the ceiling's CV (the one the Opacus rows use). Both engine
  protocols draw the same noise seed. Without SPU (the ``mpc`` extra) the cells are rows
  labelled not run.

Every method's configuration is chosen the same way, as HDP-VFL's headline is:
per budget, the candidate with the best mean ``cv_folds``-fold CV accuracy on
split 0 of the *other* datasets of the run (built-in synthetic data when the
run has one dataset), never on the evaluated one, so epsilon is the whole
privacy cost of the evaluated rows. A candidate a dataset cannot run (an
objective-perturbation ``lam`` below the theorem's minimum at its ``n``, an HE
batch not larger than a passive block) is skipped there and the next best taken.

Beside the ceiling, the independent library: Opacus DP-SGD (its own PRV
accountant, add/remove neighbours, which need about half the noise of
replace-one) with the DP-SGD candidate selected the same way, at
``opacus_epsilons`` and the first spectrum delta, and vflsec's DP-SGD with the
same settings under both relations.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...._progress import progress
from .cpu import CPUClock
from .fits import PreparedSplit, auc, cv_accuracy, fit_scores, hdp_jobs
from .grid import LAM, MPC_DP_METHODS, GLMBenchConfig, HyperParams, cell_seed

__all__ = ["Candidate", "central_candidates", "he_dp_candidates", "mpc_dp_model", "run_spectrum", "select",
           "selected_dp_sgd"]

Budget = Tuple[float, float]
SPECTRUM_METHODS = ("central_dp", "hdp", "taylor_dp", "paillier_dp", "ckks_dp") + MPC_DP_METHODS
OPACUS_METHODS = ("central_dp_sgd", "central_dp_sgd_add_remove", "opacus_dp_sgd")


@dataclass(frozen=True)
class Candidate:
    """One configuration of a DP method: ``method`` and its keyword parameters."""

    method: str
    params: Tuple[Tuple[str, Any], ...]

    def as_dict(self) -> Dict[str, Any]:
        return {"method": self.method, **dict(self.params)}

    def label(self) -> str:
        return self.method + " " + " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in self.params)


def central_candidates(config: GLMBenchConfig) -> Tuple[Candidate, ...]:
    """The ceiling's candidates: DP-SGD's grid, output perturbation's lam scales,
    objective perturbation's lams."""
    momentum = float(config.central_sgd_momentum)
    out = [Candidate("dp_sgd", (("sampling_rate", float(q)), ("epochs", int(e)), ("lr", float(lr)),
                                ("momentum", momentum)))
           for q in config.central_sgd_sampling_rates for e in config.central_sgd_epochs
           for lr in config.central_sgd_lr]
    out += [Candidate("output_perturbation", (("lam_scale", float(s)),)) for s in config.central_output_lam_scales]
    out += [Candidate("objective_perturbation", (("lam", float(lam)),)) for lam in config.central_objective_lams]
    return tuple(out)


def he_dp_candidates(config: GLMBenchConfig) -> Tuple[Candidate, ...]:
    """HE+DP's candidates (batch sizes x epochs x weight clips, the run's learning rate)."""
    return tuple(Candidate("taylor_dp", (("batch_size", int(b)), ("epochs", int(e)), ("k", float(k)),
                                         ("lr", float(config.learning_rate))))
                 for b in config.he_dp_batch_sizes for e in config.he_dp_epochs for k in config.he_dp_k)


# -- one fit -------------------------------------------------------------------------------------
def _quiet(fn: Callable[..., Any], *args: Any) -> Tuple[Any, List[str]]:
    """``fn(*args)`` and the warnings it raised (recorded, never silenced: rows carry them)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, sorted({str(w.message).splitlines()[0] for w in caught})


def central_model(cand: Candidate, n: int, budget: Budget, noise_seed: Optional[int],
                  neighbours: str = "replace_one") -> Any:
    """An unfitted :class:`CentralDPLogisticRegression` for ``cand`` on ``n`` training rows."""
    from ....glm import CentralDPLogisticRegression

    eps, delta = budget
    p = dict(cand.params)
    common = dict(epsilon=eps, delta=delta, noise_seed=noise_seed, neighbours=neighbours)
    if cand.method == "dp_sgd":
        return CentralDPLogisticRegression("dp_sgd", batch_size=p["sampling_rate"], epochs=p["epochs"], lr=p["lr"],
                                           momentum=p["momentum"], **common)
    if cand.method == "output_perturbation":  # lam from public quantities only (n, epsilon)
        return CentralDPLogisticRegression("output_perturbation", lam=p["lam_scale"] * 50.0 / (n * eps), **common)
    return CentralDPLogisticRegression("objective_perturbation", lam=p["lam"], **common)


def he_dp_model(cand: Candidate, budget: Budget, noise_seed: Optional[int], split_seed: int, *,
                protection: str = "taylor_dp", key_bits: int = 2048) -> Any:
    """An unfitted HE+DP :class:`VerticalLogisticRegression` for ``cand``."""
    from ....glm import VerticalLogisticRegression

    p = dict(cand.params)
    return VerticalLogisticRegression(protection=protection, epsilon=budget[0], delta=budget[1], lam=LAM, lr=p["lr"],
                                      epochs=p["epochs"], batch_size=p["batch_size"], k=p["k"], seed=split_seed,
                                      noise_seed=noise_seed, key_bits=key_bits)


def mpc_dp_model(cand: Candidate, n: int, budget: Budget, noise_seed: Optional[int], split_seed: int, *,
                 protocol: str) -> Any:
    """An unfitted MPC+DP :class:`VerticalLogisticRegression` for the ceiling's DP-SGD candidate ``cand`` on
    ``n`` training rows: its expected batch ``ceil(q n)`` (the protocol rounds ``q`` up to a multiple of
    ``2^-12``), epochs, learning rate and momentum; no weight decay and no weight clip, as the ceiling's DP-SGD."""
    from ....glm import VerticalLogisticRegression

    if cand.method != "dp_sgd":
        raise ValueError(f"MPC+DP runs a DP-SGD candidate, not {cand.method!r}")
    p = dict(cand.params)
    return VerticalLogisticRegression(protection="mpc_dp", epsilon=budget[0], delta=budget[1], mpc_protocol=protocol,
                                      batch_size=max(1, math.ceil(p["sampling_rate"] * n - 1e-9)),
                                      epochs=p["epochs"], lr=p["lr"], lam=0.0, k=None, seed=split_seed,
                                      noise_seed=noise_seed, he_options={"momentum": p["momentum"]})


def _fit_score(family: str, cand: Candidate, train: List[np.ndarray], y_train: np.ndarray, test: List[np.ndarray],
               y_test: np.ndarray, budget: Budget, noise_seed: Optional[int], split_seed: int
               ) -> Optional[Tuple[float, float, Any]]:
    """(accuracy, AUC, model) of one fit; None when ``cand`` cannot run on these rows (refused)."""
    n = int(y_train.shape[0])
    try:
        model = (central_model(cand, n, budget, noise_seed) if family == "central_dp"
                 else he_dp_model(cand, budget, noise_seed, split_seed))
        (fitted, _) = _quiet(model.fit, train, y_train)
    except ValueError:
        return None
    signed = np.where(np.asarray(y_test) == fitted.classes_[1], 1.0, -1.0)
    return float(fitted.score(test, y_test)), auc(np.asarray(fitted.decision_function(test)), signed), fitted


# -- selection -----------------------------------------------------------------------------------
def _cv_candidates(family: str, prep: PreparedSplit, candidates: Sequence[Candidate], budgets: Sequence[Budget], *,
                   folds: int, base_seed: Optional[int]) -> np.ndarray:
    """Mean CV accuracy ``(len(candidates), len(budgets))`` on ``prep``'s training rows (NaN: refused)."""
    from sklearn.model_selection import StratifiedKFold

    scores = np.zeros((len(candidates), len(budgets)))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=prep.split_seed)
    for fold, (tr, va) in enumerate(splitter.split(np.zeros(prep.n_train), prep.y_train)):
        tr, va = np.sort(tr), np.sort(va)
        train = [X[tr] for X in prep.raw_train]
        valid = [X[va] for X in prep.raw_train]
        for i, cand in enumerate(candidates):
            for j, budget in enumerate(budgets):
                seed = cell_seed(base_seed, "spectrum-cv", family, prep.dataset, prep.split_seed, fold, i, *budget)
                out = _fit_score(family, cand, train, prep.y_train_raw[tr], valid, prep.y_train_raw[va], budget,
                                 seed, prep.split_seed)
                scores[i, j] += math.nan if out is None else out[0] / folds
    return scores


def select(pool: Dict[str, np.ndarray], dataset: str) -> Tuple[np.ndarray, List[str]]:
    """Candidate indices of ``dataset`` per budget, best first: ranked by the mean CV
    accuracy over the *other* datasets of ``pool`` (name -> (candidates, budgets)
    scores); a candidate refused on every one of them comes last."""
    names = [name for name in pool if name != dataset]
    if not names:
        raise ValueError(f"no other dataset to select {dataset!r}'s spectrum configurations on")
    stacked = np.stack([pool[name] for name in names])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: refused everywhere
        mean = np.nanmean(stacked, axis=0)
    mean = np.where(np.isnan(mean), -np.inf, mean)
    return np.argsort(-mean, axis=0, kind="stable"), names


# -- the run -------------------------------------------------------------------------------------
class _Writer:
    """Appends spectrum rows with the fields every row has."""

    def __init__(self, rows: List[Dict[str, Any]], seeded: bool):
        self.rows, self.seeded = rows, seeded

    def add(self, prep: PreparedSplit, method: str, budget: Budget, draw: Optional[int], accuracy: Optional[float],
            **extra: Any) -> None:
        self.rows.append({
            "dataset": prep.dataset, "family": "spectrum", "method": method, "calibration": None,
            "epsilon": budget[0], "delta": budget[1], "valid_dp": True, "split_seed": prep.split_seed,
            "noise_draw": draw, "noise": "seeded (experiment setting)" if self.seeded else "OS-entropy CSPRNG",
            "accuracy": None if accuracy is None else float(accuracy), **extra,
        })


def run_spectrum(config: GLMBenchConfig, preps: Dict[str, List[PreparedSplit]], rows: List[Dict[str, Any]],
                 result: Dict[str, Any], log: Callable[[str], None] = print) -> None:
    """The spectrum rows of every dataset of ``preps`` (selection, then test accuracy),
    appended to ``rows``; the selections go to ``result["spectrum"]``."""
    budgets = list(config.spectrum_budgets)
    if not budgets:
        return
    seeded = config.seed is not None
    writer = _Writer(rows, seeded)
    pools = {name: splits[0] for name, splits in preps.items()}
    if len(pools) == 1:  # select on built-in synthetic data, as the headline is
        from ....data import make_synthetic
        from .fits import prepare_split

        synth = make_synthetic(n_samples=2000, features_per_party=(10, 10), seed=1)
        pools["synthetic"] = prepare_split(synth, [10, 10], split_seed=0, test_size=config.test_size)
    central, he_dp = central_candidates(config), he_dp_candidates(config)
    hdp_grid = config.wide_grid
    cv: Dict[str, Dict[str, np.ndarray]] = {"central_dp": {}, "taylor_dp": {}, "hdp": {}}
    start = time.perf_counter()
    for name, prep in progress(list(pools.items()), desc="spectrum selection (CV)", unit="dataset"):
        cv["central_dp"][name] = _cv_candidates("central_dp", prep, central, budgets, folds=config.cv_folds,
                                                base_seed=config.seed)
        cv["taylor_dp"][name] = _cv_candidates("taylor_dp", prep, he_dp, budgets, folds=config.cv_folds,
                                               base_seed=config.seed)
        cv["hdp"][name] = np.concatenate(
            [cv_accuracy(prep, hdp_grid, [e], folds=config.cv_folds, base_seed=config.seed, tag="spectrum", delta=d)
             for e, d in budgets], axis=1)
        log(f"[glm] spectrum CV {name}: {time.perf_counter() - start:.0f} s so far")
    chosen: Dict[str, Any] = {}
    result["spectrum"] = {"budgets": [list(b) for b in budgets], "selected": chosen,
                          "candidates": {"central_dp": [c.as_dict() for c in central],
                                         "taylor_dp": [c.as_dict() for c in he_dp],
                                         "hdp": [h.as_dict() for h in hdp_grid]},
                          "cv": {fam: {name: s.tolist() for name, s in per.items()} for fam, per in cv.items()}}
    for name, splits in preps.items():
        ranks = {fam: select(cv[fam], name) for fam in cv}
        chosen[name] = {"selected_on": ranks["central_dp"][1]}
        for prep in progress(splits, desc=f"spectrum {name}", unit="split"):
            for j, budget in enumerate(budgets):
                _central_rows(writer, prep, central, ranks["central_dp"][0][:, j], budget, config, chosen[name])
                _hdp_rows(writer, prep, hdp_grid, ranks["hdp"][0][:, j], budget, config, chosen[name])
                _he_dp_rows(writer, prep, he_dp, ranks["taylor_dp"][0][:, j], budget, config, chosen[name], log)
                _mpc_dp_rows(writer, prep, central, ranks["central_dp"][0][:, j], budget, config, chosen[name], log)
            for eps in config.opacus_epsilons:
                _opacus_rows(writer, prep, central, ranks["central_dp"][0], budgets, (float(eps), budgets[0][1]),
                             config, chosen[name])


def _key(budget: Budget) -> str:
    return f"{budget[0]:g}/{budget[1]:g}"


def _first_fit(family: str, prep: PreparedSplit, candidates: Sequence[Candidate], order: np.ndarray, budget: Budget,
               noise_seed: Optional[int]) -> Tuple[Candidate, Tuple[float, float, Any]]:
    """The best-ranked candidate that runs on ``prep`` and its fit."""
    for i in order:
        out = _fit_score(family, candidates[int(i)], prep.raw_train, prep.y_train_raw, prep.raw_test, prep.y_test_raw,
                         budget, noise_seed, prep.split_seed)
        if out is not None:
            return candidates[int(i)], out
    raise ValueError(f"no {family} candidate runs on {prep.dataset} at epsilon={budget[0]:g}, delta={budget[1]:g}")


def _central_rows(writer: _Writer, prep: PreparedSplit, candidates: Sequence[Candidate], order: np.ndarray,
                  budget: Budget, config: GLMBenchConfig, chosen: Dict[str, Any]) -> None:
    for draw in range(config.noise_draws):
        seed = cell_seed(config.seed, "spectrum", "central_dp", prep.dataset, prep.split_seed, draw, *budget)
        cand, (acc, area, model) = _first_fit("central_dp", prep, candidates, order, budget, seed)
        chosen.setdefault("central_dp", {})[_key(budget)] = cand.label()
        writer.add(prep, "central_dp", budget, draw, acc, auc=area, config=cand.as_dict(),
                   epsilon_spent=model.privacy_spent_.epsilon, mechanism=model.mechanism_.name)


def _hdp_rows(writer: _Writer, prep: PreparedSplit, grid: Sequence[HyperParams], order: np.ndarray, budget: Budget,
              config: GLMBenchConfig, chosen: Dict[str, Any]) -> None:
    hp = grid[int(order[0])]  # every wide-grid configuration runs on every dataset
    chosen.setdefault("hdp", {})[_key(budget)] = hp.label()
    seeds = [cell_seed(config.seed, "spectrum", "hdp", prep.dataset, prep.split_seed, d, *budget)
             for d in range(config.noise_draws)]
    jobs = hdp_jobs(prep.n_train, prep.n_parties, hp, epsilons=[budget[0]] * len(seeds), calibration="analytic",
                    noise_seeds=seeds, split_seed=prep.split_seed, delta=budget[1])
    acc, area, _ = fit_scores(prep.train, prep.y_train, prep.test, prep.y_test, jobs)
    for draw, (a, u) in enumerate(zip(acc, area)):
        writer.add(prep, "hdp", budget, draw, a, auc=float(u), config=hp.for_rows(prep.n_train).as_dict())


def _he_dp_rows(writer: _Writer, prep: PreparedSplit, candidates: Sequence[Candidate], order: np.ndarray,
                budget: Budget, config: GLMBenchConfig, chosen: Dict[str, Any], log: Callable[[str], None]) -> None:
    cand: Optional[Candidate] = None
    for draw in range(config.noise_draws):
        seed = cell_seed(config.seed, "spectrum", "he_dp", prep.dataset, prep.split_seed, draw, *budget)
        start = time.perf_counter()
        cand, (acc, area, model) = _first_fit("taylor_dp", prep, candidates, order, budget, seed)
        writer.add(prep, "taylor_dp", budget, draw, acc, auc=area, config=cand.as_dict(),
                   epsilon_spent=_spent(model), seconds=time.perf_counter() - start)
    assert cand is not None  # noise_draws >= 1
    chosen.setdefault("taylor_dp", {})[_key(budget)] = cand.label()
    if prep.split_seed >= config.he_split_seeds:
        return
    for method in config.he_dp_accuracy_methods(prep.dataset):
        if budget[0] not in config.he_dp_accuracy_epsilons.get(method, ()):
            continue
        # The same noise seed as taylor_dp's draw 0: the rows differ only by the encryption.
        seed = cell_seed(config.seed, "spectrum", "he_dp", prep.dataset, prep.split_seed, 0, *budget)
        log(f"[glm] {method} on {prep.dataset} split {prep.split_seed} at epsilon={budget[0]:g}, "
            f"delta={budget[1]:g} ({cand.label()})")
        model = he_dp_model(cand, budget, seed, prep.split_seed, protection=method, key_bits=config.he_key_bits)
        fitted, warned = _quiet(model.fit, prep.raw_train, prep.y_train_raw)
        signed = np.where(np.asarray(prep.y_test_raw) == fitted.classes_[1], 1.0, -1.0)
        wall = float(fitted.history_["time"]["wall"])
        writer.add(prep, method, budget, 0, fitted.score(prep.raw_test, prep.y_test_raw),
                   auc=auc(np.asarray(fitted.decision_function(prep.raw_test)), signed), config=cand.as_dict(),
                   epsilon_spent=_spent(fitted), seconds=wall, epoch_seconds=wall / int(dict(cand.params)["epochs"]),
                   key_bits=config.he_key_bits if method.startswith("paillier") else None, warnings=warned)


def selected_dp_sgd(candidates: Sequence[Candidate], order: np.ndarray) -> List[Candidate]:
    """The ceiling's DP-SGD candidates in the ceiling's ranking ``order`` (one budget's column), best first:
    the first is the DP-SGD configuration selected for the ceiling's DP-SGD candidates."""
    ranked = [candidates[int(i)] for i in order if candidates[int(i)].method == "dp_sgd"]
    if not ranked:
        raise ValueError("the ceiling's candidates have no DP-SGD configuration -- give central_sgd_* values")
    return ranked


def _mpc_dp_rows(writer: _Writer, prep: PreparedSplit, candidates: Sequence[Candidate], order: np.ndarray,
                 budget: Budget, config: GLMBenchConfig, chosen: Dict[str, Any], log: Callable[[str], None]) -> None:
    """The MPC+DP cells ``mpc_dp_accuracy`` names for this split and budget, at the ceiling's selected DP-SGD
    configuration (the next DP-SGD candidate in its ranking where the protocol refuses one); a row labelled
    not run without the ``mpc`` extra, or where the protocol refuses every DP-SGD candidate."""
    from .mpc_cells import NOT_INSTALLED, spu_installed

    methods = config.mpc_dp_accuracy_methods(prep.dataset, budget[0])
    if prep.split_seed >= config.he_split_seeds or not methods:
        return
    ranked = selected_dp_sgd(candidates, order)
    # One seed for both engine protocols: their rows draw the same sample and noise.
    seed = cell_seed(config.seed, "spectrum", "mpc_dp", prep.dataset, prep.split_seed, 0, *budget)
    for method in methods:
        cell = _mpc_dp_cell(method, prep, ranked, budget, seed, log) if spu_installed() else NOT_INSTALLED
        if isinstance(cell, str):
            log(f"[glm] {method} on {prep.dataset} at epsilon={budget[0]:g}, delta={budget[1]:g}: {cell}")
            writer.add(prep, method, budget, 0, None, config=ranked[0].as_dict(), not_run=cell)
            continue
        cand, fitted, batch_size, extra = cell
        chosen.setdefault("mpc_dp", {})[_key(budget)] = f"{cand.label()} (b={batch_size})"
        history = fitted.history_
        signed = np.where(np.asarray(prep.y_test_raw) == fitted.classes_[1], 1.0, -1.0)
        writer.add(prep, method, budget, 0, fitted.score(prep.raw_test, prep.y_test_raw),
                   auc=auc(np.asarray(fitted.decision_function(prep.raw_test)), signed),
                   config={**cand.as_dict(), "batch_size": batch_size}, epsilon_spent=_spent(fitted),
                   mpc_protocol=history.get("mpc_protocol"), steps=history.get("dp_steps"),
                   sampling_rate=history.get("dp_sampling_rate"), noise_multiplier=history.get("dp_noise_multiplier"),
                   noise_shares=history.get("dp_noise_shares"), **extra)


def _mpc_dp_cell(method: str, prep: PreparedSplit, ranked: Sequence[Candidate], budget: Budget,
                 noise_seed: Optional[int], log: Callable[[str], None]) -> Any:
    """(candidate, fitted model, batch size, timing fields) of the first of ``ranked`` the protocol runs on
    ``prep``, or why none ran (its refusal of the last: the plan is checked before the engine trains)."""
    from .mpc_cells import engine_protocol

    refusal = ""
    for cand in ranked:
        model = mpc_dp_model(cand, prep.n_train, budget, noise_seed, prep.split_seed,
                             protocol=engine_protocol(method))
        log(f"[glm] {method} on {prep.dataset} split {prep.split_seed} at epsilon={budget[0]:g}, "
            f"delta={budget[1]:g} ({cand.label()}, b={model.batch_size})")
        start = time.perf_counter()
        try:
            with CPUClock() as cpu:
                fitted, warned = _quiet(model.fit, prep.raw_train, prep.y_train_raw)
        except ValueError as exc:
            refusal = str(exc).splitlines()[0]
            log(f"[glm] {method} refuses {cand.label()}: {refusal}")
            continue
        return cand, fitted, model.batch_size, {"seconds": time.perf_counter() - start, "cpu_seconds": cpu.seconds,
                                                "cpu_scope": cpu.scope, "warnings": warned}
    return f"not run (the protocol refuses every DP-SGD candidate; the last: {refusal})"


def _spent(model: Any) -> Optional[float]:
    spent = [s.epsilon for s in (model.privacy_spent_ or {}).values() if s is not None]
    return max(spent) if spent else None


def _opacus_rows(writer: _Writer, prep: PreparedSplit, candidates: Sequence[Candidate], order: np.ndarray,
                 budgets: Sequence[Budget], budget: Budget, config: GLMBenchConfig, chosen: Dict[str, Any]) -> None:
    """vflsec's DP-SGD (replace-one and add/remove) and Opacus' with the DP-SGD candidate
    ranked best at ``budget``'s epsilon (or the nearest spectrum budget's)."""
    j = min(range(len(budgets)), key=lambda i: (abs(math.log(budgets[i][0] / budget[0])), budgets[i][1] != budget[1]))
    sgd = selected_dp_sgd(candidates, order[:, j])[0]
    chosen.setdefault("dp_sgd", {})[_key(budget)] = sgd.label()
    for draw in range(config.noise_draws):
        seed = cell_seed(config.seed, "spectrum", "opacus", prep.dataset, prep.split_seed, draw, *budget)
        models = {}
        for method, neighbours in (("central_dp_sgd", "replace_one"), ("central_dp_sgd_add_remove", "add_remove")):
            model = central_model(sgd, prep.n_train, budget, seed, neighbours=neighbours)
            model, _ = _quiet(model.fit, prep.raw_train, prep.y_train_raw)
            models[method] = model
            writer.add(prep, method, budget, draw, model.score(prep.raw_test, prep.y_test_raw), config=sgd.as_dict(),
                       noise_multiplier=model.mechanism_.noise_multiplier, neighbours=neighbours)
        accuracy, info = _opacus_accuracy(models["central_dp_sgd_add_remove"], prep, sgd, budget, seed)
        writer.add(prep, "opacus_dp_sgd", budget, draw, accuracy, config=sgd.as_dict(), neighbours="add_remove",
                   **info)


def _opacus_accuracy(ours: Any, prep: PreparedSplit, cand: Candidate, budget: Budget, seed: Optional[int]
                     ) -> Tuple[Optional[float], Dict[str, Any]]:
    """Opacus DP-SGD on the rows vflsec's model saw (its design: projection and intercept
    column), a torch linear model with the same schedule, clip and momentum, noise
    calibrated by Opacus itself (``make_private_with_epsilon``, PRV accountant)."""
    try:
        import torch
        from opacus import PrivacyEngine
    except ImportError:
        return None, {"not_run": "opacus is not installed (pip install \"vflsec[baselines]\")"}
    p = dict(cand.params)
    design = ours.design_
    X_train = design.block(np.hstack(prep.raw_train), "active")
    X_test = design.block(np.hstack(prep.raw_test), "active")
    y_train = (np.asarray(prep.y_train_raw) == ours.classes_[1]).astype(np.float32)
    y_test = (np.asarray(prep.y_test_raw) == ours.classes_[1]).astype(int)
    torch.manual_seed(0 if seed is None else seed % (2 ** 31))
    model = torch.nn.Linear(X_train.shape[1], 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=p["momentum"])
    data = torch.utils.data.TensorDataset(torch.tensor(X_train, dtype=torch.float32), torch.tensor(y_train))
    loader = torch.utils.data.DataLoader(data, batch_size=max(1, round(p["sampling_rate"] * len(y_train))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' secure-RNG and RDP-order notices
        engine = PrivacyEngine(accountant="prv")
        model, optimizer, loader = engine.make_private_with_epsilon(
            module=model, optimizer=optimizer, data_loader=loader, target_epsilon=budget[0], target_delta=budget[1],
            epochs=p["epochs"], max_grad_norm=1.0, poisson_sampling=True)
        loss = torch.nn.BCEWithLogitsLoss()
        for _ in range(p["epochs"]):
            for xb, yb in loader:
                if len(xb) == 0:
                    continue
                optimizer.zero_grad()
                loss(model(xb).squeeze(-1), yb).backward()
                optimizer.step()
        spent = float(engine.get_epsilon(budget[1]))
    w = model._module.weight.detach().numpy().ravel().astype(np.float64)
    return float(np.mean((X_test @ w > 0).astype(int) == y_test)), {
        "noise_multiplier": float(optimizer.noise_multiplier), "epsilon_spent": spent}
