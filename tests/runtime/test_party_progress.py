"""``vflsec party`` progress output: whom a party waits for (and for how
long), one line per epoch, the active party's final summary line, and
``privacy_spent`` in every split-learning party's output (VFL-AFE)."""
from __future__ import annotations

import logging
import re
import time

import numpy as np
import pytest

from vflsec.runtime import party as party_mod


def test_waiting_logs_what_and_how_long(caplog):
    caplog.set_level(logging.INFO, logger="vflsec.network")
    with party_mod._waiting("active", "waiting for 'p1' at x:1 to answer", interval=0.05):
        time.sleep(0.18)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "party 'active': waiting for 'p1' at x:1 to answer"
    assert len(lines) >= 3
    assert all(re.fullmatch(r"party 'active': still waiting for 'p1' at x:1 to answer \(\d+ s so far\)", x)
               for x in lines[1:])


def test_final_line():
    summary = {"history": {"loss": [0.5, 0.25], "accuracy": [0.8, 0.9]}, "wire_bytes_sent": 1_500_000,
               "wire_bytes_received": 250_000,
               "privacy_spent": "PrivacySpent(epsilon=5.0, delta=1e-05, releases=2, epsilon_per_release=4.1)",
               "timings": {"connect_and_agree_s": 1.0, "psi_s": 0.5, "train_s": 10.0, "total_s": 11.6}}
    line = party_mod._final_line("active", summary)
    assert line == ("party 'active' done: training accuracy 0.9000, training loss 0.2500 (training rows only: for "
                    "a held-out score set evaluate = true in the job file and [party] test_data in every data "
                    "party's config (vflsec party-data writes <name>-test.csv)); sent 1.50 MB, "
                    "received 0.25 MB; wall time 11.6 s (connect+agree 1.0 s, PSI 0.5 s, train 10.0 s); "
                    "epsilon 5.00 (delta 1e-05)")
    assert party_mod._final_line("a", {"privacy_spent": None}).endswith("; no DP")


def test_glm_hdp_output_has_privacy_spent():
    from vflsec.glm.job import GLMJob
    from vflsec.glm.model import privacy_text as _privacy_spent  # what the GLM kind writes to the output

    base = dict(n_samples=100, active="a", passives=("b",), epsilon=2.0, delta=1e-5)
    job = GLMJob(protocol="hdp", **base)
    # The mechanism's report: at most the calibrated 2.0, close to it.
    text = _privacy_spent(job, "active")
    assert re.fullmatch(r"epsilon 1\.9[0-9]* \(delta 1e-05, replace-one\)", text), text
    resumed = _privacy_spent(job, "passive", releases=2)
    assert "over 2 releases" in resumed and "resumed" in resumed, resumed
    assert _privacy_spent(GLMJob(protocol="plain", **base), "active") is None


pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")
torch = pytest.importorskip("torch")

from vflsec.runtime.launch import write_local_job  # noqa: E402

NAMES = ("active", "passive1", "passive2")
JOB = dict(kind="splitnn", task="classification", n_classes=2, epochs=2, batch_size=30, lr=0.01,
           optimizer="adam", seed=4, active="active", passives=["passive1", "passive2"],
           bottom_hidden=[6], embedding_dim=4,
           defense={"name": "vfl_afe", "t": 10.0, "epsilon": 5.0, "delta": 0.01, "calibration": "analytic"})


def _frames(n=120, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"id-{i:05d}" for i in range(n)]
    p1, p2 = rng.normal(size=(n, 3)).astype(np.float32), rng.normal(size=(n, 2)).astype(np.float32)
    y = (p1[:, 0] + p2[:, 1] > 0).astype(np.float64)
    return {"active": (ids, np.zeros((n, 0)), y), "passive1": (ids, p1, None), "passive2": (ids, p2, None)}


@pytest.mark.network
def test_split_party_progress_summary_and_privacy_spent(tmp_path, fast_network, run_parties, party_outputs):
    local = write_local_job(tmp_path, JOB, _frames(), network=fast_network)
    results = run_parties(local, 120.0)
    outputs = party_outputs(local, results)
    for name in NAMES:
        assert outputs[name]["privacy_spent"] and outputs[name]["privacy_spent"].startswith("epsilon "), name
        # outputs hold model weights: owner-only files (issue 18 item 7)
        out = local.outputs[name]
        assert out.stat().st_mode & 0o777 == 0o600, name
        modules = out.with_name(out.stem + ".modules.npz")
        assert modules.stat().st_mode & 0o777 == 0o600, name
    err = results["active"][1]
    assert "party 'active': waiting for 'passive1' at " in err
    assert "party 'active': waiting for 'passive1', 'passive2' to agree on the job" in err
    assert "party 'passive1': waiting for 'active' to agree on the job" in results["passive1"][1]
    assert len(re.findall(r"party 'active': epoch [12]/2: loss [0-9.]+, accuracy [0-9.]+, [0-9.]+ s", err)) == 2
    assert len(re.findall(r"party 'passive1': epoch [12]/2: [0-9.]+ s", results["passive1"][1])) == 2
    done = [line for line in err.splitlines() if "party 'active' done:" in line]
    assert len(done) == 1
    assert re.search(r"training accuracy [0-9.]+, training loss [0-9.]+ \(training rows only: .*\); sent [0-9.]+ MB, "
                     r"received [0-9.]+ MB; wall time [0-9.]+ s \(connect\+agree [0-9.]+ s, PSI [0-9.]+ s, train "
                     r"[0-9.]+ s: compute [0-9.]+ s, crypto [0-9.]+ s, messaging [0-9.]+ s\); "
                     r"epsilon [0-9.]+ \(delta 0\.01, replace-one\)", done[0])
    assert "done:" not in results["passive1"][1]
