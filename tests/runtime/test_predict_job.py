"""``vflsec party`` with ``[job] kind = "predict"`` (issue 27, item 3): next month's customers of a bank
and an insurer scored by ID through real processes with the models and preprocessors the parties saved
when they trained; the scores equal the in-process reference :func:`vflsec.glm.score_by_id`, both
missing-ID policies do what they say, and a wrong model or config stops before any row is aligned."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from vflsec.data import PartyPreprocessor  # noqa: E402
from vflsec.glm import score_by_id  # noqa: E402
from vflsec.glm.persistence import decode_design  # noqa: E402
from vflsec.runtime.config import read_toml  # noqa: E402
from vflsec.runtime.launch import to_toml, write_local_job  # noqa: E402

pytestmark = pytest.mark.network

ID = "customer"


def _customers(ids, rng):
    n = len(ids)
    income = rng.normal(50, 15, n)
    region = rng.choice(["north", "south", "east"], n)
    balance = rng.normal(0, 1, n)
    product = rng.choice(["life", "car", "home", None], n)
    opened = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 3000, n), unit="D")
    score = 0.04 * (income - 50) + (region == "north") + balance + rng.normal(0, 0.5, n)
    label = np.where(score > 0.3, "yes", "no")
    income[rng.random(n) < 0.1] = np.nan
    bank = pd.DataFrame({ID: ids, "income": income, "region": region, "label": label})
    insurer = pd.DataFrame({ID: ids, "balance": balance, "product": product, "opened": opened})
    return bank, insurer


def _tables(n, seed, prefix):
    """Both parties' rows of ``n`` customers; each party holds about 85% of them, in its own order."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"{prefix}{v:05d}" for v in rng.permutation(10 ** 5)[:n]])
    bank, insurer = _customers(ids, rng)
    bank, insurer = bank[rng.random(n) < 0.85], insurer[rng.random(n) < 0.85]
    return bank.sample(frac=1, random_state=1), insurer.sample(frac=1, random_state=2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, fast_network, run_parties, party_outputs):
    """A plain logistic job trained on the raw tables with an active-only model beside it."""
    directory = tmp_path_factory.mktemp("predict")
    bank, insurer = _tables(400, 0, "c")
    ids = ["a", "b"]
    placeholder = {"active": (ids, np.zeros((2, 1)), np.array([0.0, 1.0])), "passive1": (ids, np.zeros((2, 1)), None)}
    job = dict(protocol="plain", loss="logistic", lr=1.0, epochs=5, batch_size=32, seed=3, active="active",
               passives=["passive1"], active_only_model=True)
    local = write_local_job(directory, job, placeholder, network=fast_network)
    bank.to_parquet(directory / "bank.parquet", index=False)
    insurer.to_csv(directory / "insurer.csv", index=False)
    for name, data, extra in (("active", "bank.parquet", {"label_column": "label", "positive_label": "yes"}),
                              ("passive1", "insurer.csv", {})):
        body = read_toml(local.configs[name])
        body["party"].update(data=data, id_column=ID, **extra)
        if not extra:
            body["party"].pop("label_column", None)
        body["preprocess"] = {"scaling": "zscore_clip"}
        local.configs[name].write_text(to_toml(body))
    outputs = party_outputs(local, run_parties(local, 120))
    return local, outputs


def _predict_job(local, tag, missing, new_bank, new_insurer, *, edit=None):
    """Party files of a predict job over the trained parties' models (``edit(name, body)`` changes one)."""
    directory = local.directory
    (directory / f"{tag}-job.toml").write_text(to_toml({"job": {"kind": "predict", "active": "active",
                                                                 "passives": ["passive1"], "missing": missing}}))
    new_bank.to_csv(directory / f"{tag}-bank.csv", index=False)
    new_insurer.to_parquet(directory / f"{tag}-insurer.parquet", index=False)
    configs = {}
    for name, data in (("active", f"{tag}-bank.csv"), ("passive1", f"{tag}-insurer.parquet")):
        body = read_toml(local.configs[name])
        for key in ("label_column", "positive_label", "checkpoint_dir"):
            body["party"].pop(key, None)
        body.pop("preprocess", None)
        body["party"].update(job=f"{tag}-job.toml", data=data, model=f"out/{name}.json",
                             output=f"out/{name}-{tag}.json")
        if edit is not None:
            edit(name, body)
        configs[name] = directory / f"{name}-{tag}.toml"
        configs[name].write_text(to_toml(body))
    return configs


