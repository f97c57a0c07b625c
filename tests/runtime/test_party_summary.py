"""``vflsec party``: the active party's final summary line (held-out metric, or the
training metric labelled as such with how to get a held-out one; bytes sent and
received; wall time split into connect / PSI / training's compute, crypto and
messaging / evaluation; epsilon) and the held-out evaluation behind it
(``evaluate = true`` in the job file, ``[party] test_data``)."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from vflsec.errors import CommandError
from vflsec.runtime import party as party_mod
from vflsec.runtime.glm_kind import glm_metrics
from vflsec.runtime.job_spec import load_job_spec

NAMES = ("active", "passive1", "passive2")

SUMMARY = {
    "history": {"loss": [0.5, 0.25], "accuracy": [0.8, 0.9]}, "wire_bytes_sent": 1_500_000,
    "wire_bytes_received": 250_000,
    "privacy_spent": "PrivacySpent(epsilon=5.0, delta=1e-05, releases=2, epsilon_per_release=4.1)",
    "program_timings": {"compute": 2.5, "crypto": 4.0, "messaging": 3.5, "total": 10.0},
    "timings": {"connect_and_agree_s": 1.0, "psi_s": 0.5, "train_s": 10.0, "evaluate_s": 0.3, "total_s": 11.9},
}


def test_final_line_with_held_out_metric():
    summary = dict(SUMMARY, evaluation={"metric": "accuracy", "value": 0.875, "n": 114, "baseline": 0.632,
                                        "baseline_name": "majority rate"})
    assert party_mod._final_line("active", summary) == (
        "party 'active' done: held-out accuracy 0.8750 on 114 test rows (majority rate 0.6320), training accuracy "
        "0.9000, training loss 0.2500; sent 1.50 MB, received 0.25 MB; wall time 11.9 s (connect+agree 1.0 s, "
        "PSI 0.5 s, train 10.0 s: compute 2.5 s, crypto 4.0 s, messaging 3.5 s, held-out evaluation 0.3 s); "
        "epsilon 5.00 (delta 1e-05)")


def test_final_line_without_held_out_rows_labels_training_and_says_how():
    line = party_mod._final_line("active", SUMMARY)
    assert "held-out accuracy" not in line
    assert line.startswith("party 'active' done: training accuracy 0.9000, training loss 0.2500 (training rows "
                           "only: for a held-out score set evaluate = true in the job file and [party] test_data")
    assert "compute 2.5 s, crypto 4.0 s, messaging 3.5 s" in line
    assert party_mod._final_line("a", {"privacy_spent": None}).endswith("; no DP")
    undefined = dict(SUMMARY, evaluation={"metric": "R^2", "value": None, "n": 3})
    assert "held-out R^2 n/a on 3 test rows" in party_mod._final_line("a", undefined)


def test_glm_metrics():
    score = np.array([2.0, -1.0, 0.5, -0.5, 3.0])
    from sklearn.metrics import roc_auc_score

    acc = glm_metrics("logistic", score, np.array([1.0, 0.0, 0.0, 0.0, 1.0]))
    assert acc == {"metric": "accuracy", "value": 0.8, "n": 5, "baseline": 0.6, "baseline_name": "majority rate",
                   "auc": roc_auc_score([1, 0, 0, 0, 1], score), "positive_rate": 0.4, "threshold": 0.5}
    assert glm_metrics("svm", score, np.array([1.0, -1.0, 1.0, -1.0, 1.0]))["value"] == 1.0
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert glm_metrics("least_squares", y, y)["value"] == 1.0
    assert glm_metrics("least_squares", np.full(4, y.mean()), y)["value"] == 0.0
    assert math.isclose(glm_metrics("poisson", np.log(y), y)["value"], 1.0)
    assert glm_metrics("least_squares", y, np.ones(4))["value"] is None


def _job_file(tmp_path, extra=""):
    path = tmp_path / f"job{len(extra)}.toml"
    path.write_text('[job]\nprotocol = "plain"\nactive = "a"\npassives = ["b"]\n' + extra)
    return path


def test_job_evaluate_key_is_agreed_by_digest(tmp_path):
    plain = load_job_spec(_job_file(tmp_path))
    off = load_job_spec(_job_file(tmp_path, "evaluate = false\n"))
    on = load_job_spec(_job_file(tmp_path, "evaluate = true\n"))
    assert not plain.evaluate and not off.evaluate and on.evaluate
    assert plain.digest == off.digest != on.digest  # job files from before the key keep their digest
    with pytest.raises(ValueError, match="evaluate must be true or false"):
        load_job_spec(_job_file(tmp_path, 'evaluate = "yes"\n'))


def test_evaluate_job_without_test_data_is_a_config_error(tmp_path):
    (tmp_path / "job.toml").write_text('[job]\nprotocol = "plain"\nactive = "a"\npassives = ["b"]\nevaluate = true\n')
    (tmp_path / "a.csv").write_text("id,y,x\n1,1,0.5\n")
    (tmp_path / "a.toml").write_text('[party]\nname = "a"\nlisten = "127.0.0.1:1"\njob = "job.toml"\n'
                                     'data = "a.csv"\nlabel_column = "y"\n[peers]\nb = "127.0.0.1:2"\n')
    # A mistake in the party's own files: CommandError (one line, exit status 2) before any socket.
    with pytest.raises(CommandError, match=r"evaluate = true: data party 'a' needs its held-out rows as "
                                           r"\[party\] test_data"):
        party_mod.main(str(tmp_path / "a.toml"), insecure=True)
    text = (tmp_path / "a.toml").read_text().replace('label_column = "y"\n',
                                                     'label_column = "y"\ntest_data = "missing.csv"\n')
    (tmp_path / "a.toml").write_text(text)
    with pytest.raises(CommandError, match="held-out data file .*missing.csv does not exist"):
        party_mod.main(str(tmp_path / "a.toml"), insecure=True)


def test_party_data_writes_held_out_files_without_changing_the_training_files(tmp_path):
    from types import SimpleNamespace

    from vflsec.data import load_dataset, vertical_split
    from vflsec.runtime.party_csv import read_party_csv
    from vflsec.runtime.party_data import make_party_frames, run

    args = SimpleNamespace(dataset="breast", parties="10,10,10", names=None, keep=0.95, rows=None, seed=0,
                           data_dir=None, out=str(tmp_path))
    run(args)
    frames = make_party_frames("breast", (10, 10, 10), keep=0.95, seed=0)
    split = vertical_split(load_dataset("breast"), [10, 10, 10], seed=0)
    train_ids = set()
    for p, (name, (ids, X, y, _)) in enumerate(frames.items()):
        got_ids, got_X, got_y, _ = read_party_csv(tmp_path / f"{name}.csv", "id", "y" if p == 0 else None)
        assert got_ids == ids and np.allclose(got_X, X)
        assert (got_y is None) == (y is None) and (y is None or np.array_equal(got_y, y))
        train_ids |= set(ids)
        test_ids, X_test, y_test, _ = read_party_csv(tmp_path / f"{name}-test.csv", "id", "y" if p == 0 else None)
        assert len(test_ids) == len(split.y_test) == 114
        assert not set(test_ids) & train_ids
        order = np.argsort(test_ids)
        if p == 0:
            first = dict(zip(test_ids, X_test))
            assert sorted(y_test) == sorted(split.y_test)
        else:  # same held-out rows under the same IDs at every party, in its own order
            assert set(test_ids) == set(first)
        assert np.allclose(np.sort(X_test[order], axis=0), np.sort(split.X_test[p], axis=0))


# -- whole jobs, one process per party ---------------------------------------------------------------------------
def _frames(n, seed, blocks=(3, 2, 2)):
    rng = np.random.default_rng(seed)
    ids = [f"{'tr' if seed == 0 else 'te'}-{i:05d}" for i in range(n)]
    Xs = [rng.normal(size=(n, b)) for b in blocks]
    y = (Xs[0][:, 0] + Xs[1][:, 0] - Xs[2][:, 1] > 0).astype(np.float64)
    out = {}
    for p, name in enumerate(NAMES):
        order = rng.permutation(n)
        out[name] = ([ids[i] for i in order], Xs[p][order], y[order] if p == 0 else None)
    return out


@pytest.fixture
def run_job_with_held_out_rows(tmp_path, fast_network, run_parties, party_outputs):
    """``run(job, train, test) -> (outputs, the active party's "done:" line)``: one ``vflsec party``
    process per party, every one exiting 0; only the active party prints the summary line."""
    def run(job, train, test):
        from vflsec.runtime.launch import write_local_job

        local = write_local_job(tmp_path, job, train, test_data=test, network=fast_network)
        status = run_parties(local, 120.0)
        return party_outputs(local, status), _done_line(status)

    return run


def _done_line(status):
    done = [line for line in status["active"][1].splitlines() if "party 'active' done:" in line]
    assert len(done) == 1
    assert not any("done:" in status[name][1] for name in NAMES[1:])
    return done[0]


@pytest.mark.network
def test_glm_job_prints_the_held_out_accuracy_of_its_weights(run_job_with_held_out_rows):
    pytest.importorskip("grpc")
    pytest.importorskip("private_set_intersection.python")
    from vflsec.glm.model import GLMDesign

    job = dict(protocol="hdp", loss="logistic", lr=0.5, epochs=3, batch_size=32, seed=3, epsilon=4.0, delta=0.01,
               k=1.0, active="active", passives=["passive1", "passive2"], evaluate=True)
    test = _frames(90, seed=1)
    outputs, line = run_job_with_held_out_rows(job, _frames(200, seed=0), test)
    # The held-out rows scored with the weights each party wrote (aligned by ID, prepared as in training:
    # the model's design, the active party's features within sqrt(1 - c^2)) and the active party's intercept.
    common = sorted(test["active"][0])
    parts = []
    for name in NAMES:
        ids, X, _ = test[name]
        position = {v: i for i, v in enumerate(ids)}
        parts.append(X[[position[c] for c in common]])
    assert outputs["active"]["intercept"] != 0.0 and "intercept" not in outputs["passive1"]
    score = GLMDesign().decision_function(parts, [outputs[name]["coef"] for name in NAMES],
                                          outputs["active"]["intercept"])
    ids, _, y = test["active"]
    labels = y[[ids.index(c) for c in common]] > 0
    expected = float(np.mean((score > 0) == labels))
    evaluation = outputs["active"]["evaluation"]
    assert evaluation["metric"] == "accuracy" and evaluation["n"] == 90
    assert evaluation["value"] == pytest.approx(expected, abs=1e-12)
    assert evaluation["baseline"] == pytest.approx(max(labels.mean(), 1 - labels.mean()))
    assert outputs["passive1"]["evaluation"] is None
    found = re.search(r"done: held-out accuracy ([0-9.]+) on 90 test rows \(majority rate ([0-9.]+)\), AUC "
                      r"([0-9.]+), training "
                      r"accuracy [0-9.]+, training loss [0-9.]+; sent [0-9.]+ MB, received [0-9.]+ MB; wall time "
                      r"[0-9.]+ s \(connect\+agree [0-9.]+ s, PSI [0-9.]+ s, train [0-9.]+ s: compute [0-9.]+ s, "
                      r"crypto [0-9.]+ s, messaging [0-9.]+ s, held-out evaluation [0-9.]+ s\); epsilon ([0-9.]+) "
                      r"\(delta 0\.01, replace-one\)$", line)
    assert found, line
    assert float(found.group(1)) == pytest.approx(expected, abs=5e-5)
    from sklearn.metrics import roc_auc_score

    assert float(found.group(3)) == pytest.approx(roc_auc_score(labels, score), abs=5e-5)
    assert 3.9 < float(found.group(4)) <= 4.0  # the HDP mechanism's guarantee, calibrated to epsilon 4


@pytest.mark.network
def test_split_learning_job_prints_its_held_out_accuracy(run_job_with_held_out_rows):
    pytest.importorskip("grpc")
    pytest.importorskip("private_set_intersection.python")
    pytest.importorskip("torch")
    job = dict(kind="splitnn", task="classification", n_classes=2, epochs=3, batch_size=32, lr=0.02,
               optimizer="adam", seed=4, active="active", passives=["passive1", "passive2"], active_features=True,
               bottom_hidden=[8], embedding_dim=4, evaluate=True,
               defense={"name": "vfl_afe", "t": 10.0, "epsilon": 5.0, "calibration": "analytic"})
    outputs, line = run_job_with_held_out_rows(job, _frames(200, seed=0), _frames(80, seed=1))
    evaluation = outputs["active"]["evaluation"]
    assert evaluation["metric"] == "accuracy" and evaluation["n"] == 80 and 0.0 <= evaluation["value"] <= 1.0
    assert re.search(rf"done: held-out accuracy {evaluation['value']:.4f} on 80 test rows \(majority rate "
                     r"[0-9.]+\), training accuracy [0-9.]+, training loss [0-9.]+; .* messaging [0-9.]+ s, "
                     r"held-out evaluation [0-9.]+ s\); epsilon [0-9.]+ \(delta", line), line
    # the defense's privacy spent describes training (the evaluation's releases are the held-out rows')
    assert outputs["active"]["privacy_spent"].startswith("epsilon ")


def test_a_protocol_that_reveals_no_training_metric_says_so_and_how_to_get_one():
    from vflsec.runtime.party import _metric_text

    text = _metric_text({"history": {}, "evaluation": None})
    assert text.startswith("no metric (the protocol reveals none during training: for a held-out score set "
                           "evaluate = true")


def test_an_mpc_jobs_line_shows_the_engines_bytes_beside_the_channels():
    from vflsec.runtime.party import _final_line

    line = _final_line("active", {"wire_bytes_sent": 2_000_000, "wire_bytes_received": 1_000_000,
                                  "info": {"engine_bytes_in": 3_500_000, "engine_bytes_out": 1_500_000}})
    assert "sent 2.00 MB, received 1.00 MB (the MPC engine's link besides: 3.50 MB in, 1.50 MB out)" in line
    assert "MPC engine" not in _final_line("active", {"wire_bytes_sent": 1, "info": {}})
