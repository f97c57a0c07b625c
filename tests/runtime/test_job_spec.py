"""The ``vflsec party`` runtime without a network: job files of each kind,
their digests, the job-kind registry and protocol properties."""
from __future__ import annotations

import pytest

from vflsec.glm.registry import get_protocol
from vflsec.runtime.job_spec import load_job_spec
from vflsec.runtime.kinds import available_job_kinds, get_job_kind
from vflsec.runtime.launch import to_toml

GLM = dict(protocol="plain", lr=0.5, epochs=3, batch_size=16, seed=3, active="active",
           passives=["passive1", "passive2"])


def _write(tmp_path, table, name="job.toml"):
    path = tmp_path / name
    path.write_text(to_toml({"job": table}))
    return path


def test_glm_is_the_default_kind_and_its_digest_ignores_the_kind_key(tmp_path):
    plain = load_job_spec(_write(tmp_path, GLM, "a.toml"))
    named = load_job_spec(_write(tmp_path, {"kind": "glm", **GLM}, "b.toml"))
    assert plain.kind.name == named.kind.name == "glm"
    assert plain.digest == named.digest
    assert plain.row_norm == "clip"
    assert plain.parties == ("active", "passive1", "passive2")
    job = plain.job(n_samples=100, start_epoch=1)
    assert (job.n_samples, job.start_epoch, job.protocol) == (100, 1, "plain")


def test_splitnn_job_file(tmp_path):
    table = dict(kind="splitnn", n_classes=2, epochs=2, batch_size=8, seed=1, passives=["p1"],
                 bottom_hidden=[5], embedding_dim=3, defense={"name": "noise_embedding", "scale": 0.1})
    spec = load_job_spec(_write(tmp_path, table))
    assert spec.kind.name == "splitnn" and spec.row_norm == "none"
    assert spec.parties == ("active", "p1")
    job = spec.job(n_samples=40)
    assert job.passives == ("p1",) and job.steps_per_epoch == 5
    # Same fields under the GLM kind are another job (and not a valid one).
    assert spec.digest != load_job_spec(_write(tmp_path, {**table, "defense": {"name": "none"}},
                                               "other.toml")).digest


@pytest.mark.parametrize("table, message", [
    ({"kind": "nope", **GLM}, "unknown job kind 'nope'"),
    ({"kind": "splitnn", "protocol": "plain"}, "unknown [job] fields ['protocol']"),
    ({"kind": "splitnn", "defense": {"name": "nothing"}}, "[job.defense] name: unknown defense 'nothing'"),
    ({"kind": "splitnn", "defense": {"name": "noise_embedding", "sigma": 1.0}}, "[job.defense] noise_embedding:"),
    ({**GLM, "n_samples": 10}, "must not set 'n_samples'"),
    ({**GLM, "row_norm": "unit"}, "row_norm must be 'clip' or 'none'"),
])
def test_bad_job_files_are_refused(tmp_path, table, message):
    with pytest.raises(ValueError) as info:
        load_job_spec(_write(tmp_path, table))
    assert message in str(info.value)


def test_resume_refusal_is_a_property_of_the_protocol_and_kind():
    # HDP resumes with the repeated releases counted (its privacy ledger, tests/glm/test_hdp_resume.py).
    assert get_protocol("hdp").resume_refusal is None and get_protocol("hdp").resumable
    assert get_protocol("plain").resumable
    glm = get_job_kind("glm")
    assert glm.writes_checkpoints
    assert glm.resume_refusal(glm.make_job(dict(GLM, protocol="hdp"), n_samples=100), {}) is None
    assert glm.resume_refusal(glm.make_job(GLM, n_samples=100), {}) is None
    split = get_job_kind("splitnn")
    assert split.writes_checkpoints
    job = split.make_job({}, n_samples=100)
    assert split.resume_refusal(job, {}) is None
    assert split.resume_refusal(job, {"defense": {"name": "sparsify", "keep_fraction": 0.5}}) is None
    refusal = split.resume_refusal(job, {"defense": {"name": "noise_embedding", "scale": 0.1}})
    assert refusal.startswith("defense 'noise_embedding' cannot resume")
    assert {"glm", "splitnn"} <= set(available_job_kinds())
