"""HDP-VFL resumes with the repeated releases counted (issue 24, item 1).

Each party writes its privacy ledger (a PLD accountant's state) to its
checkpoint before its first release; a resumed run adds one release of the
party's mechanism, and what the party reports is the accountant's composition
of them all, above the calibrated epsilon. Real party programs over the
in-memory hub, real EpochCheckpoint files."""
from __future__ import annotations

import dataclasses
import json
import stat

import numpy as np
import pytest

from vflsec.dp import make_accountant
from vflsec.dp.accounting import composed_gaussian
from vflsec.federation.checkpoint import EpochCheckpoint
from vflsec.glm import GLMJob, PartyData, PartyError, get_protocol, run_job
from vflsec.glm.hdp import hdp_mechanisms, hdp_privacy_spent, noise_generator
from vflsec.runtime.kinds import get_job_kind

N = 120
FINGERPRINT = "job-and-ids"


class _Interrupted(RuntimeError):
    """Stands for a party dying mid-run."""


def _parts(seed=0):
    rng = np.random.default_rng(seed)
    parts = [rng.normal(size=(N, d)) for d in (3, 2, 2)]
    parts = [X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None] for X in parts]
    y = np.where(parts[0][:, 0] + parts[1][:, 0] - parts[2][:, 1] > 0, 1.0, -1.0)
    return parts, y


def _job(**kw):
    fields = dict(protocol="hdp", n_samples=N, passives=("p1", "p2"), epochs=5, batch_size=30, lr=0.5, k=1.0,
                  epsilon=1.0, delta=1e-5)
    fields.update(kw)
    return GLMJob(**fields)


def _checkpoints(tmp_path, job, fingerprint=FINGERPRINT):
    return {name: EpochCheckpoint(tmp_path / name, name, fingerprint) for name in job.parties}


class _DiesOnSave:
    """An EpochCheckpoint whose party dies when it would save epoch ``at`` or later
    (before writing it): a run interrupted before its first epoch checkpoint."""

    def __init__(self, inner: EpochCheckpoint, at: int):
        self.inner, self.at = inner, at

    def save(self, epoch, coef, history):
        if epoch >= self.at:
            raise _Interrupted(f"died before saving epoch {epoch}")
        self.inner.save(epoch, coef, history)

    def load(self, epoch):
        return self.inner.load(epoch)

    def save_accountant(self, state):
        self.inner.save_accountant(state)

    def load_accountant(self):
        return self.inner.load_accountant()

    def discard_from(self, epoch):
        self.inner.discard_from(epoch)


def _run(job, checkpoints, *, stop_after=None, active_checkpoint=None):
    """run_job with every party on its checkpoint; ``stop_after``: the active party
    dies after finishing (and checkpointing) that epoch."""
    parts, y = _parts()

    def progress(epoch, history):
        if stop_after is not None and epoch >= stop_after:
            raise _Interrupted(f"stopped after epoch {epoch}")

    active = active_checkpoint if active_checkpoint is not None else checkpoints[job.active]
    data = {job.active: PartyData(parts[0], y, checkpoint=active, progress=progress)}
    data.update({name: PartyData(X, checkpoint=checkpoints[name]) for name, X in zip(job.passives, parts[1:])})
    return run_job(job, data, timeout=60)


def _resume_epoch(checkpoints):
    # What `vflsec party --resume` agrees on: one past the last epoch every data party checkpointed.
    return min(c.latest_epoch() for c in checkpoints.values()) + 1


def _ledger(checkpoint):
    accountant = make_accountant("pld")
    accountant.load_state_dict(checkpoint.load_accountant())
    return accountant


