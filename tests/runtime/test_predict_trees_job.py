"""``vflsec party`` with ``[job] kind = "predict"`` over a vertical trees model trained with ``kind =
"trees"``: new customers of three parties scored by ID through real processes (the predict job lists the
passive parties in another order than training did) equal the trees walked in one process on the same
aligned rows; the active party's customers a partner lacks are unscored; a passive party learns no score;
a trees model refuses the active-only policy and a predict job of other parties, in one line before any
peer; a tampered tree is refused naming the file."""
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

from vflsec.runtime.config import read_toml  # noqa: E402
from vflsec.runtime.launch import to_toml, write_local_job  # noqa: E402
from vflsec.runtime.party_csv import write_csv  # noqa: E402
from vflsec.trees import FeatureBins  # noqa: E402
from vflsec.trees.tree import LookupTable, Tree, lookup_walker, tree_output  # noqa: E402

pytestmark = pytest.mark.network

NAMES = ("active", "passive1", "passive2")
WIDTHS = {"active": 2, "passive1": 3, "passive2": 2}
JOB = dict(kind="trees", active="active", passives=["passive1", "passive2"], max_iter=5, learning_rate=0.3,
           max_leaf_nodes=6, min_samples_leaf=8, max_bins=16)


def _frames(n, seed, prefix, labels=True):
    """Every party's rows, shuffled, each holding about 85% of the customers; labels 3/7 at the active party."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"{prefix}-{v:06d}" for v in rng.permutation(10 ** 6)[:n]])
    blocks = {name: np.round(rng.normal(size=(n, WIDTHS[name])), 3) for name in NAMES}
    y = np.where(sum(blocks[name][:, 0] for name in NAMES) + 0.5 * rng.normal(size=n) > 0, 7.0, 3.0)
    frames = {}
    for name in NAMES:
        kept = rng.permutation(np.flatnonzero(rng.random(n) < 0.85))
        frames[name] = (ids[kept].tolist(), blocks[name][kept], y[kept] if name == "active" and labels else None)
    return frames


@pytest.fixture(scope="module")
def trained(tmp_path_factory, fast_network, run_parties, party_outputs):
    local = write_local_job(tmp_path_factory.mktemp("predict-trees"), JOB, _frames(240, 0, "c"),
                            network=fast_network)
    return local, party_outputs(local, run_parties(local, 120))


def _predict_job(local, tag, frames, *, missing="none", passives=("passive2", "passive1"), edit=None):
    directory = local.directory
    (directory / f"{tag}-job.toml").write_text(to_toml({"job": {"kind": "predict", "active": "active",
                                                                 "passives": list(passives), "missing": missing}}))
    configs = {}
    for name in NAMES:
        ids, X, _ = frames[name]
        write_csv(directory / f"{tag}-{name}.csv", ids, X)
        body = read_toml(local.configs[name])
        for key in ("label_column", "checkpoint_dir", "test_data"):
            body["party"].pop(key, None)
        body["party"].update(job=f"{tag}-job.toml", data=f"{tag}-{name}.csv", model=f"out/{name}.json",
                             output=f"out/{name}-{tag}.json")
        if edit is not None:
            edit(name, body)
        configs[name] = directory / f"{name}-{tag}.toml"
        configs[name].write_text(to_toml(body))
    return configs


def _reference(outputs, frames, common):
    """The raw scores of the aligned rows ``common``: every party's saved bins and lookup table, the
    active party's trees, walked in one process."""
    tables, codes = [], []
    for name in NAMES:  # the training job's order: the trees' owner positions
        ids, X, _ = frames[name]
        position = {v: i for i, v in enumerate(ids)}
        bins = FeatureBins.from_thresholds(outputs[name]["thresholds"])
        codes.append(bins.transform(X[[position[c] for c in common]]))
        tables.append(LookupTable.from_dict(outputs[name]["lookup"]))
    walk = lookup_walker(tables, codes)
    raw = np.full(len(common), outputs["active"]["baseline"])
    for tree in outputs["active"]["trees"]:
        raw += tree_output(Tree.from_dict(tree), len(common), walk)
    return raw