class _SavedGLM:
    """The parties' saved blocks as the in-process reference takes a model."""

    def __init__(self, outputs, fallback=False):
        self.design = decode_design(outputs["active"]["design"])
        if fallback:
            model = outputs["active"]["active_only_model"]
            self.coef, self.intercept = [np.array(model["coef"])], model["intercept"]
        else:
            self.coef = [np.array(outputs[n]["coef"]) for n in ("active", "passive1")]
            self.intercept = outputs["active"]["intercept"]
        self.classes_ = np.array(["no", "yes"])  # the bank's label column, coded by positive_label = "yes"

    def decision_function(self, blocks):
        return self.design.decision_function(blocks, self.coef, self.intercept)


def _read_scores(path):
    with open(path, newline="") as fh:
        return {row["id"]: row for row in csv.DictReader(fh)}


def _next_month():
    bank, insurer = _tables(300, 7, "n")
    return bank.drop(columns=["label"]), insurer


@pytest.mark.parametrize("missing", ["active_only", "none"])
def test_next_months_customers_are_scored_by_id_as_the_in_process_reference(trained, run_configs, missing):
    local, outputs = trained
    assert "active_only_model" in outputs["active"] and "design" in outputs["passive1"]
    bank, insurer = _next_month()
    configs = _predict_job(local, f"month-{missing}", missing, bank, insurer)
    status = run_configs(configs)
    assert all(rc == 0 for rc, _ in status.values()), status
    summary = json.loads((local.directory / f"out/active-month-{missing}.json").read_text())
    scores = _read_scores(summary["scores"])
    preps = {n: PartyPreprocessor.load(local.outputs[n].with_suffix(".preprocessor.json")) for n in ("active",
                                                                                                     "passive1")}
    expected = score_by_id(_SavedGLM(outputs), {"active": bank, "passive1": insurer}, id_column=ID,
                           preprocessors=preps, missing=missing,
                           fallback=_SavedGLM(outputs, fallback=True) if missing == "active_only" else None)
    # One row per customer of the bank's file, sorted by ID; none of the insurer's own customers.
    assert list(scores) == list(expected.index) == sorted(bank[ID])
    common = set(bank[ID]) & set(insurer[ID])
    assert summary["counts"]["joint"] == len(common) == summary["n_samples"]
    rest = len(bank) - len(common)
    assert rest > 20
    assert summary["counts"]["active_only" if missing == "active_only" else "missing"] == rest
    for item, row in scores.items():
        want = expected.loc[item]
        assert row["source"] == want["source"]
        if want["source"] == "missing":
            assert row["score"] == row["probability"] == row["prediction"] == ""
            continue
        assert float(row["score"]) == pytest.approx(want["score"], rel=0, abs=1e-12)
        assert float(row["probability"]) == pytest.approx(want["probability"], rel=0, abs=1e-12)
        assert row["prediction"] == want["prediction"]  # the label's own names
    # The joint scores use the insurer's columns: they differ from the active-only model's.
    joint = [item for item in scores if scores[item]["source"] == "joint"]
    own = bank.set_index(ID).loc[joint]
    alone = _SavedGLM(outputs, fallback=True).decision_function([preps["active"].transform(own)])
    gap = np.abs(np.array([float(scores[i]["score"]) for i in joint]) - alone)
    assert np.median(gap) > 0.05
    # The passive party sent one partial score per aligned row and learned no score.
    passive = json.loads((local.directory / f"out/passive1-month-{missing}.json").read_text())
    assert passive["scored_rows_sent"] == len(common) and "scores" not in passive


