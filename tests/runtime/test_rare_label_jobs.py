"""``vflsec party`` GLM jobs on a rare label (issue 37, item 2): ``class_weight`` and ``threshold`` in
``[job]``, refused before any connection by a protocol that cannot honour them; the summary line with
ROC AUC and PR AUC beside accuracy and the majority rate; and, end to end through real processes on
a 6%-positive credit table split between a bank and an insurer, a balanced model whose predict job
gives both classes, by the label's own names, with the AUC of scikit-learn's balanced
LogisticRegression on the same rows."""
from __future__ import annotations

import csv
import json
import time

import numpy as np
import pytest

from vflsec.glm.model import LabelEncoding
from vflsec.runtime import party as party_mod
from vflsec.runtime.glm_kind import GLMJobKind, GLMPartyInput, glm_metrics
from vflsec.runtime.job_spec import load_job_spec

JOB = '[job]\nprotocol = "{protocol}"\nactive = "a"\npassives = ["b"]\n'


def _spec(tmp_path, protocol="plain", extra=""):
    path = tmp_path / "job.toml"
    path.write_text(JOB.format(protocol=protocol) + extra)
    return load_job_spec(path)


def _checked(spec):
    probe = spec.probe_job()
    spec.kind.check_job(probe, spec.fields)
    spec.kind.check_evaluation(probe, spec.fields, spec.evaluate)
    return probe


def test_class_weight_and_threshold_are_job_keys_agreed_by_digest(tmp_path):
    plain = _spec(tmp_path)
    balanced = _spec(tmp_path, extra='class_weight = "balanced"\nthreshold = 0.3\n')
    assert balanced.digest != plain.digest
    assert _checked(balanced).weighted and not _checked(plain).weighted
    table = _spec(tmp_path, extra='[job.class_weight]\n"0" = 1.0\n"1" = 9.0\n')
    assert _checked(table).weighted


@pytest.mark.parametrize("protocol, extra, match", [
    ("hdp", 'class_weight = "balanced"\n', "protocol 'hdp' cannot take class_weight: its DP sensitivity bounds "
                                           "assume every row weighs 1"),
    ("plain", 'class_weight = "even"\n', "class_weight must be"),
    ("plain", '[job.class_weight]\nyes = 2.0\n', "class_weight names the label 'yes'"),
    ("plain", 'threshold = 1.5\n', r"threshold must be a probability in \(0, 1\)"),
    ("plain", 'threshold = "f1:0.5"\n', "threshold must be a probability such as 0.3, or"),
    ("plain", 'threshold = "recall:0.5"\n', "is chosen on the held-out rows, but the job has no held-out "
                                            "evaluation -- set evaluate = true"),
    ("plain", 'threshold = 0.3\nloss = "svm"\n', "threshold needs loss 'logistic'"),
    ("plain", 'class_weight = "balanced"\nloss = "least_squares"\n', "class_weight needs a classification loss"),
])
def test_weights_and_thresholds_a_job_cannot_honour_are_refused_before_it_starts(tmp_path, protocol, extra, match):
    with pytest.raises(ValueError, match=match):
        _checked(_spec(tmp_path, protocol, extra))


@pytest.mark.network
@pytest.mark.parametrize("protocol, extra, what", [
    ("hdp", {"class_weight": "balanced"}, "protocol 'hdp' cannot take class_weight: its DP sensitivity bounds"),
    ("plain", {"threshold": "precision:0.3"}, "but the job has no held-out evaluation -- set evaluate = true"),
])
def test_the_cli_refuses_such_a_job_file_in_one_line_with_exit_2(tmp_path, capsys, protocol, extra, what):
    pytest.importorskip("grpc")
    from vflsec import cli
    from vflsec.runtime.launch import write_local_job

    rng = np.random.default_rng(0)
    ids = [f"c{i}" for i in range(40)]
    frames = {"a": (ids, rng.standard_normal((40, 2)), (rng.random(40) < 0.2).astype(float)),
              "b": (ids, rng.standard_normal((40, 2)), None)}
    job = dict(protocol=protocol, active="a", passives=["b"], lr=0.5, epochs=1, batch_size=8, **extra)
    local = write_local_job(tmp_path, job, frames, insecure=True)
    with pytest.raises(SystemExit) as info:
        cli.main(["party", "--insecure", "--config", str(local.configs["a"])])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("vflsec party: error: ") and what in err[0] and " -- " in err[0]


