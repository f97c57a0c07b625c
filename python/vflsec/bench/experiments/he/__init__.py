"""``vflsec bench he``: Paillier and CKKS throughput against phe and HEU, and one HE-VFL epoch, in one run.

``vflsec bench he [--quick] [--config FILE] [--seed N] [--key-bits 2048,3072] [--out DIR]``
times, for every Paillier key size: encryption, decryption, ciphertext
addition, ciphertext times plaintext with 41-bit (vflsec's 2^40 fixed-point
encoding of |x| < 2) and 53-bit scalars, the encrypted vector-matrix product
X^T [[r]] and re-randomization, for

- vflsec in-process (``processes=1``, CPU time) and with 2 worker processes
  (wall time; their CPU time read from /proc where it can be),
- vflsec's old paths as named baselines: "vflsec classic r^n" (a key without
  the DJN fixed base) and "vflsec per-product" (one exponentiation per matrix
  entry, the product before the Pippenger multi-exponentiation),
- ``phe`` (python-paillier) on the same modulus,
- SecretFlow HEU's ZPaillier and OU (``sf-heu``) where it imports,

then vflsec's CKKS layer (and TenSEAL directly): encryption, the diagonal
vector-matrix product beside the per-column one it replaced ("vflsec CKKS
per-column (old path)", same run and values), serialized and public-context
sizes; and one epoch of Paillier HE-VFL logistic regression with the new and
the old path (CPU time in-process). Every timed result is decrypted (a spot
check) so a broken path cannot be timed. Writes ``DIR/results.json``,
``DIR/report.md`` and ``DIR/he.png``; the report judges the targets of issue 15
(``vflsec/bench/papers/vflsec_targets.toml``) against the run's ratios.

Plaintexts, matrices and the training data come from ``--seed``; keys and the
encryption randomness come from the operating system's CSPRNG by design (a
seeded encryption would be insecure), so rates vary a little run to run while
the plaintext workload is identical.

The grid is data: ``he.toml`` in this folder (:class:`.grid.HEGrid`).
Modules: :mod:`.grid` (the grid and the :class:`~.grid.HEExperiment`),
:mod:`.cells` (the run, section by section), :mod:`.timing` (CPU / wall
measurement and the spot-checked method runner), :mod:`.old_path` (vflsec's old
Paillier paths as baselines), :mod:`.paillier` (Paillier primitives against phe
and HEU), :mod:`.ckks` (CKKS primitives), :mod:`.epoch` (one HE-VFL epoch, new
path against old), :mod:`.report` (the targets judged, the conclusion,
``report.md`` and ``he.png``).
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
