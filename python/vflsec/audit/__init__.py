"""The privacy auditor (``vflsec audit``): every DP mechanism of the product run
many times on a worst-case pair of neighbouring inputs, with a distinguisher,
an empirical epsilon lower bound and a fitted epsilon beside the epsilon the
product claims.

* :mod:`.statistics` -- Clopper-Pearson lower bounds, the Gaussian-DP fit.
* :mod:`.cases` -- the audit cases, one or more per mechanism of
  :data:`vflsec.dp.MECHANISMS` (each runs the product's own release code).
* :mod:`.runner` -- runs the cases, writes JSON, markdown and a PNG.
"""
