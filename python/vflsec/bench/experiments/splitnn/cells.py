"""The measurements of ``vflsec bench splitnn``, one function per section:

* ``table2`` (:func:`run_table2`) -- VFL-AFE Table 2: test accuracy of a
  centralized model, unprotected split learning and VFL-AFE vanilla / +R /
  +D / full on Adult (MLP bottoms, 2 passive parties) and MNIST vertical
  halves (2-layer CNN bottoms), delta = 1e-2, with the majority-class rate;
* ``table3`` (:func:`run_table3`, :func:`run_kernel_timing`) -- VFL-AFE
  Table 3: seconds per training step for the base split model and the
  increments of +noise, +R and +D, each with vflsec's kernels and with the
  baseline implementation (:mod:`.baseline`), and the replaceable parts
  timed alone;
* ``dp_vfl`` / ``fedpass`` (:func:`section_dp_vfl`, :func:`section_fedpass`)
  -- the DP-VFL curves and FedPass settings (:mod:`.dp`);
* ``rescale`` -- Table 2's +R and full models with and without the rule's
  shrink, and with the DP factor (:mod:`.rescale`).

Every accuracy row (Table 2, DP-VFL, FedPass, rescale) is added to
``results["accuracy"]`` as it finishes, with a ``"section"`` key naming its
section, so an interrupted run keeps every finished row.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

import numpy as np

from ...._progress import progress
from ...common import DP_LAYER, derived_seed
from .afe import DELTA, VARIANTS, fit_split_model, make_afe
from .baseline import IMPLS
from .data import SplitData, join_halves, load_adult_split, load_mnist_split, load_or_fallback, majority_rate
from .papers import TIMING_STEPS
from .rescale import section_rescale

__all__ = ["SECTIONS", "run_cells", "run_kernel_timing", "run_table2", "run_table3", "section_dp_vfl",
           "section_fedpass"]

Rows = List[Dict[str, Any]]


# ---------------------------------------------------------------------------
# Table 2
def _centralized_accuracy(data: SplitData, *, epochs: int, batch_size: int, lr: float, seed: int) -> float:
    """One bottom on all features + the same head, plain torch, same batch order."""
    import torch

    from ....splitnn.models import cnn_bottom, linear_head, mlp_bottom
    from ....vfl.schedule import batch_indices

    image_shape = cast(Tuple[int, int], data.image_shape)  # set whenever kind is "image", the only use
    Xtr = torch.from_numpy(np.hstack(data.train_parts) if data.kind == "tabular" else
                           join_halves(data.train_parts, image_shape))
    Xte = torch.from_numpy(np.hstack(data.test_parts) if data.kind == "tabular" else
                           join_halves(data.test_parts, image_shape))
    n_classes = int(max(data.y_train.max(), data.y_test.max())) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bottom = cnn_bottom(image_shape, 64) if data.kind == "image" else mlp_bottom(Xtr.shape[1], (64,), 32)
        width = 64 if data.kind == "image" else 32
        model = torch.nn.Sequential(bottom, linear_head(width, n_classes))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    y = torch.from_numpy(data.y_train).long()
    for epoch in range(epochs):
        for rows in batch_indices(len(y), batch_size, seed, epoch):
            idx = torch.from_numpy(rows)
            loss = torch.nn.functional.cross_entropy(model(Xtr[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = model(Xte).argmax(dim=1).numpy()
    return float(np.mean(pred == data.y_test))


def run_table2(datasets: Dict[str, SplitData], cfg: Dict[str, Any], rows: Optional[Rows] = None) -> Rows:
    """Test accuracy of centralized / unprotected / VFL-AFE variants (VFL-AFE Table 2),
    each row appended to ``rows`` (returned) as it finishes."""
    rows = [] if rows is None else rows
    for data in datasets.values():  # the first reference: always predicting the majority class
        rows.append({"dataset": data.name, "parties": 0, "delta": None, "epsilon": None, "epsilon_composed": None,
                     "seed": None, "metric": "test_accuracy", "defense": "majority", "variant": None,
                     "value": majority_rate(data.y_test), "n": int(len(data.y_test)), "section": "table2"})
    cells = [(name, cell, seed) for name in datasets for seed in range(cfg["seeds"])
             for cell in ("centralized", "unprotected", *VARIANTS)]
    for name, cell, seed in progress(cells, desc="table2", unit="fit"):
        data = datasets[name]
        train = dict(epochs=cfg["epochs"], batch_size=cfg["batch_size"], lr=cfg["lr"][data.kind], seed=seed)
        base = {"dataset": data.name, "parties": len(data.train_parts), "delta": None, "epsilon": None,
                "epsilon_composed": None, "seed": seed, "metric": "test_accuracy"}
        if cell == "centralized":
            acc = _centralized_accuracy(data, **train)
            rows.append({**base, "defense": "centralized", "variant": None, "parties": 1, "value": acc,
                         "section": "table2"})
            continue
        defense = None if cell == "unprotected" else make_afe(
            cell, cfg, kind=data.kind, seed=derived_seed(cfg.get("noise_seed"), "table2", name, cell, seed))
        model = fit_split_model(data, defense, device=cfg["device"], **train)
        # The training run's guarantee, read before scoring: a defended scoring pass is a release too.
        spent: Any = model.privacy_spent_["passive_0"] if defense is not None else None
        acc = float(model.score(data.test_parts, data.y_test))
        row = {**base, "defense": "none" if defense is None else defense.name,
               "variant": None if defense is None else defense.variant, "value": acc,
               "train_accuracy_last_epoch": model.history_["accuracy"][-1],
               "seconds": sum(model.history_["seconds"])}
        if defense is not None:
            row.update(epsilon=cfg["epsilon"][data.kind], delta=DELTA, epsilon_composed=spent.epsilon,
                       epsilon_per_release_accountant=spent.epsilon_per_release)
            kept = model.party_defenses_["passive_0"].last_kept_fraction_.get("passive_0")
            if kept is not None:
                row["fcm_kept_fraction_last_batch"] = kept
        rows.append({**row, "section": "table2"})
    return rows


# ---------------------------------------------------------------------------
# Table 3
def run_table3(data: SplitData, cfg: Dict[str, Any]) -> Rows:
    """Seconds per training step of base / +noise / +R / +D, vflsec kernels vs baseline (VFL-AFE Table 3).

    Each configuration adds one component to the previous one. Configurations
    run interleaved for ``timing_rounds`` rounds of ``timing_epochs`` epochs
    (after one warm-up epoch each); a configuration's per-step time is the
    minimum over its epochs of epoch time / steps (the least disturbed by other
    load), and a component's ``seconds_per_step`` is the difference to the
    previous configuration. The defense's own timers are reported beside it:
    ``defense_seconds_per_step`` (forward code of the component: clip + noise,
    rescale + KL, FCM + contrastive; its backward is not included) and
    ``kernel_seconds_per_step`` (the part a vflsec kernel replaces: the noise
    draw, the pairwise-distance statistics, the FCM), which do not depend on
    subtracting two noisy totals. Timers are those of one passive party (the
    two run in parallel threads).
    """
    n = len(data.y_train)
    steps = math.ceil(n / cfg["timing_batch_size"])
    configs = [("base", None), ("noise", "vanilla"), ("rescale", "R"), ("adjust", "full")]
    cells = [(impl, step, variant) for impl in IMPLS for step, variant in configs
             if not (impl != IMPLS[0] and variant is None)]
    per_step: Dict[Tuple[str, str], List[float]] = {}
    timers: Dict[Tuple[str, str], Dict[str, float]] = {}
    steps_run: Dict[Tuple[str, str], int] = {}
    rounds = [(r, cell) for r in range(cfg["timing_rounds"]) for cell in cells]
    for _, (impl, step, variant) in progress(rounds, desc="table3", unit="cfg"):
        defense = None if variant is None else make_afe(variant, cfg, kind=data.kind, impl=impl, seed=0)
        model = fit_split_model(data, defense, epochs=cfg["timing_epochs"] + 1, batch_size=cfg["timing_batch_size"],
                                lr=cfg["lr"][data.kind], seed=0, device=cfg["device"])
        per_step.setdefault((impl, step), []).extend(s / steps for s in model.history_["seconds"][1:])
        if defense is not None:
            acc = timers.setdefault((impl, step), {})
            for key, secs in model.party_defenses_["passive_0"].timings_.items():
                acc[key] = acc.get(key, 0.0) + secs
            steps_run[(impl, step)] = steps_run.get((impl, step), 0) + steps * (cfg["timing_epochs"] + 1)
    for impl in IMPLS[1:]:
        per_step[(impl, "base")] = per_step[(IMPLS[0], "base")]
    own_keys = {"noise": ("clip", "noise"), "rescale": ("rescale", "kl"), "adjust": ("adjust",)}
    kernel_key = {"noise": "noise", "rescale": "stats", "adjust": "fcm"}
    rows = []
    for impl in IMPLS:
        prev = 0.0
        for step in TIMING_STEPS:
            total = min(per_step[(impl, step)])
            row = {"dataset": data.name, "step": step, "impl": impl, "seconds_per_step": total - prev,
                   "cumulative_seconds_per_step": total, "defense_seconds_per_step": None,
                   "kernel_seconds_per_step": None, "batch_size": cfg["timing_batch_size"], "n_samples": n}
            if step != "base":
                t, count = timers[(impl, step)], steps_run[(impl, step)]
                row["defense_seconds_per_step"] = sum(t.get(k, 0.0) for k in own_keys[step]) / count
                row["kernel_seconds_per_step"] = t.get(kernel_key[step], 0.0) / count
            rows.append(row)
            prev = total
    return rows


def run_kernel_timing(cfg: Dict[str, Any], *, dim: int = 64, n_clusters: int = 10,
                      dataset: str = "synthetic") -> Rows:
    """Each replaceable part of VFL-AFE timed alone on one batch (median of
    repeated calls, one thread, no trainer threads competing for the GIL):
    noise release (the lattice release vs ``h + torch.randn``), pairwise-distance
    statistics, FCM on gradient-like rows
    (``n_clusters`` Gaussian blobs). Best of 15 interleaved rounds of 5 calls."""
    import torch

    b = cfg["timing_batch_size"]
    rng = np.random.default_rng(0)
    h = torch.from_numpy(rng.standard_normal((b, dim)).astype(np.float32))
    centers = rng.standard_normal((n_clusters, dim)) * 3.0
    grads = torch.from_numpy(centers[rng.integers(0, n_clusters, b)] + rng.standard_normal((b, dim)))
    calls = {}
    for impl in IMPLS:
        d = make_afe("full", cfg, kind="image", impl=impl, seed=0)
        d.n_clusters_ = n_clusters
        if impl == "vflsec":
            calls[(impl, "noise")] = lambda d=d: d.release("p", h)
        else:
            # The float path the lattice release replaced, timed here only: it is
            # not a DP release (its rounding leaks h), so no impl trains with it.
            sigma = d.release_sigma(dim)
            calls[(impl, "noise")] = lambda sigma=sigma: h + torch.randn(h.shape, dtype=h.dtype) * sigma
        calls[(impl, "rescale")] = lambda d=d: d.max_distance_estimate(h)
        calls[(impl, "adjust")] = lambda d=d: d.cluster_gradients(grads, 0)
    for fn in calls.values():
        fn()
    # Interleaved rounds, best round kept: other load on a shared machine only ever adds time.
    best = {key: math.inf for key in calls}
    for _ in range(15):
        for key, fn in calls.items():
            t0 = time.perf_counter()
            for _ in range(5):
                fn()
            best[key] = min(best[key], (time.perf_counter() - t0) / 5)
    return [{"dataset": dataset, "step": step, "impl": impl, "batch_size": b, "dim": dim, "seconds_per_call": secs}
            for (impl, step), secs in best.items()]


# ---------------------------------------------------------------------------
# DP-VFL and FedPass: ``fn(datasets, cfg, rows) -> rows``, each row tagged with its section
def _ticker(total: int, desc: str) -> Callable[[Any], None]:
    """A progress callback for ``total`` rows reported one at a time (:func:`vflsec._progress.progress`)."""
    steps = iter(progress(range(total), desc=desc, unit="fit"))
    next(steps, None)  # shows 0/total
    return lambda _row: next(steps, None)


def _collect(rows: Rows, section: str, total: int) -> Callable[[Dict[str, Any]], None]:
    """A ``progress`` callback of :mod:`.dp` that appends each finished row to ``rows``."""
    tick = _ticker(total, section)

    def add(row: Dict[str, Any]) -> None:
        rows.append({**row, "section": section})
        tick(row)

    return add


def section_dp_vfl(datasets: Dict[str, Any], cfg: Dict[str, Any], rows: Optional[Rows] = None) -> Rows:
    """DP-VFL (Ranbaduge & Ding) curves: Adult accuracy, Energy and California
    housing MSE against epsilon for 3/4/5 owners, once per clip entry of the
    grid's ``clips``, with the references."""
    from .dp import dp_vfl_estimator_factory, run_dp_vfl

    rows = [] if rows is None else rows
    d = cfg["dp_vfl"]
    fallbacks = {"adult": "breast", "energy": "diabetes", "california_housing": "diabetes"}
    sets = dict(load_or_fallback(name, fallbacks[name], cfg["data_dir"], d["max_rows"]) for name in d["datasets"])
    make = dp_vfl_estimator_factory(epochs=d["epochs"], batch_size=d["batch_size"], lr=d["lr"],
                                    device=cfg["device"])
    total = len(sets) * len(d["owners"]) * (len(d["epsilons"]) * len(d["clips"]) + 1) + len(sets)
    run_dp_vfl(sets, make, epsilons=d["epsilons"], owners=d["owners"], clips=d["clips"],
               progress=_collect(rows, "dp_vfl", total), noise_seed=cfg.get("noise_seed"))
    return rows


