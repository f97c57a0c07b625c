"""``vflsec bench network``: GLM jobs over loopback gRPC (one process per party,
mutual TLS) against the same job in memory, two-party PSI, and (``--links``)
the same jobs over emulated links against a cost model's prediction.

For every method of the grid (plain, hdp, paillier, ckks) the same job (same
aligned rows, seeds, hyper-parameters) runs twice: in one process over the
in-memory hub, and as separate ``vflsec party`` processes over loopback gRPC
with mutual TLS, after private-set-intersection alignment of un-aligned,
shuffled per-party CSVs. Reported per method: wall time of training (slowest
party), of the whole party run (connect, agree, PSI, train) and the in-memory
wall time; payload bytes of the training messages (the in-memory accounting)
and the bytes that crossed gRPC (envelopes + frames, before TLS and HTTP/2
framing); and the largest difference between the two runs' weights. Then
two-party PSI timings (openmined-psi, ECDH P-256) in process, for the grid's
``psi_sizes``.

With ``--links PROFILES`` the link stage follows: each method of the grid's
``[links]`` table as processes over every listed link profile through
user-space relays, beside the cost model's prediction from its in-memory run,
and HDP-VFL's claim that HE-VFL is 2-3x slower than plain VFL judged over the
links (``vflsec/bench/papers/hdp_vfl.toml``).

Outputs (``--out``, default ``bench-out/network``): ``results.json`` (its
``methods``, ``psi`` and ``links*`` keys: ``vflsec bench glm --network-results``
reads the latter), ``report.md``, ``network.png`` and, with ``--links``,
``links.png``.

Modules: :mod:`.grid` (the grid of ``network.toml`` and the experiment),
:mod:`.jobs` (one job in memory and as processes), :mod:`.cells` (the
loopback stage and PSI), :mod:`.links` (the link stage and the model's
calibration), :mod:`.cost_model` (the replay of an in-memory run over a
link), :mod:`.report` and :mod:`.links_report` (the report).
"""
from .grid import EXPERIMENT

__all__ = ["EXPERIMENT"]
