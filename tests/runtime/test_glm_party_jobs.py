"""Multi-process GLM jobs over loopback gRPC with mutual TLS: each party is a
``python -m vflsec party`` process; results must equal the in-memory run."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.glm.job import GLMJob, PartyData  # noqa: E402
from vflsec.glm.model import GLMDesign  # noqa: E402
from vflsec.glm.runner import run_job  # noqa: E402
from vflsec.runtime.launch import write_local_job  # noqa: E402

pytestmark = pytest.mark.network

NAMES = ("active", "passive1", "passive2")


def _frames(n=240, seed=0, keep=0.9):
    """Three parties' rows: shuffled, each missing a random tenth."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"cust-{v:06d}" for v in rng.permutation(10 ** 6)[:n]])
    blocks = [rng.normal(size=(n, 3)), rng.normal(size=(n, 2)), rng.normal(size=(n, 2))]
    y = (rng.random(n) < 0.4).astype(np.float64)
    frames = {}
    for p, name in enumerate(NAMES):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < keep))
        frames[name] = (ids[kept].tolist(), blocks[p][kept], y[kept] if p == 0 else None)
    return frames


def _in_memory(job_table, frames):
    """The job in one process on the aligned rows, each party's block and the labels built by the
    model's design (vflsec.glm.model, the job file's defaults: intercept, row_norm "clip")."""
    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    design = GLMDesign(loss=job_table["loss"])
    data = {}
    for name, (ids, X, y) in frames.items():
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        role = "active" if name == job_table["active"] else "passive"
        data[name] = PartyData(design.block(X[order], role),
                               None if y is None else design.fit_labels(y[order]).encode(y[order]))
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in job_table.items()}
    return run_job(GLMJob(n_samples=len(common), **fields), data), len(common)


def _assert_same_model(outputs, reference, job_table, exact=True):
    """Every party's written weights (features; the active party's intercept) are the in-memory run's."""
    design = GLMDesign(loss=job_table["loss"])
    for name in NAMES:
        role = "active" if name == job_table["active"] else "passive"
        coef, intercept = design.split_coef(reference.results[name].coef, role)
        if exact:
            np.testing.assert_array_equal(np.array(outputs[name]["coef"]), coef)
        else:
            np.testing.assert_allclose(np.array(outputs[name]["coef"]), coef, rtol=0, atol=1e-12)
        if role == "active":
            assert outputs[name]["intercept"] == pytest.approx(intercept, rel=0 if exact else 1e-9, abs=0)


@pytest.fixture
def run_glm_job(tmp_path, fast_network, run_parties, party_outputs):
    """``run_glm_job(job_table, frames, timeout=90.0) -> (local job, outputs)``: one
    ``vflsec party`` process per party, every one exiting 0."""
    def run(job_table, frames, timeout=90.0):
        local = write_local_job(tmp_path, job_table, frames, network=fast_network)
        return local, party_outputs(local, run_parties(local, timeout))

    return run


def _job(protocol, **extra):
    job = dict(protocol=protocol, loss="logistic", lr=0.5, epochs=3, batch_size=16, seed=3,
               active="active", passives=["passive1", "passive2"])
    job.update(extra)
    return job


@pytest.mark.parametrize("protocol", ["plain", "hdp"])
def test_three_processes_match_in_memory(run_glm_job, protocol):
    frames = _frames()
    # A fixed noise seed makes the HDP run reproducible: then it must match bit for bit too.
    job = _job(protocol, noise_seed=11) if protocol == "hdp" else _job(protocol)
    _, outputs = run_glm_job(job, frames)
    reference, n_common = _in_memory(job, frames)
    for name in NAMES:
        assert outputs[name]["n_samples"] == n_common
    _assert_same_model(outputs, reference, job)
    assert outputs["active"]["history"]["loss"] == reference.results["active"].history["loss"]
    # Bytes of the training messages equal the in-memory hub's accounting.
    ir_bytes = sum(outputs[n]["bytes_sent_by_tag"].get(t, 0) for n in NAMES for t in ("ir_active", "ir_passive"))
    assert ir_bytes == reference.hub.bytes_by_tag()["ir_active"] + reference.hub.bytes_by_tag()["ir_passive"]


SHARD_ROWS = 40


def _shard_folders(local):
    return sorted(local.directory.rglob("vflsec-shards-*"))