def section_fedpass(datasets: Dict[str, Any], cfg: Dict[str, Any], rows: Optional[Rows] = None) -> Rows:
    """FedPass accuracy against passport settings (N, sigma^2) on Adult."""
    from .dp import fedpass_estimator_factory, run_fedpass

    rows = [] if rows is None else rows
    f = cfg["fedpass"]
    sets = dict([load_or_fallback("adult", "breast", cfg["data_dir"], f["max_rows"])])
    make = fedpass_estimator_factory(epochs=f["epochs"], device=cfg["device"])
    run_fedpass(sets, make, settings=f["settings"], parties=(2,),
                progress=_collect(rows, "fedpass", len(f["settings"]) + 1))
    return rows


# The accuracy sections after Table 2 / 3, in the order a run's ``sections`` names them.
SECTIONS: Dict[str, Callable[..., Rows]] = {"dp_vfl": section_dp_vfl, "fedpass": section_fedpass,
                                            "rescale": section_rescale}


# ---------------------------------------------------------------------------
def run_cells(grid: Any, options: Dict[str, Any], result: Dict[str, Any]) -> None:
    """Run the grid's ``sections`` into ``result`` (the runner's envelope, its
    ``"config"`` the grid's :meth:`~.grid.SplitnnGrid.run_settings`)."""
    from ....splitnn.estimator import resolve_device

    data_dir: Optional[Path] = options.get("data_dir")
    cfg = result["config"]
    # The run's inputs that are not grid keys, recorded beside it (the report reads them).
    cfg.update(device=resolve_device(options.get("device")), quick=bool(options.get("quick")),
               data_dir=None if data_dir is None else str(data_dir))
    result.update(dp_layer=DP_LAYER, accuracy=[], timing=[],
                  # what the Table 3 noise rows measure (runs before the lattice release timed a ChaCha20 draw)
                  noise_release="lattice")
    datasets = {
        "adult": load_adult_split(data_dir, max_train=cfg["adult_rows"][0], max_test=cfg["adult_rows"][1]),
        "mnist": load_mnist_split(data_dir, max_train=cfg["mnist_rows"][0], max_test=cfg["mnist_rows"][1]),
    }
    cfg["sources"] = {d.name: f"{d.source}; used {len(d.y_train)} train / {len(d.y_test)} test rows"
                      for d in datasets.values()}
    wanted = cfg["sections"]
    if "table2" in wanted:
        run_table2(datasets, cfg, result["accuracy"])
    if "table3" in wanted:
        timing_data = load_mnist_split(data_dir, max_train=cfg["timing_rows"], max_test=10)
        result["timing"] = run_table3(timing_data, cfg)
        result["timing_isolated"] = run_kernel_timing(cfg)
    for key in wanted:
        if key in SECTIONS:
            SECTIONS[key](datasets, cfg, result["accuracy"])
