"""``vflsec party`` on the parties' own raw tables (issue 27): a bank's Parquet file and an insurer's CSV
with text categories, missing cells, a date and text labels, preprocessed by each party on its own rows
(``[preprocess]``), trained through real processes; the result equals the in-memory run on the same
preprocessed rows, and every data mistake is one line before any peer is contacted."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from vflsec.data import PartyPreprocessor  # noqa: E402
from vflsec.glm.job import GLMJob, PartyData  # noqa: E402
from vflsec.glm.model import GLMDesign  # noqa: E402
from vflsec.glm.runner import run_job  # noqa: E402
from vflsec.runtime.config import read_toml  # noqa: E402
from vflsec.runtime.launch import to_toml, write_local_job  # noqa: E402

pytestmark = pytest.mark.network


def _raw_tables(n=300, seed=0):
    """A bank (active: labels as text) and an insurer (passive), partly overlapping customers."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{v:05d}" for v in rng.permutation(10 ** 5)[:n]])
    income = rng.normal(50, 15, n)
    region = rng.choice(["north", "south", "east"], n)
    balance = rng.normal(0, 1, n)
    product = rng.choice(["life", "car", "home", None], n)
    opened = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 3000, n), unit="D")
    score = 0.04 * (income - 50) + (region == "north") + balance + rng.normal(0, 0.5, n)
    label = np.where(score > 0.3, "yes", "no")
    income_with_gaps = income.copy()
    income_with_gaps[rng.random(n) < 0.1] = np.nan
    bank_rows = rng.random(n) < 0.9
    insurer_rows = rng.random(n) < 0.9
    bank = pd.DataFrame({"customer": ids, "income": income_with_gaps, "region": region, "label": label})[bank_rows]
    insurer = pd.DataFrame({"customer": ids, "balance": balance, "product": product, "opened": opened})[insurer_rows]
    return bank.sample(frac=1, random_state=1), insurer.sample(frac=1, random_state=2)


def _configure(local, bank, insurer):
    """Point the written job's party files at the raw tables, with [preprocess]."""
    bank.to_parquet(local.directory / "bank.parquet", index=False)
    insurer.to_csv(local.directory / "insurer.csv", index=False)
    for name, data, extra in (("active", "bank.parquet", {"label_column": "label", "positive_label": "yes"}),
                              ("passive1", "insurer.csv", {})):
        body = read_toml(local.configs[name])
        body["party"].update(data=data, id_column="customer", **extra)
        body["party"].pop("label_column", None) if not extra else None
        body["preprocess"] = {"scaling": "zscore_clip"}
        local.configs[name].write_text(to_toml(body))


def _job():
    return dict(protocol="plain", loss="logistic", lr=1.0, epochs=5, batch_size=32, seed=3, active="active",
                passives=["passive1"])


def _placeholder_frames():
    ids = ["a", "b"]
    return {"active": (ids, np.zeros((2, 1)), np.array([0.0, 1.0])), "passive1": (ids, np.zeros((2, 1)), None)}


def test_raw_tables_train_through_processes_like_the_in_memory_run(tmp_path, fast_network, run_parties,
                                                                    party_outputs):
    bank, insurer = _raw_tables()
    local = write_local_job(tmp_path, _job(), _placeholder_frames(), network=fast_network)
    _configure(local, bank, insurer)
    outputs = party_outputs(local, run_parties(local, 120))
    # Each party fitted its preprocessor on its own whole file and saved it beside its output.
    preps = {name: PartyPreprocessor.load(local.outputs[name].with_suffix(".preprocessor.json"))
             for name in ("active", "passive1")}
    frames = {"active": bank, "passive1": insurer}
    for name, frame in frames.items():
        own = PartyPreprocessor(scaling="zscore_clip").fit(frame.drop(columns=["customer", "label"], errors="ignore"))
        np.testing.assert_array_equal(preps[name].transform(frame.drop(columns=["customer", "label"],
                                                                       errors="ignore")),
                                      own.transform(frame.drop(columns=["customer", "label"], errors="ignore")))
    # The in-memory run on the rows PSI aligns (sorted common IDs), preprocessed the same way.
    common = sorted(set(bank["customer"]) & set(insurer["customer"]))
    assert outputs["active"]["n_samples"] == len(common)
    design = GLMDesign(loss="logistic")
    data = {}
    for name, frame in frames.items():
        aligned = frame.set_index("customer").loc[common]
        X = preps[name].transform(aligned.drop(columns=["label"], errors="ignore"))
        role = "active" if name == "active" else "passive"
        y = (aligned["label"].to_numpy() == "yes").astype(float) if role == "active" else None
        data[name] = PartyData(design.block(np.ascontiguousarray(X, dtype=np.float64), role),
                               None if y is None else design.fit_labels(y).encode(y))
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in _job().items()}
    reference = run_job(GLMJob(n_samples=len(common), **fields), data)
    for name in ("active", "passive1"):
        role = "active" if name == "active" else "passive"
        coef, _ = design.split_coef(reference.results[name].coef, role)
        np.testing.assert_allclose(np.array(outputs[name]["coef"]), coef, rtol=0, atol=1e-12)
    # The model learned: the bank's label depends on both parties' columns.
    theta = sum(data[n].X @ reference.results[n].coef for n in data)
    y = data["active"].y
    assert np.mean(np.sign(theta) == y) > 0.8


@pytest.mark.parametrize("mistake, needle", [
    ("duplicate_id", "is also in row"),
    ("label_2", "label"),
    ("no_positive_label", "positive_label"),
    ("unknown_preprocess_key", "[preprocess]"),
])
def test_a_data_mistake_is_one_line_naming_the_file_before_any_peer(tmp_path, fast_network, child_env, mistake,
                                                                    needle):
    bank, insurer = _raw_tables(n=60)
    local = write_local_job(tmp_path, _job(), _placeholder_frames(), network=fast_network)
    if mistake == "duplicate_id":
        bank = pd.concat([bank, bank.iloc[:1]])
    if mistake == "label_2":
        bank["label"] = np.where(bank["label"] == "yes", 1, 0)
        bank.iloc[3, bank.columns.get_loc("label")] = 2
    _configure(local, bank, insurer)
    body = read_toml(local.configs["active"])
    if mistake == "no_positive_label":
        body["party"].pop("positive_label")
    if mistake == "label_2":
        body["party"].pop("positive_label")
    if mistake == "unknown_preprocess_key":
        body["preprocess"]["no_such_option"] = 1
    local.configs["active"].write_text(to_toml(body))
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(local.configs["active"])],
                          capture_output=True, text=True, env={**__import__("os").environ, **child_env}, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "bank.parquet" in lines[0] or mistake == "unknown_preprocess_key"
