"""The ``vflsec party`` runtime: one party of a VFL job in its own process.

* :mod:`.party` -- ``run_party`` / ``main``: connect, agree, align, train,
  write the output.
* :mod:`.config` -- the party configuration (``party.toml``).
* :mod:`.job_spec` -- the job description (``job.toml``) and its digest.
* :mod:`.kinds` -- the registry of job kinds; :mod:`.glm_kind` ("glm",
  the default) and :mod:`.splitnn_kind` ("splitnn").
* :mod:`.handshake` -- job-digest and start-epoch agreement.
* :mod:`.party_csv` -- the per-party CSV format.
* :mod:`.launch` -- lay out and start a loopback multi-process job.
* :mod:`.party_data` -- ``vflsec party-data``: per-party CSVs from a dataset.

Layering: the runtime sits on top. It imports :mod:`vflsec.federation`
(gRPC channel, TLS, PSI, checkpoints), :mod:`vflsec.vfl` and, through the
job kinds only, :mod:`vflsec.glm` / :mod:`vflsec.splitnn`; nothing below
imports it. Submodules are imported on use (``vflsec.runtime`` itself pulls
in neither gRPC nor torch).
"""
