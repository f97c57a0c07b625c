"""Split-learning checkpoints in-process: a run resumed from the checkpoint
after epoch k trains exactly the weights and history of the uninterrupted
run; a defense with state of its own refuses to resume."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.federation.checkpoint import EpochCheckpoint  # noqa: E402
from vflsec.runtime.kinds import get_job_kind  # noqa: E402
from vflsec.runtime.splitnn_kind import build_party_data, module_arrays  # noqa: E402
from vflsec.splitnn.trainer import run_split_job  # noqa: E402

FIELDS = dict(n_classes=2, epochs=4, batch_size=16, lr=0.01, optimizer="adam", seed=2, active="active",
              passives=["p1", "p2"], active_features=True, bottom_hidden=[5], embedding_dim=3, head_hidden=[4])


def _data(n=64):
    rng = np.random.default_rng(1)
    X = {"active": rng.normal(size=(n, 2)), "p1": rng.normal(size=(n, 3)), "p2": rng.normal(size=(n, 2))}
    y = (X["p1"][:, 0] + X["active"][:, 1] > 0).astype(np.float64)
    return X, y


def _run(fields, tmp_path, start_epoch=0):
    kind = get_job_kind("splitnn")
    X, y = _data()
    job = kind.make_job(fields, n_samples=len(y), start_epoch=start_epoch)
    data = {p: build_party_data(job, fields, p, X[p], y if p == "active" else None,
                                EpochCheckpoint(tmp_path, p, "fingerprint"))
            for p in job.parties}
    return run_split_job(job, data)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, optimizer):
    torch.set_num_threads(1)
    fields = dict(FIELDS, optimizer=optimizer)
    full = _run(fields, tmp_path / "full")
    assert EpochCheckpoint(tmp_path / "full", "p1", "fingerprint").epochs() == [0, 1, 2, 3]
    # The first 2 epochs, then a resumed run from their checkpoint.
    _run(dict(fields, epochs=4), tmp_path / "split")
    for path in (tmp_path / "split").glob("*-e0000[23].npz"):
        path.unlink()
    resumed = _run(fields, tmp_path / "split", start_epoch=2)
    for party in ("active", "p1", "p2"):
        expected, got = module_arrays(full.results[party]), module_arrays(resumed.results[party])
        assert set(got) == set(expected)
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{party} {key}")
    for key in ("loss", "accuracy"):
        assert resumed.results["active"].history[key] == full.results["active"].history[key]


def test_stateful_defense_refuses_to_resume(tmp_path):
    fields = dict(FIELDS, epochs=2, defense={"name": "noise_embedding", "scale": 0.1, "seed": 3})
    _run(fields, tmp_path)
    with pytest.raises(ValueError, match="cannot resume"):
        _run(fields, tmp_path, start_epoch=1)
