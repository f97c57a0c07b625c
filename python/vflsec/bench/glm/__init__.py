"""Vertical GLM benchmark: HDP-VFL differential privacy against Paillier and CKKS.

``vflsec bench glm [--quick] [--config FILE] [--datasets breast,credit,adult] [--seed N] [--data-dir DIR]
[--out DIR]``
trains vertical logistic regression with every protection on the same splits
and writes ``DIR/results.json``, ``DIR/report.md`` and PNG plots: accuracy
against epsilon beside every reference (majority class, active party alone,
centralized scikit-learn and mini-batch GD, plain VFL, HE-VFL) like the
HDP-VFL paper's Fig. 1, its Fig. 2 grid, and runtime / bytes against epochs
and n like its Fig. 3.

Modules: :mod:`.experiment` (the experiment as data: ``configs/glm.toml`` and
``configs/papers/hdp_vfl.toml``), :mod:`.cells` (splits,
vectorized fits, cross-validation), :mod:`.accuracy` (the accuracy loop),
:mod:`.selection` (private hyperparameter selection), :mod:`.runtime`,
:mod:`.report`, :mod:`.plots`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Optional

from ..common import PartialRunError, git_revision, machine_info, package_versions, write_json
from ..config import BenchConfigError
from .accuracy import run_accuracy
from .experiment import GLMBenchConfig, load_config
from .plots import plot_accuracy, plot_figure2, plot_runtime, plot_tradeoff
from .report import network_citation, render_report, summarize
from .runtime import run_runtime

__all__ = ["GLMBenchConfig", "add_arguments", "render", "run", "run_accuracy", "run_runtime"]

_PROG = "vflsec bench glm"


def _fail(message: str) -> None:
    print(f"{_PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _check_datasets(config: GLMBenchConfig, data_dir: Optional[Path]) -> None:
    """Every dataset exists and loads before any work starts."""
    from ...data import DATASETS, load_dataset
    from ...errors import missing_dataset

    for name in config.datasets:
        if name not in DATASETS:
            _fail(f"unknown dataset {name!r} -- choose from {', '.join(DATASETS)}")
        try:
            load_dataset(name, data_dir=data_dir)
        except FileNotFoundError as exc:
            _fail(str(missing_dataset(exc)))


def run(quick: bool = False, datasets: Optional[str] = None, data_dir: Optional[Path] = None,
        out: Optional[Path] = None, seed: Optional[int] = None, split_seeds: Optional[int] = None,
        noise_draws: Optional[int] = None, he_budget: Optional[float] = None,
        he_accuracy_budget: Optional[float] = None, os_entropy: bool = False,
        config: Optional[Path] = None, network_results: Optional[Path] = None,
        rerender: Optional[Path] = None) -> Dict[str, Any]:
    """Run the benchmark and write its outputs. The experiment is ``[quick]`` or
    ``[full]`` of ``config`` (a user's copy of ``glm.toml``; default the shipped
    one); explicit arguments always win over it. ``network_results``: a
    ``vflsec bench network --links`` results.json the runtime verdicts cite.
    ``rerender``: no run; write the report and plots of ``rerender/results.json``
    again (with ``network_results`` cited, when given)."""
    citation = None
    if network_results is not None:
        try:
            payload = json.loads(Path(network_results).read_text())
        except (OSError, ValueError) as exc:
            raise BenchConfigError(f"--network-results {network_results}: cannot read it ({exc}) -- give the "
                                   "results.json of a vflsec bench network --links run") from None
        if not payload.get("links"):
            raise BenchConfigError(f"--network-results {network_results} has no link stage -- run vflsec bench "
                                   "network --links ... first")
        citation = network_citation(payload, str(network_results))
    if rerender is not None:
        path = Path(rerender) / "results.json"
        try:
            saved: Dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise BenchConfigError(f"--rerender {rerender}: cannot read {path} ({exc})") from None
        if citation is not None:
            saved["network_links"] = citation
        render(saved, Path(rerender))
        return saved
    out = Path(out) if out is not None else Path("bench-out") / "glm"
    experiment = load_config(quick, config)
    overrides: Dict[str, Any] = {}
    if os_entropy:
        overrides["seed"] = None
    elif seed is not None:
        overrides["seed"] = seed
    if datasets is not None:
        names = tuple(d.strip() for d in datasets.split(",") if d.strip())
        if not names:
            _fail("--datasets is empty")
        overrides["datasets"] = names
    for key, value in (("split_seeds", split_seeds), ("noise_draws", noise_draws)):
        if value is not None:
            if value < 1:
                _fail(f"--{key.replace('_', '-')} must be >= 1, got {value}")
            overrides[key] = value
    for key, budget in (("runtime_he_budget", he_budget), ("he_accuracy_budget", he_accuracy_budget)):
        if budget is not None:
            if not budget > 0:
                _fail(f"budgets must be > 0 seconds, got {budget}")
            overrides[key] = budget
    experiment = replace(experiment, **overrides)
    _check_datasets(experiment, data_dir)
    if {"paillier", "ckks"} & (set(experiment.he_methods) | set(experiment.runtime_methods)):
        from ...errors import require_extra

        require_extra("phe", "gmpy2", "tenseal")  # vflsec.he needs all three
    result: Dict[str, Any] = {
        # Other processes slow every method, the HE ones most: the load averages say how busy it was.
        "machine": {**machine_info(), "load_average_start": os.getloadavg()},
        "versions": package_versions(["vflsec", "numpy", "scikit-learn", "phe", "gmpy2", "tenseal", "dp-accounting"]),
        "git": git_revision(),
        "config": experiment.as_dict(),
        "accuracy": {"rows": []},
        "runtime": [],
    }
    if citation is not None:
        result["network_links"] = citation
    start = time.perf_counter()
    try:
        result["accuracy"] = run_accuracy(experiment, data_dir=data_dir, state=result)
        result["runtime"] = run_runtime(
            sizes=experiment.runtime_sizes, epoch_counts=experiment.runtime_epochs,
            epochs_n=experiment.runtime_epochs_n, features=list(experiment.runtime_features),
            methods=list(experiment.runtime_methods), batch_size=experiment.runtime_batch_size,
            he_budget=experiment.runtime_he_budget, paillier_3072=experiment.runtime_paillier_3072,
            lr=experiment.learning_rate)
    except (KeyboardInterrupt, Exception) as exc:
        # Whatever finished is written (marked partial) before stopping.
        result["partial"] = True
        result["seconds"] = time.perf_counter() - start
        result["machine"]["load_average_end"] = os.getloadavg()
        render(result, out)
        if isinstance(exc, KeyboardInterrupt):
            print(f"{_PROG}: interrupted; the finished cells are in {out}", file=sys.stderr)
            raise SystemExit(130) from None
        raise PartialRunError(out) from exc
    result["seconds"] = time.perf_counter() - start
    result["machine"]["load_average_end"] = os.getloadavg()
    render(result, out)
    return result


def render(result: Dict[str, Any], out: Path) -> None:
    """Write ``results.json``, ``report.md`` and the plots of ``result`` to ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result)
    report = render_report(result)
    (out / "report.md").write_text(report)
    summary = summarize(result["accuracy"]["rows"])
    written = ["results.json", "report.md"]
    if summary:
        plot_accuracy(summary, out / "accuracy_vs_epsilon.png")
        written.append("accuracy_vs_epsilon.png")
        if plot_figure2(summary, out / "figure2.png"):
            written.append("figure2.png")
    if result.get("runtime"):
        if plot_runtime(result["runtime"], result["config"]["runtime_epochs_n"], out / "runtime.png"):
            written.append("runtime.png")
        if plot_tradeoff(summary, result["runtime"], result["config"]["runtime_epochs_n"], out / "tradeoff.png"):
            written.append("tradeoff.png")
    print(report)
    print(f"wrote {out}/: {', '.join(written)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="the [quick] experiment: built-in Breast data, 2 splits x 2 noise draws, small runtime "
                             "grid (about a minute on 2 idle cores); explicit flags below still apply")
    parser.add_argument("--datasets", default=None,
                        help="comma-separated dataset names (default: breast,credit,adult; --quick: breast)")
    parser.add_argument("--data-dir", type=Path, default=None, help="folder with the real datasets (or $VFLSEC_DATA)")
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "glm",
                        help="output directory (default bench-out/glm)")
    parser.add_argument("--seed", type=int, default=None,
                        help="base seed of the DP noise of every cell, an experiment setting so runs reproduce "
                             "(default: the config's, 0; see --os-entropy)")
    parser.add_argument("--network-results", type=Path, default=None, metavar="FILE",
                        help="results.json of a `vflsec bench network --links` run: the runtime verdicts cite its "
                             "ratios over emulated links (default: none)")
    parser.add_argument("--rerender", type=Path, default=None, metavar="DIR",
                        help="run nothing: write DIR's report and plots again from DIR/results.json (with "
                             "--network-results cited, when given)")
    parser.add_argument("--os-entropy", action="store_true",
                        help="draw DP noise from the OS-entropy CSPRNG instead (numbers then vary run to run)")
    parser.add_argument("--split-seeds", type=int, default=None, help="train/test splits per dataset (default 5)")
    parser.add_argument("--noise-draws", type=int, default=None, help="noise draws per DP cell (default 3)")
    parser.add_argument("--he-budget", type=float, default=None,
                        help="seconds per HE runtime cell before extrapolating from measured batches (default 60)")
    parser.add_argument("--he-accuracy-budget", type=float, default=None,
                        help="seconds an HE accuracy cell may take (estimated from one batch, default 900); longer "
                             "ones are skipped and listed, the 'taylor' plaintext reference stands in")