def test_a_model_from_another_training_run_stops_the_job_naming_the_party(trained, run_configs):
    local, _ = trained
    bank, insurer = _next_month()
    other = local.directory / "out/passive1-other.json"
    saved = json.loads(local.outputs["passive1"].read_text())
    saved["ids_sha256"] = "0" * 64
    other.write_text(json.dumps(saved))
    configs = _predict_job(local, "other", "none", bank, insurer,
                           edit=lambda name, body: body["party"].update(model="out/passive1-other.json")
                           if name == "passive1" else None)
    status = run_configs(configs)
    assert status["active"][0] == 2 and status["passive1"][0] == 2, status  # one line with the fix (issue 37)
    job, ids = saved["job_sha256"][:12], json.loads(local.outputs["active"].read_text())["ids_sha256"][:12]
    runs = (f"party 'passive1' holds a model of the same job file trained on other rows (another run): its run is "
            f"job {job}..., aligned IDs 000000000000..., this party's is job {job}..., aligned IDs {ids}...")
    fix = ("-- give every party's [party] model its output of one training run (the outputs' job_sha256 and "
           "ids_sha256 must match)")
    assert status["active"][1].rstrip().splitlines()[-1].startswith(f"vflsec party: error: {runs}")
    assert status["active"][1].rstrip().endswith(fix)
    assert status["passive1"][1].rstrip().splitlines()[-1] == (f"vflsec party: error: peer party 'active' stopped "
                                                               f"the job: {runs} {fix}")
    assert not (local.directory / "out/active-other.scores.csv").exists()


