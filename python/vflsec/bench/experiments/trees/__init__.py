"""``vflsec bench trees``: vertical gradient-boosted trees (issue 29), plain, SecureBoost, DP and
label-DP, beside the centralized and single-party boosters on the same bins, with the passive
party's label-leakage attack on every variant.

``vflsec bench trees [--quick] [--config FILE] [--seed N] [--datasets breast,credit,adult]
[--split-seeds K] [--max-iter N] [--secureboost-trees K] [--epsilons 0.5,1,...] [--dp-protections
dp,label_dp] [--data-dir DIR] [--out DIR]`` runs, per dataset and train/test split:

- the references: the majority class, scikit-learn's ``HistGradientBoostingClassifier`` on both
  parties' bin codes (centralized), on the active party's alone and on the passive party's alone,
  with the vertical models' hyper-parameters;
- ``VerticalGradientBoostingClassifier`` with protection "plain" (accuracy, seconds and bytes per
  tree), "secureboost" on a few trees (its trees are plain's, checked: seconds and bytes per
  tree, by step), "dp" and "label_dp" at every epsilon of the grid (accuracy, the epsilon spent);
- on every variant, the passive party's label-leakage attack (:mod:`vflsec.attacks.tree_leakage`)
  on a transcript of the party programs, beside what its own features tell it.

A dataset whose files are not found (``--data-dir``, ``$VFLSEC_DATA``, ``../shared/datasets``) is
reported as skipped with the fix. Writes ``results.json``, ``report.md``, ``accuracy_vs_epsilon.png``,
``secureboost_time.png`` and ``leakage.png``; the report judges issue 29's targets
(``papers/vflsec_targets.toml``, ``trees.*``), answers per dataset at which epsilon each DP variant
beats the active party alone, what SecureBoost costs over plain, and how much the attack gains on
each variant, and ends with a conclusion.

Modules: :mod:`.grid` (the grid, ``trees.toml``, and the experiment), :mod:`.data` (datasets,
parties, splits), :mod:`.cells` (the run and the reference rows), :mod:`.vertical` (the vertical
rows and the attack), :mod:`.answers` (summaries, targets, answers, conclusion), :mod:`.report`
(``report.md`` and the figures).
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