def test_a_chosen_threshold_with_evaluate_is_accepted(tmp_path):
    _checked(_spec(tmp_path, extra='threshold = "recall:0.5"\nevaluate = true\n'))


class _Channel:
    """The active party's end of the held-out evaluation: one passive party's scores."""

    name = "a"

    def __init__(self, passive_scores):
        self.passive_scores = passive_scores

    def recv(self, sender, tag):
        return self.passive_scores


def test_a_threshold_chosen_on_the_held_out_rows_is_written_into_the_model(tmp_path):
    spec = _spec(tmp_path, extra='threshold = "recall:0.75"\nevaluate = true\n')
    kind = GLMJobKind()
    rng = np.random.default_rng(5)
    y_train = (rng.random(200) < 0.1).astype(float)
    job = spec.job(n_samples=200)
    data = kind.party_data(job, spec.fields, "a", np.zeros((200, 2)), y_train, None)
    assert isinstance(data, GLMPartyInput) and data.threshold_rule == ("recall", 0.75)
    output = {"label_encoding": None}
    data.output = output
    held_out = (rng.random(300) < 0.08).astype(float)
    score = rng.standard_normal(300) + 1.5 * held_out
    result = type("Result", (), {"coef": np.zeros(3)})()
    # The active party's own part X @ coef is zero: the held-out scores are the passive party's.
    metrics = kind.evaluate(_Channel(score), job, "active", result, np.zeros((300, 3)), held_out, data)
    chosen = metrics["threshold_choice"]
    predicted = 1 / (1 + np.exp(-score)) > chosen["threshold"]
    recall = (predicted & (held_out == 1)).sum() / held_out.sum()
    assert recall >= 0.75 and chosen["recall"] == pytest.approx(recall) and chosen["reached"]
    assert metrics["threshold"] == chosen["threshold"] == output["threshold"] == data.labels.threshold
    assert output["label_encoding"]["threshold"] == chosen["threshold"]
    assert metrics["value"] == pytest.approx(np.mean(predicted == (held_out == 1)))
    line = party_mod._final_line("a", {"evaluation": metrics, "privacy_spent": None})
    assert f"threshold {chosen['threshold']:.4g} chosen on these rows for recall:0.75 (precision " in line


def test_the_summary_line_shows_auc_and_pr_auc_beside_accuracy_for_a_rare_label():
    from sklearn.metrics import average_precision_score, roc_auc_score

    labels = LabelEncoding.fit("logistic", np.array([0.0, 1.0]))
    rng = np.random.default_rng(2)
    y = (rng.random(1000) < 0.06).astype(float)
    score = rng.standard_normal(1000) + y - 3.0

    metrics = glm_metrics("logistic", score, y, labels)
    line = party_mod._final_line("a", {"evaluation": metrics, "privacy_spent": None})
    assert (f"held-out accuracy {metrics['value']:.4f} on 1000 test rows (majority rate {1 - y.mean():.4f}), AUC "
            f"{roc_auc_score(y, score):.4f}, PR-AUC {average_precision_score(y, score):.4f} ({y.mean():.1%} "
            "positives)") in line
    common = glm_metrics("logistic", score, (score > -3).astype(float), labels)
    assert "PR-AUC" not in party_mod._final_line("a", {"evaluation": common})
    trees = {"metric": "accuracy", "value": 0.9, "n": 10, "baseline": 0.9, "baseline_name": "majority rate",
             "auc": 0.75, "positive_rate": 0.1, "pr_auc": 0.3}
    assert "(majority rate 0.9000), AUC 0.7500, PR-AUC 0.3000 (10.0% positives)" in party_mod._final_line(
        "a", {"evaluation": trees})


