"""One epoch of Paillier-2048 HE-VFL logistic regression for ``vflsec bench
he``, with vflsec's current path and with the old one (:func:`.old_path.old_paillier_path`)."""
from __future__ import annotations

import contextlib
import time
from typing import Any, Dict

import numpy as np

from .grid import HEGrid
from .old_path import old_paillier_path
from .timing import _PROG


def bench_epoch(cfg: HEGrid, seed: int) -> Dict[str, Any]:
    """One epoch of Paillier-2048 HE-VFL logistic regression, in-process (1
    process: CPU time of every party thread), new path vs the old one."""
    from ....data import make_synthetic
    from ....glm import VerticalLogisticRegression
    from ....he import _pool, set_num_processes

    data = make_synthetic(n_samples=cfg.epoch_n, features_per_party=[10, 10], seed=seed)
    parts = [data.X[:, :10], data.X[:, 10:]]
    y = data.y
    previous = _pool._num_processes
    set_num_processes(1)
    runs: Dict[str, Any] = {}
    try:
        for label, ctx in (("vflsec (DJN + Pippenger)", contextlib.nullcontext({})),
                           ("vflsec old path (classic r^n + per-product)", old_paillier_path())):
            with ctx as calls:
                model = VerticalLogisticRegression(protection="paillier", epochs=1, batch_size=cfg.epoch_batch,
                                                   key_bits=2048, seed=seed)
                c0, w0 = time.process_time(), time.perf_counter()
                model.fit(parts, y)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            if label.startswith("vflsec old") and (calls.get("generate_keypair") != 1 or not calls.get("dot")):
                raise RuntimeError(f"{_PROG}: the old-path patch did not take effect ({calls}); "
                                   "vflsec.glm no longer calls vflsec.he.paillier.generate_keypair / "
                                   "EncryptedVector.dot")
            history = model.history_
            runs[label] = {
                "cpu_s": cpu, "wall_s": wall,
                "phases_s": dict(history.get("time", {})),
                "party_time_s": history.get("party_time"),
                "total_bytes": history.get("total_bytes"),
                "n_messages": history.get("n_messages"),
                "coef": [np.asarray(c).tolist() for c in model.coef_],
                "intercept": float(model.intercept_),
                **({"patched_calls": dict(calls)} if calls else {}),
            }
    finally:
        _pool._num_processes = previous
    new, old = runs["vflsec (DJN + Pippenger)"], runs["vflsec old path (classic r^n + per-product)"]
    coef_diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(new["coef"], old["coef"]))
    return {
        "n_samples": cfg.epoch_n, "features_per_party": [10, 10], "batch_size": cfg.epoch_batch,
        "key_bits": 2048, "epochs": 1, "processes": 1, "runs": runs,
        "cpu_ratio_old_over_new": old["cpu_s"] / new["cpu_s"],
        "wall_ratio_old_over_new": old["wall_s"] / new["wall_s"],
        "max_abs_coef_difference": coef_diff,
    }