def test_a_fresh_run_writes_a_ledger_of_one_release(tmp_path):
    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    out = _run(job, checkpoints)
    mechanisms = hdp_mechanisms(job)
    for name, checkpoint in checkpoints.items():
        role = job.role_of(name)
        ledger = _ledger(checkpoint)
        assert len(ledger) == 1 and ledger.history == [mechanisms[role].accounting()]
        path = checkpoint.accountant_path()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text())["fingerprint"] == FINGERPRINT
        info = out.results[name].info
        # One release: the mechanism's calibrated guarantee, at most the target.
        assert info["releases"] == 1
        assert info["epsilon_spent"] == hdp_privacy_spent(job, role).epsilon == ledger.get_epsilon(job.delta)
        assert 0.98 * job.epsilon < info["epsilon_spent"] <= job.epsilon
    summary = get_job_kind("glm").summary(job, out.results["p1"], None)
    assert summary["privacy_spent"] == str(hdp_privacy_spent(job, "passive")) and "releases" not in \
        summary["privacy_spent"]


def test_a_second_fresh_run_on_the_same_rows_composes_with_the_first_and_warns(tmp_path):
    """Issue 39: the same job run again from epoch 0 on the same rows releases them again; it used to
    report one release and overwrite the ledger."""
    from vflsec.dp.gaussian import PrivacyWarning

    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    first = _run(job, checkpoints)
    with pytest.warns(PrivacyWarning, match=r"this job already ran on these rows \(1 release\(s\)"):
        second = _run(job, checkpoints)
    for name, checkpoint in checkpoints.items():
        role = job.role_of(name)
        assert first.results[name].info["releases"] == 1 and second.results[name].info["releases"] == 2
        assert len(_ledger(checkpoint)) == 2
        assert second.results[name].info["epsilon_spent"] == hdp_privacy_spent(job, role, releases=2).epsilon
        assert second.results[name].info["ledger"] == str(checkpoint.accountant_path())
    # another job's ledger in the same folder is a file of its own: neither overwrites the other
    other = _checkpoints(tmp_path, job, fingerprint="another-job-and-ids")
    _run(dataclasses.replace(job, lr=0.25), other)
    assert all(len(_ledger(c)) == 2 for c in checkpoints.values()) and all(len(_ledger(c)) == 1
                                                                            for c in other.values())
    assert checkpoints["p1"].accountant_path() != other["p1"].accountant_path()


def test_hdp_is_resumable():
    assert get_protocol("hdp").resumable
    glm = get_job_kind("glm")
    assert glm.resume_refusal(glm.make_job(dict(protocol="hdp", passives=["p1"]), n_samples=N), {}) is None


def test_resumes_count_every_run_and_report_the_composed_epsilon(tmp_path):
    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    # Run 1 dies after epoch 1 (the passive parties had already released IRs of epoch 2).
    with pytest.raises(PartyError, match="stopped after epoch 1"):
        _run(job, checkpoints, stop_after=1)
    start = _resume_epoch(checkpoints)
    assert start == 2 and all(len(_ledger(c)) == 1 for c in checkpoints.values())
    # Run 2 resumes at epoch 2 and dies before any party's new checkpoint of the active party: it
    # released IRs but left no epoch checkpoint. Its ledger entry was written before its first release.
    resumed = dataclasses.replace(job, start_epoch=start)
    with pytest.raises(PartyError, match="died before saving epoch 2"):
        _run(resumed, checkpoints, active_checkpoint=_DiesOnSave(checkpoints[job.active], at=2))
    assert _resume_epoch(checkpoints) == 2
    assert all(len(_ledger(c)) == 2 for c in checkpoints.values())
    # Run 3 resumes at epoch 2 again and finishes: three releases counted for every party.
    out = _run(resumed, checkpoints)
    mechanisms = hdp_mechanisms(job)
    for name, checkpoint in checkpoints.items():
        role = job.role_of(name)
        mechanism = mechanisms[role]
        ledger = _ledger(checkpoint)
        assert len(ledger) == 3 and ledger.history[0].count == 3
        info = out.results[name].info
        assert info["releases"] == 3
        # The accountant's composition of the three releases: larger than the calibrated target.
        composed = composed_gaussian(mechanism.noise_multiplier, 3, job.delta, coordinates=mechanism.coordinates)
        assert info["epsilon_spent"] == ledger.get_epsilon(job.delta) == composed.epsilon
        assert info["epsilon_spent"] == mechanism.privacy_spent(count=3).epsilon
        assert info["epsilon_spent"] > 1.5 * job.epsilon > hdp_privacy_spent(job, role).epsilon
        spent = hdp_privacy_spent(job, role, releases=3)
        assert spent.epsilon == info["epsilon_spent"] and "resumed" in spent.caveat
        summary = get_job_kind("glm").summary(resumed, out.results[name], None)
        assert summary["privacy_spent"].startswith(str(spent))
        assert "over 3 releases" in summary["privacy_spent"] and summary["info"]["releases"] == 3