@pytest.mark.parametrize("protocol", ["plain", "hdp"])
def test_sharded_processes_match_in_memory_and_remove_their_shards(run_glm_job, protocol):
    # Issue 28: with shard_rows every data party writes its aligned rows once as Parquet shards, drops its table
    # and streams the shards per batch; the model is the in-memory run's with the same (shard-local) schedule.
    frames = _frames()
    job = _job(protocol, shard_rows=SHARD_ROWS, **({"noise_seed": 11} if protocol == "hdp" else {}))
    local, outputs = run_glm_job(job, frames)
    reference, n_common = _in_memory(job, frames)
    _assert_same_model(outputs, reference, job)
    assert outputs["active"]["history"]["loss"] == reference.results["active"].history["loss"]
    # The shard-local schedule is not the global permutation: without shard_rows the model differs.
    unsharded, _ = _in_memory({k: v for k, v in job.items() if k != "shard_rows"}, frames)
    assert unsharded.results["active"].coef.tobytes() != reference.results["active"].coef.tobytes()
    files = -(-n_common // SHARD_ROWS)
    checks = 3 if protocol == "hdp" else 2  # passes before training: finite values, labels, HDP's row norms
    for name in NAMES:
        shards = outputs[name]["shards"]
        assert shards["shard_rows"] == SHARD_ROWS and shards["files"] == files == 5  # the last one shorter
        assert shards["max_resident"] == 2, name  # a batch reaches the next shard, never a third one
        # Every shard read once per epoch (the first of an epoch may still be held from the one before).
        assert job["epochs"] * (files - 1) <= shards["loads"] <= (job["epochs"] + checks) * files, (name, shards)
        assert "shards_kept_in" not in outputs[name]
    assert _shard_folders(local) == [] and list(local.directory.rglob("*.parquet")) == []


def test_kept_shards_hold_the_aligned_rows_as_float64_columns(tmp_path, fast_network, run_parties, party_outputs):
    import pyarrow.parquet as pq

    from vflsec.glm.reference import fit_logistic_reference

    frames = _frames(n=120)
    # With the held-out evaluation and the active-only model, which read the block whole after training.
    job = _job("plain", shard_rows=SHARD_ROWS, epochs=1, evaluate=True, active_only_model=True)
    test_frames = {name: ([f"test-{i}" for i in range(30)], X[:30], None if y is None else y[:30])
                   for name, (_, X, y) in frames.items()}
    local = write_local_job(tmp_path, job, frames, network=fast_network, test_data=test_frames)
    for name in ("active", "passive1"):
        config = local.configs[name]
        config.write_text(config.read_text().replace("[party]\n", f'[party]\nshard_dir = "kept/{name}"\n'
                                                                   "keep_shards = true\n", 1))
    outputs = party_outputs(local, run_parties(local, 90))
    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    for name in ("active", "passive1"):
        folder = Path(outputs[name]["shards_kept_in"])
        assert folder.parent == tmp_path / "kept" / name and folder.name.startswith(f"vflsec-shards-{name}-")
        assert folder.stat().st_mode & 0o777 == 0o700  # the party's rows: its own folder, no one else's
        ids, X, y = frames[name]
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        tables = [pq.read_table(path) for path in sorted(folder.glob("*.parquet"))]
        assert [t.num_rows for t in tables] == [min(SHARD_ROWS, len(common) - first)
                                                for first in range(0, len(common), SHARD_ROWS)]
        assert len(tables) >= 2
        assert all(str(field.type) == "double" for t in tables for field in t.schema)
        stored = np.vstack([np.column_stack([t.column(f"x{j}").to_numpy() for j in range(X.shape[1])])
                            for t in tables])
        assert stored.tobytes() == X[order].tobytes()  # the aligned order, every value as it was
        if name == "active":  # the labels as the loss takes them ({-1, +1}), beside the features
            labels = np.concatenate([t.column("label").to_numpy() for t in tables])
            np.testing.assert_array_equal(labels, np.where(y[order] == 1.0, 1.0, -1.0))
        else:
            assert all("label" not in t.column_names for t in tables)
    # passive2 kept nothing: its shards went with its run
    assert [p.parent.name for p in _shard_folders(local)] == ["active", "passive1"]
    assert outputs["active"]["evaluation"]["n"] == 30 and outputs["active"]["evaluation"]["metric"] == "accuracy"
    # The active-only model: fitted on the active party's aligned features (read whole from its shards).
    ids, X, y = frames["active"]
    position = {v: i for i, v in enumerate(ids)}
    order = [position[c] for c in common]
    block = GLMDesign(loss="logistic").block(X[order], "active")
    coef, intercept = fit_logistic_reference(block[:, :-1], np.where(y[order] == 1.0, 1.0, -1.0), lam=0.001,
                                             penalty="l2", mu=1.0, fit_intercept=True)
    fallback = outputs["active"]["active_only_model"]
    assert fallback["n"] == len(common) and fallback["coef"] == [float(v) for v in coef]
    assert fallback["intercept"] == float(intercept)


def test_a_failed_sharded_run_removes_its_shards_and_resume_reproduces_the_model(killed_job, run_parties,
                                                                                 party_outputs):
    frames = _frames(n=200)
    job = _job("plain", epochs=40, batch_size=20, shard_rows=SHARD_ROWS)
    local, status, _ = killed_job(job, frames)
    for name, (rc, err) in status.items():
        assert rc == 1 and "'passive2'" in err, (name, err)
    # The parties that failed removed their shards; passive2, killed outright, could not (documented).
    assert [p.parent.name for p in _shard_folders(local)] == ["out"]
    assert _shard_folders(local)[0].name.startswith("vflsec-shards-passive2-")
    outputs = party_outputs(local, run_parties(local, 90, resume=True))
    assert outputs["active"]["start_epoch"] >= 2
    reference, _ = _in_memory(job, frames)
    _assert_same_model(outputs, reference, job)
    assert len(_shard_folders(local)) == 1  # the resumed run removed its own


@pytest.mark.filterwarnings("ignore::vflsec.he.WeakKeyWarning")  # 2048 bits on purpose: speed
def test_paillier_four_processes_match_in_memory(run_glm_job):
    frames = _frames(n=60)
    job = _job("paillier", coordinator="coordinator", key_bits=2048, epochs=1, batch_size=20)
    _, outputs = run_glm_job(job, frames, timeout=120.0)
    reference, _ = _in_memory(job, frames)
    _assert_same_model(outputs, reference, job, exact=False)
    assert outputs["coordinator"]["coef"] is None


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::vflsec.he.WeakKeyWarning")  # 2048 bits on purpose: speed
def test_paillier_dp_four_processes_match_in_memory_and_report_the_guarantee(run_glm_job):
    # HE-VFL with a DP model (vflsec.glm.he_dp) under `vflsec party`: the key holder's seeded noise
    # makes the run reproducible; the masks differ between runs, so the rounding to the noise
    # lattice (below sigma 2^-21 per value) leaves the weights equal to about 1e-9, not bit for bit.
    import dataclasses

    from vflsec.glm.model import privacy_text

    frames = _frames(n=60)
    job = _job("paillier_dp", coordinator="coordinator", key_bits=2048, epochs=2, batch_size=20, k=2.0,
               epsilon=5.0, delta=1e-5, noise_seed=7)
    _, outputs = run_glm_job(job, frames, timeout=120.0)
    reference, n_common = _in_memory(job, frames)
    design = GLMDesign(loss=job["loss"])
    for name in NAMES:
        role = "active" if name == job["active"] else "passive"
        coef, _ = design.split_coef(reference.results[name].coef, role)
        np.testing.assert_allclose(np.array(outputs[name]["coef"]), coef, rtol=0, atol=1e-6)
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in job.items()}
    agreed = dataclasses.replace(GLMJob(n_samples=n_common, **fields),
                                 widths={"active": 4, "passive1": 2, "passive2": 2})  # + the intercept column
    text = privacy_text(agreed, "active")
    assert text is not None and text.startswith("epsilon 4.9") and "colluding with the key holder" in text
    assert all(outputs[name]["privacy_spent"] == text for name in NAMES)
    assert outputs["coordinator"]["privacy_spent"] is None and outputs["coordinator"]["coef"] is None


