"""Vertical GLM benchmark: HDP-VFL differential privacy against Paillier, CKKS and secret-sharing MPC.

``vflsec bench glm [--quick] [--config FILE] [--datasets breast,credit,adult] [--seed N | --os-entropy]
[--split-seeds K] [--noise-draws K] [--data-dir DIR] [--network-results FILE] [--out DIR]``
trains vertical logistic regression with every protection on the same splits
and writes ``DIR/results.json``, ``DIR/report.md`` and PNG plots: accuracy
against epsilon beside every reference (majority class, active party alone,
centralized scikit-learn and mini-batch GD, plain VFL, HE-VFL, MPC) like the
HDP-VFL paper's Fig. 1, its Fig. 2 grid, and runtime / bytes against epochs
and n like its Fig. 3; the paper's claims (``papers/hdp_vfl.toml``) are judged
against them.

Modules: :mod:`.grid` (the grid as data: ``glm.toml`` and ``papers/hdp_vfl.toml``,
and the :class:`~vflsec.bench.experiment.Experiment`), :mod:`.cells` (one run's
cells), :mod:`.fits` (splits, vectorized fits, cross-validation), :mod:`.accuracy`
(the accuracy loop), :mod:`.selection` (private hyperparameter selection),
:mod:`.mpc_cells` (the secret-sharing MPC cells, SPU looked up lazily), :mod:`.cpu` (CPU seconds
of a fit), :mod:`.runtime`, :mod:`.report` and :mod:`.plots`.
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