def test_a_resume_without_the_ledger_is_refused(tmp_path):
    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    with pytest.raises(PartyError):
        _run(job, checkpoints, stop_after=1)
    resumed = dataclasses.replace(job, start_epoch=_resume_epoch(checkpoints))
    checkpoints["p2"].accountant_path().unlink()
    with pytest.raises(ValueError, match="party 'p2': resuming protocol 'hdp' at epoch 2: .*no privacy ledger"):
        _run(resumed, checkpoints)
    # A ledger of other data (another fingerprint) is no ledger of this run either.
    foreign = EpochCheckpoint(tmp_path / "p2", "p2", "other-job")
    foreign.save_accountant(make_accountant("pld").state_dict())
    assert checkpoints["p2"].load_accountant() is None
    # Nor is an unreadable one.
    checkpoints["p2"].accountant_path().write_text("{not json")
    assert checkpoints["p2"].load_accountant() is None
    # A checkpoint object without a ledger (an in-memory one) cannot resume hdp.
    with pytest.raises(ValueError, match="party 'p[12]': .*no privacy ledger"):
        parts, y = _parts()
        data = {job.active: PartyData(parts[0], y, checkpoint=checkpoints[job.active])}
        data.update({n: PartyData(X, checkpoint=_EpochsOnly(checkpoints[n])) for n, X in zip(job.passives, parts[1:])})
        run_job(resumed, data, timeout=60)


class _EpochsOnly:
    def __init__(self, inner):
        self.inner = inner

    def save(self, epoch, coef, history):
        self.inner.save(epoch, coef, history)

    def load(self, epoch):
        return self.inner.load(epoch)


def test_a_ledger_of_another_mechanism_is_refused(tmp_path):
    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    with pytest.raises(PartyError):
        _run(job, checkpoints, stop_after=1)
    other = hdp_mechanisms(dataclasses.replace(job, epsilon=4.0))["passive"]
    accountant = make_accountant("pld")
    accountant.step(other.accounting())
    checkpoints["p1"].save_accountant(accountant.state_dict())
    with pytest.raises(ValueError, match="party 'p1': .*another mechanism than this job's 'hdp_passive_ir'"):
        _run(dataclasses.replace(job, start_epoch=_resume_epoch(checkpoints)), checkpoints)
    # A ledger of this job that is not an accountant's state.
    for state in ({"accountant": "rdp", "neighbours": "replace_one", "history": []},
                  {"accountant": "pld", "neighbours": "replace_one", "history": [["x", 1.0, 1, 1]]}):
        checkpoints["p1"].save_accountant(state)
        with pytest.raises(ValueError, match="party 'p1': .*privacy ledger in this party's checkpoint is unusable"):
            _run(dataclasses.replace(job, start_epoch=_resume_epoch(checkpoints)), checkpoints)


