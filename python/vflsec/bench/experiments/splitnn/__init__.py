"""``vflsec bench splitnn``: split learning's defenses measured against their papers.

What it measures (the sections a run's ``sections`` names, :mod:`.cells`):

* ``table2`` -- VFL-AFE's Table 2: test accuracy of a centralized model,
  unprotected split learning and VFL-AFE vanilla / +R / +D / full on Adult
  and MNIST halves, beside the paper's numbers and the majority-class rate;
* ``table3`` -- VFL-AFE's Table 3: seconds per training step of each
  component with vflsec's kernels and with the baseline implementation
  (:mod:`.baseline`), and the replaceable parts timed alone;
* ``dp_vfl`` -- DP-VFL (Ranbaduge & Ding): accuracy / MSE against epsilon
  for 3/4/5 data owners, with the non-private and centralized references
  (:mod:`.dp`);
* ``fedpass`` -- FedPass accuracy against its passport settings (:mod:`.dp`);
* ``rescale`` (in no default run) -- Table 2's +R and full models with the
  paper's rescale rule, without its shrink and with the DP factor
  (:mod:`.rescale`).

Outputs (``--out``, default ``bench-out/splitnn``): ``results.json`` (every
accuracy row in ``"accuracy"`` with its ``"section"``; Table 3 in
``"timing"`` and ``"timing_isolated"``), ``report.md`` and the plots
``table2_accuracy.png``, ``table3_timing.png``, ``dp_vfl.png``, ``rescale.png``
(:mod:`.report`, :mod:`.plots`), with the verdicts of the ``[[claims]]`` of
``papers/vfl_afe.toml`` and ``papers/dp_vfl.toml`` (:mod:`.verdicts`) and a
Conclusion (:mod:`.conclusion`).

Modules: :mod:`.grid` (the grid of ``splitnn.toml`` and the Experiment),
:mod:`.papers` (the papers' numbers), :mod:`.data`, :mod:`.afe` (VFL-AFE as
trained here), :mod:`.baseline`, :mod:`.dp`, :mod:`.cells`, :mod:`.rescale`,
:mod:`.verdicts`, :mod:`.conclusion`, :mod:`.plots`, :mod:`.report`.
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