# ---------------------------------------------------------------------------- end to end
def _rare_credit_table(data_dir, positive_rate=0.06, n_negative=4000, seed=0):
    """Credit default (Taiwan) with its positives subsampled to ``positive_rate``, split between a bank
    (12 columns) and an insurer (11) by ``vflsec.data.vertical_split`` (80/20, stratified), as
    tests/glm/test_rare_labels.py builds it: ``(train blocks, y_train, held-out blocks, y_test)``."""
    import dataclasses

    from vflsec.data import load_credit, vertical_split

    data = load_credit(data_dir=data_dir)
    rng = np.random.default_rng(seed)
    positives, negatives = np.flatnonzero(data.y == 1), np.flatnonzero(data.y == 0)
    n_positive = round(positive_rate * n_negative / (1 - positive_rate))
    keep = np.sort(np.concatenate([rng.choice(negatives, n_negative, replace=False),
                                   rng.choice(positives, n_positive, replace=False)]))
    split = vertical_split(dataclasses.replace(data, X=data.X[keep], y=data.y[keep]), [12, 11], seed=seed)
    return split.X_train, split.y_train, split.X_test, split.y_test


@pytest.mark.slow
@pytest.mark.network
def test_a_balanced_glm_job_on_a_6_percent_table_predicts_both_classes_by_name(
        tmp_path, shared_datasets, fast_network, run_parties, party_outputs, run_configs):
    """Train (plain, class_weight = "balanced", held-out evaluation) through real processes on a 6%-positive
    credit table: a bank with 12 columns and text labels "Yes"/"No" (Parquet), an insurer with 11 (CSV); then
    a predict job on the held-out customers. The scores' prediction takes both classes, by name, and their AUC
    is within 0.01 of scikit-learn's LogisticRegression(class_weight="balanced") fitted on the same rows as
    each party's saved preprocessor prepares them."""
    pytest.importorskip("grpc")
    pytest.importorskip("private_set_intersection.python")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import average_precision_score, roc_auc_score

    from vflsec.data import PartyPreprocessor
    from vflsec.runtime.config import read_toml
    from vflsec.runtime.launch import to_toml, write_local_job

    train, y_train, test, y_test = _rare_credit_table(shared_datasets)
    columns = [[f"a{j}" for j in range(train[0].shape[1])], [f"b{j}" for j in range(train[1].shape[1])]]

    def tables(blocks, y, prefix):
        ids = [f"{prefix}{i:05d}" for i in range(len(y))]
        bank = pd.DataFrame(blocks[0], columns=columns[0]).assign(id=ids, bought=np.where(y == 1, "Yes", "No"))
        insurer = pd.DataFrame(blocks[1], columns=columns[1]).assign(id=ids)
        return bank, insurer

    bank, insurer = tables(train, y_train, "C")
    bank_test, insurer_test = tables(test, y_test, "T")
    placeholder = {"active": (["x", "y"], np.zeros((2, 1)), np.array([0.0, 1.0])),
                   "passive1": (["x", "y"], np.zeros((2, 1)), None)}
    job = dict(protocol="plain", loss="logistic", lr=2.5, epochs=10, batch_size=len(y_train) // 16, k=5.0, seed=0,
               active="active", passives=["passive1"], class_weight="balanced", evaluate=True)
    local = write_local_job(tmp_path, job, placeholder, network=fast_network)
    bank.to_parquet(tmp_path / "bank.parquet", index=False)
    bank_test.to_parquet(tmp_path / "bank-test.parquet", index=False)
    insurer.to_csv(tmp_path / "insurer.csv", index=False)
    insurer_test.to_csv(tmp_path / "insurer-test.csv", index=False)
    for name, data, test_data, extra in (
            ("active", "bank.parquet", "bank-test.parquet", {"label_column": "bought", "positive_label": "Yes"}),
            ("passive1", "insurer.csv", "insurer-test.csv", {})):
        body = read_toml(local.configs[name])
        body["party"].update(data=data, test_data=test_data, id_column="id", **extra)
        if not extra:
            body["party"].pop("label_column", None)
        body["preprocess"] = {"scaling": "zscore_clip"}
        local.configs[name].write_text(to_toml(body))
    started = time.monotonic()
    status = run_parties(local, 300)
    outputs = party_outputs(local, status)
    training_s = time.monotonic() - started
    active = outputs["active"]
    assert active["label_names"] == ["No", "Yes"] and active["class_weight"]["positive"] > 5
    evaluation = active["evaluation"]
    done = [line for line in status["active"][1].splitlines() if "party 'active' done:" in line][0]
    assert (f"AUC {evaluation['auc']:.4f}, PR-AUC {evaluation['pr_auc']:.4f} ({evaluation['positive_rate']:.1%} "
            "positives)") in done

    # Next month: the held-out customers scored by a predict job with the saved models.
    (tmp_path / "predict-job.toml").write_text(to_toml({"job": {"kind": "predict", "active": "active",
                                                                "passives": ["passive1"]}}))
    bank_test.drop(columns=["bought"]).to_csv(tmp_path / "bank-next.csv", index=False)
    configs = {}
    for name, data in (("active", "bank-next.csv"), ("passive1", "insurer-test.csv")):
        body = read_toml(local.configs[name])
        for key in ("label_column", "positive_label", "checkpoint_dir", "test_data"):
            body["party"].pop(key, None)
        body.pop("preprocess", None)
        body["party"].update(job="predict-job.toml", data=data, model=f"out/{name}.json",
                             output=f"out/{name}-next.json")
        configs[name] = tmp_path / f"{name}-next.toml"
        configs[name].write_text(to_toml(body))
    status = run_configs(configs, timeout=300)
    assert all(rc == 0 for rc, _ in status.values()), status
    summary = json.loads((tmp_path / "out" / "active-next.json").read_text())
    with open(summary["scores"], newline="") as fh:
        rows = {row["id"]: row for row in csv.DictReader(fh)}
    truth = dict(zip(bank_test["id"], y_test))
    assert len(rows) == len(truth) and all(row["source"] == "joint" for row in rows.values())
    predictions = [row["prediction"] for row in rows.values()]
    assert set(predictions) == {"Yes", "No"}  # not the majority class for everyone, and by the label's names
    score = np.array([float(row["score"]) for row in rows.values()])
    labels = np.array([truth[item] for item in rows])
    auc = roc_auc_score(labels, score)

    # scikit-learn on the same rows, as each party's saved preprocessor prepares them.
    preps = {n: PartyPreprocessor.load(local.outputs[n].with_suffix(".preprocessor.json")) for n in local.outputs
             if n in ("active", "passive1")}
    joined = np.hstack([preps["active"].transform(bank.drop(columns=["id", "bought"])),
                        preps["passive1"].transform(insurer.drop(columns=["id"]))])
    joined_test = np.hstack([preps["active"].transform(bank_test.drop(columns=["id", "bought"])),
                             preps["passive1"].transform(insurer_test.drop(columns=["id"]))])
    sklearn = LogisticRegression(class_weight="balanced", max_iter=5000).fit(joined, y_train)
    reference = roc_auc_score(y_test, sklearn.decision_function(joined_test))
    assert abs(auc - reference) < 0.01, (auc, reference)
    assert evaluation["auc"] == pytest.approx(auc, abs=1e-9)
    assert evaluation["pr_auc"] == pytest.approx(average_precision_score(labels, score), abs=1e-9)
    print(f"\nAUC {auc:.4f} vs scikit-learn balanced {reference:.4f}; training job {training_s:.1f} s")