def test_without_noise_nothing_is_counted_and_resuming_needs_no_ledger(tmp_path):
    job = _job(noise=False)
    checkpoints = _checkpoints(tmp_path, job)
    with pytest.raises(PartyError):
        _run(job, checkpoints, stop_after=1)
    assert all(c.load_accountant() is None for c in checkpoints.values())
    out = _run(dataclasses.replace(job, start_epoch=_resume_epoch(checkpoints)), checkpoints)
    assert "releases" not in out.results["p1"].info and hdp_privacy_spent(job, "passive") is None
    assert get_job_kind("glm").summary(job, out.results["p1"], None)["privacy_spent"] is None


def test_a_resumed_seeded_run_never_reuses_the_interrupted_runs_noise():
    # The same noise on other values would reveal their difference.
    job = _job(noise_seed=9)
    first = noise_generator(job, "p1").random_raw(8)
    assert np.array_equal(first, noise_generator(job, "p1", 0).random_raw(8))
    assert not np.array_equal(first, noise_generator(job, "p1", 1).random_raw(8))
    assert not np.array_equal(noise_generator(job, "p1", 1).random_raw(8), noise_generator(job, "p1", 2).random_raw(8))


def test_a_resume_discards_the_earlier_runs_later_epochs(tmp_path):
    # Run 1 finished all 5 epochs; suppose it counts as interrupted after epoch 1 (as when the
    # passive parties had got no further). Run 2 resumes at epoch 2 and the active party dies
    # before saving epoch 2: its files of epochs 2-4 are run 1's and must not survive, or the next
    # resume would start it from run 1's state at epoch 4 and the others from run 2's.
    job = _job()
    checkpoints = _checkpoints(tmp_path, job)
    _run(job, checkpoints)
    assert all(c.epochs() == [0, 1, 2, 3, 4] for c in checkpoints.values())
    for name in job.passives:
        checkpoints[name].discard_from(2)
    assert _resume_epoch(checkpoints) == 2
    resumed = dataclasses.replace(job, start_epoch=2)
    with pytest.raises(PartyError, match="died before saving epoch 2"):
        _run(resumed, checkpoints, active_checkpoint=_DiesOnSave(checkpoints[job.active], at=2))
    assert checkpoints[job.active].epochs() == [0, 1]
    assert all(max(c.epochs()) <= 2 for c in checkpoints.values())
    assert _resume_epoch(checkpoints) == 2
    out = _run(resumed, checkpoints)
    assert all(out.results[name].info["releases"] == 3 for name in job.parties)


def test_discard_from_leaves_earlier_epochs_and_other_files(tmp_path):
    checkpoint = EpochCheckpoint(tmp_path, "a", FINGERPRINT)
    other = EpochCheckpoint(tmp_path, "ab", FINGERPRINT)
    for epoch in range(4):
        checkpoint.save(epoch, np.zeros(2), {})
        other.save(epoch, np.zeros(2), {})
    checkpoint.save_accountant(make_accountant("pld").state_dict())
    checkpoint.discard_from(2)
    assert checkpoint.epochs() == [0, 1] and other.epochs() == [0, 1, 2, 3]
    assert checkpoint.load_accountant() is not None
    EpochCheckpoint(tmp_path / "missing", "a", FINGERPRINT).discard_from(0)  # no directory: nothing to do


def test_checkpoint_ledger_round_trip(tmp_path):
    checkpoint = EpochCheckpoint(tmp_path / "ckpt", "a", FINGERPRINT)
    assert checkpoint.load_accountant() is None  # none yet (the directory does not exist)
    accountant = make_accountant("pld")
    accountant.step(hdp_mechanisms(_job())["active"].accounting(2))
    checkpoint.save_accountant(accountant.state_dict())
    assert checkpoint.load_accountant() == json.loads(json.dumps(accountant.state_dict()))
    assert checkpoint.latest_epoch() == -1  # the ledger is not an epoch checkpoint
    restored = make_accountant("pld")
    restored.load_state_dict(checkpoint.load_accountant())
    assert restored.history == accountant.history