@pytest.mark.parametrize("mistake, needle", [
    ("no_model", "needs [party] model"),
    ("label_column", "reads no labels"),
    ("preprocess", "remove [preprocess]"),
    ("fallback_missing", "holds no active-only model"),
    ("columns", "lacks the feature column(s) ['region']"),
    ("predict_at_active", "[predict] sets what a passive party answers in predict jobs; the active party answers"),
])
def test_a_predict_config_mistake_is_one_line_before_any_peer(trained, child_env, mistake, needle):
    local, _ = trained
    bank, insurer = _next_month()
    missing = "active_only" if mistake == "fallback_missing" else "none"
    if mistake == "fallback_missing":
        saved = json.loads(local.outputs["active"].read_text())
        saved.pop("active_only_model")
        (local.directory / "out/active-nofallback.json").write_text(json.dumps(saved))

    def edit(name, body):
        if name != "active":
            return
        if mistake == "no_model":
            body["party"].pop("model")
        if mistake == "label_column":
            body["party"]["label_column"] = "income"
        if mistake == "preprocess":
            body["preprocess"] = {"scaling": "zscore_clip"}
        if mistake == "fallback_missing":
            body["party"]["model"] = "out/active-nofallback.json"
        if mistake == "predict_at_active":
            body["predict"] = {"max_jobs": 3}
    if mistake == "columns":
        bank = bank.drop(columns=["region"])
    configs = _predict_job(local, f"bad-{mistake}", missing, bank, insurer, edit=edit)
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(configs["active"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def _with_budget(budget):
    def edit(name, body):
        if name == "passive1":
            body["predict"] = dict(budget)
    return edit


def test_a_predict_job_past_the_passive_partys_budget_is_refused_before_any_score_leaves(trained, run_configs):
    """Issue 39: the passive party answers within its [predict] budget, counted in a ledger beside its model."""
    local, _ = trained
    bank, insurer = _next_month()
    common = len(set(bank[ID]) & set(insurer[ID]))
    ledger = local.directory / "out/passive1.json.predict-ledger.jsonl"
    ledger.unlink(missing_ok=True)
    configs = _predict_job(local, "over", "none", bank, insurer, edit=_with_budget({"max_ids_per_job": 10}))
    status = run_configs(configs)
    what = f"passive party 'passive1' refuses to score: the job asks for {common} customers, more than [predict] " \
           "max_ids_per_job = 10"
    assert status["passive1"][0] == 2 and what in status["passive1"][1].rstrip().splitlines()[-1], status
    assert status["active"][0] == 2 and status["active"][1].rstrip().splitlines()[-1].startswith(
        f"vflsec party: error: peer party 'passive1' stopped the job: {what}"), status["active"][1]
    assert not (local.directory / "out/active-over.scores.csv").exists() and not ledger.exists()

    # within the budget: answered, counted, named in the summary; the same customers again within the window: refused
    budget = {"max_ids_per_job": common, "max_jobs": 5, "max_scores": 10 * common, "repeat_window_days": 1.0}
    configs = _predict_job(local, "within", "none", bank, insurer, edit=_with_budget(budget))
    status = run_configs(configs)
    assert all(rc == 0 for rc, _ in status.values()), status
    passive = json.loads((local.directory / "out/passive1-within.json").read_text())
    released = passive["released"]
    assert released["customers"] == common and released["what"] == "partial scores x_p . w_p"
    assert released["ledger"] == str(ledger) and released["left"] == {"jobs": 4, "scores": 9 * common}
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(entries) == 1 and entries[0]["ids"] == common and len(entries[0]["id_digests"]) == common
    assert oct(ledger.stat().st_mode & 0o777) == "0o600"
    configs = _predict_job(local, "again", "none", bank, insurer, edit=_with_budget(budget))
    status = run_configs(configs)
    assert status["passive1"][0] == 2 and (f"{common} of the job's {common} customers were answered less than "
                                           "[predict] repeat_window_days = 1 ago") in status["passive1"][1]
    assert len(ledger.read_text().splitlines()) == 1
    ledger.unlink()


@pytest.mark.parametrize("budget, needle", [
    ({"max_jobs": 0}, "[predict] max_jobs must be an integer >= 1 (a budget is finite), got 0"),
    ({"max_scores": float("inf")}, "[predict] max_scores must be an integer >= 1"),
    ({"repeat_window_days": -1}, "[predict] repeat_window_days must be a number of days >= 0"),
    ({"max_idz": 5}, "unknown [predict] keys ['max_idz']"),
])
def test_a_predict_budget_mistake_is_one_line_before_any_peer(trained, child_env, budget, needle):
    local, _ = trained
    bank, insurer = _next_month()
    configs = _predict_job(local, "badbudget", "none", bank, insurer, edit=_with_budget(budget))
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(configs["passive1"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr


def test_a_training_job_refuses_a_model_and_a_fallback_for_another_loss(tmp_path, fast_network, child_env):
    ids = [f"u{i}" for i in range(40)]
    rng = np.random.default_rng(0)
    frames = {"active": (ids, rng.normal(size=(40, 2)), rng.normal(size=40)),
              "passive1": (ids, rng.normal(size=(40, 2)), None)}
    job = dict(protocol="plain", loss="least_squares", epochs=1, batch_size=8, active="active",
               passives=["passive1"], active_only_model=True)
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(local.configs["active"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=60)
    assert proc.returncode == 2 and "active_only_model = true needs loss 'logistic'" in proc.stderr, proc.stderr
    job.update(loss="logistic", active_only_model=False)
    frames["active"] = (ids, frames["active"][1], (frames["active"][2] > 0).astype(float))
    local = write_local_job(tmp_path / "b", job, frames, network=fast_network)
    body = read_toml(local.configs["active"])
    body["party"]["model"] = "out/active.json"
    local.configs["active"].write_text(to_toml(body))
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(local.configs["active"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=60)
    assert proc.returncode == 2 and "[party] model is set but a glm job trains" in proc.stderr, proc.stderr