def test_killed_passive_stops_others_and_resume_reproduces_model(killed_job, fast_network, run_parties,
                                                                  party_outputs):
    frames = _frames(n=200)
    job = _job("plain", epochs=40, batch_size=20)
    local, status, elapsed = killed_job(job, frames)
    for name, (rc, err) in status.items():
        assert rc == 1, f"{name} should fail after passive2 died (rc={rc}):\n{err}"
        assert "vflsec party " + name + ": error:" in err
        assert "'passive2'" in err, err
    assert elapsed < fast_network["peer_timeout"] + 6

    outputs = party_outputs(local, run_parties(local, 90, resume=True))
    assert outputs["active"]["start_epoch"] >= 2
    reference, _ = _in_memory(job, frames)
    _assert_same_model(outputs, reference, job)
    assert outputs["active"]["history"]["loss"] == reference.results["active"].history["loss"]


def test_killed_hdp_job_resumes_with_the_repeated_releases_counted(tmp_path, killed_job, run_parties, party_outputs):
    # Issue 24: --resume of an HDP job is no longer refused; every data party's privacy ledger
    # (checkpoint_dir/<party>-accountant-<fingerprint>.json) counts the interrupted run's releases, and each
    # party reports the composition of both runs' releases, above the calibrated epsilon.
    from vflsec.dp.accounting import composed_gaussian
    from vflsec.glm.hdp import hdp_mechanisms

    frames = _frames(n=200)
    job = _job("hdp", epochs=40, batch_size=20, lr=0.2, epsilon=2.0, delta=1e-5)
    local, _, _ = killed_job(job, frames)
    for name in NAMES:
        (path,) = (tmp_path / "checkpoints" / name).glob(f"{name}-accountant-*.json")
        ledger = json.loads(path.read_text())
        assert [entry[3] for entry in ledger["accountant"]["history"]] == [1], name

    outputs = party_outputs(local, run_parties(local, 90, resume=True))
    assert outputs["active"]["start_epoch"] >= 2
    glm_job = GLMJob(n_samples=outputs["active"]["n_samples"],
                     **{k: tuple(v) if isinstance(v, list) else v for k, v in job.items()})
    for name in NAMES:
        mechanism = hdp_mechanisms(glm_job)[glm_job.role_of(name)]
        composed = composed_gaussian(mechanism.noise_multiplier, 2, 1e-5, coordinates=mechanism.coordinates).epsilon
        info = outputs[name]["info"]
        assert info["releases"] == 2 and info["epsilon_spent"] == composed > 2.0
        assert "over 2 releases" in outputs[name]["privacy_spent"] and f"{composed:.4g}" in outputs[name][
            "privacy_spent"], outputs[name]["privacy_spent"]


