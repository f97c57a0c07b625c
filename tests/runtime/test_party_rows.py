"""``vflsec party`` holds its table once (issue 28): the run takes the rows as read over from the
checked start (:meth:`vflsec.runtime.startup.PartyRows.take_features`), so once it has ordered them the
table as read is freed instead of staying alive beside them for the whole run."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

pytest.importorskip("grpc")

from vflsec.runtime.launch import write_local_job  # noqa: E402
from vflsec.runtime.startup import prepare_party  # noqa: E402


def test_the_run_takes_the_table_over_from_the_checked_start(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"id{i:03d}" for i in range(40)]
    frames = {"active": (ids, rng.standard_normal((40, 3)), (np.arange(40) % 2).astype(float)),
              "passive1": (ids, rng.standard_normal((40, 2)), None)}
    job = dict(protocol="hdp", loss="logistic", lr=0.5, epochs=1, batch_size=8, seed=1, epsilon=1.0,
               active="active", passives=["passive1"])
    local = write_local_job(tmp_path, job, frames, insecure=True)
    for name, (_, X, _) in frames.items():
        start = prepare_party(local.configs[name], insecure=True)
        assert start.rows is not None
        table = start.rows.take_features()
        np.testing.assert_array_equal(table, X)
        assert start.rows.X.shape == (0, X.shape[1]) and len(start.rows.ids) == 40
        alive = weakref.ref(table)
        del table
        gc.collect()
        assert alive() is None, "something beside the run still holds the table as read"
