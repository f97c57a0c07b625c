"""Vertical gradient-boosted trees (issue 29): each party bins its own columns, the active
party grows the trees from per-bin gradient sums, a split's threshold stays with its owner.

* :mod:`.binning` -- a party's quantile bins (``FeatureBins``).
* :mod:`.histogram` -- per-bin gradient sums, subtraction, the best split.
* :mod:`.tree` -- the tree structure and each party's lookup table.
* :mod:`.job`, :mod:`.protocol` -- the job and the party programs over a Channel;
  :mod:`.bounds` -- what each party checks of a peer's message before using it.
* :mod:`.protection` -- how gradients reach the passive parties ("plain"; SecureBoost in
  :mod:`.secureboost`; the label-DP "dp" and "label_dp" in :mod:`.dp`).
* :mod:`.prediction` -- prediction across parties: each passive party's split masks.
* :mod:`.estimator` -- ``VerticalGradientBoostingClassifier``.
"""
from .binning import FeatureBins
from .estimator import VerticalGradientBoostingClassifier
from .job import PROTECTIONS, TreeJob, TreePartyData, TreePartyResult

__all__ = ["PROTECTIONS", "FeatureBins", "TreeJob", "TreePartyData", "TreePartyResult",
           "VerticalGradientBoostingClassifier"]