def test_new_customers_are_scored_by_id_as_the_trees_walked_in_one_process(trained, run_configs):
    local, outputs = trained
    assert all(outputs[name]["lookup"]["feature"] for name in NAMES), "every party should own a split"
    frames = _frames(160, 9, "n", labels=False)
    status = run_configs(_predict_job(local, "month", frames))
    assert all(rc == 0 for rc, _ in status.values()), status
    summary = json.loads((local.directory / "out/active-month.json").read_text())
    with open(summary["scores"], newline="") as fh:
        scores = {row["id"]: row for row in csv.DictReader(fh)}
    common = sorted(set.intersection(*[set(frames[name][0]) for name in NAMES]))
    assert list(scores) == sorted(frames["active"][0])  # one row per customer of the active party's file
    assert summary["counts"] == {"joint": len(common), "active_only": 0,
                                 "missing": len(frames["active"][0]) - len(common)}
    assert summary["counts"]["missing"] > 20 and "split a passive party owns" in summary["privacy_note"]
    raw = _reference(outputs, frames, common)
    for item, value in zip(common, raw):
        row = scores[item]
        assert row["source"] == "joint"
        assert float(row["score"]) == pytest.approx(value, rel=0, abs=1e-12)
        assert float(row["probability"]) == pytest.approx(1 / (1 + np.exp(-value)), rel=0, abs=1e-12)
        assert float(row["prediction"]) == (7.0 if value > 0 else 3.0)
    assert {row["source"] for item, row in scores.items() if item not in set(common)} == {"missing"}
    assert len({round(v, 9) for v in raw}) > 5  # the trees split these rows, not one leaf for all
    for name in NAMES[1:]:
        passive = json.loads((local.directory / f"out/{name}-month.json").read_text())
        assert passive["scored_rows_sent"] == len(common) and "scores" not in passive


@pytest.mark.parametrize("mistake, needle", [
    ("active_only", "a trees model has no active-only model"),
    ("parties", "are not those of the training job"),
    ("tampered", "tree 0 has a node that points outside"),
    ("columns", "bins 2"),
])
def test_a_trees_predict_mistake_is_one_line_before_any_peer(trained, child_env, mistake, needle):
    local, _ = trained
    frames = _frames(60, 3, "m", labels=False)
    if mistake == "tampered":
        saved = json.loads(local.outputs["active"].read_text())
        saved["trees"][0]["left"][0] = 10 ** 6
        (local.directory / "out/active-tampered.json").write_text(json.dumps(saved))
    if mistake == "columns":
        ids, X, y = frames["active"]
        frames["active"] = (ids, np.hstack([X, X[:, :1]]), y)

    def edit(name, body):
        if name == "active" and mistake == "tampered":
            body["party"]["model"] = "out/active-tampered.json"
        if mistake == "parties":  # a predict job without passive2, whose splits the trees need
            body["peers"].pop("passive2", None)

    configs = _predict_job(local, f"bad-{mistake}", frames, missing="active_only" if mistake == "active_only" else
                           "none", passives=("passive1",) if mistake == "parties" else ("passive2", "passive1"),
                           edit=edit)
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(configs["active"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize("party, change, needle", [
    ("passive1", lambda s: s["thresholds"][0].reverse(), "thresholds of feature 0"),
    ("passive1", lambda s: s["thresholds"].clear(), "thresholds is not a list"),
    ("passive1", lambda s: s["lookup"]["code"].__setitem__(0, 99), "which its thresholds do not have"),
    ("passive1", lambda s: s.pop("n_bins"), "does not name the training job's parties"),
    ("passive1", lambda s: s["lookup"]["missing_left"].pop(), "not a lookup table"),
    ("passive1", lambda s: s["lookup"].update(missing_left=[True] * len(s["lookup"]["feature"]),
                                              missing_code=[0] * len(s["lookup"]["feature"])), "missing code"),
    ("active", lambda s: s.update(baseline=float("nan")), "no finite baseline"),
    ("active", lambda s: s.update(classes=[1]), "two label classes"),
    ("active", lambda s: s["trees"][0]["owner"].__setitem__(0, 5), "points outside"),
    ("active", lambda s: s.update(trees=[{**t, "record": [r + 1000 if o == 1 else r for o, r in
                                                          zip(t["owner"], t["record"])]} for t in s["trees"]]),
     "beyond the"),
    ("active", lambda s: s.pop("job_sha256"), "which training run"),
])
def test_a_damaged_trees_model_is_refused_naming_the_file(trained, tmp_path, party, change, needle):
    from vflsec.runtime.predict_kind import load_saved_model

    local, _ = trained
    saved = json.loads(local.outputs[party].read_text())
    change(saved)
    path = tmp_path / f"{party}.json"
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=needle) as error:
        load_saved_model(path, party, "active" if party == "active" else "passive", "none", NAMES)
    assert str(path) in str(error.value)