def test_a_second_fresh_run_of_an_hdp_job_composes_with_the_first(tmp_path, fast_network, run_parties,
                                                                  party_outputs):
    """Issue 39: running the same job on the same rows again releases them again; the ledger counts it."""
    frames = _frames(n=120)
    job = _job("hdp", epochs=3, batch_size=20, lr=0.2, epsilon=2.0, delta=1e-5)
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    first = party_outputs(local, run_parties(local, 90))
    status = run_parties(local, 90)
    second = party_outputs(local, status)
    for name in NAMES:
        assert first[name]["info"]["releases"] == 1 and second[name]["info"]["releases"] == 2
        assert second[name]["info"]["epsilon_spent"] > first[name]["info"]["epsilon_spent"]
        assert "over 2 releases" in second[name]["privacy_spent"]
        ledger = second[name]["info"]["ledger"]
        assert ledger == first[name]["info"]["ledger"] and f"{name}-accountant-" in ledger
        assert "this job already ran on these rows (1 release(s)" in status[name][1]


def test_resume_with_nothing_to_resume_is_refused(tmp_path, fast_network, run_parties):
    """Issue 39: --resume with an empty checkpoint_dir used to retrain from epoch 0 (and, for HDP, count one
    release): now every party stops with the line naming the data parties that hold nothing."""
    frames = _frames(n=80)
    local = write_local_job(tmp_path, _job("hdp", epochs=2, batch_size=20, lr=0.2, epsilon=2.0, delta=1e-5),
                            frames, network=fast_network)
    status = run_parties(local, 60, resume=True)
    for name, (rc, err) in status.items():
        assert rc != 0, err
        assert "holds no checkpointed epoch of this job on these rows" in err or \
            "hold no checkpointed epoch of this job on these rows" in err, (name, err)
        assert "nothing to resume -- start the job without --resume" in err
    assert not list((tmp_path / "checkpoints").glob("*/*-accountant-*.json"))  # nothing was released


def test_mismatched_job_description_is_refused(tmp_path, fast_network, run_parties):
    frames = _frames(n=80)
    local = write_local_job(tmp_path, _job("plain"), frames, network=fast_network)
    text = local.job_file.read_text()
    other = tmp_path / "job-other.toml"
    other.write_text(text.replace("lr = 0.5", "lr = 0.25"))
    config = local.configs["passive2"]
    config.write_text(config.read_text().replace('job = "job.toml"', f'job = "{other.name}"'))
    status = run_parties(local, 60)
    for _name, (rc, err) in status.items():  # one line with the fix at every party (issue 37)
        assert rc == 2, err
        assert err.rstrip().splitlines()[-1].startswith("vflsec party: error: "), err
        assert "-- use the same job.toml (and the same --job overrides) on every party" in err
    assert (f"the job file of party 'passive2' differs from this party's {local.job_file} in [job] lr (here 0.5)"
            in status["active"][1])
    assert (f"this party's job file {other} differs from the leader's (party 'active') in [job] lr (here 0.25)"
            in status["passive2"][1])
    assert "the job file of party 'passive2' differs from the leader's (party 'active') in [job] lr --" in status[
        "passive1"][1]
