"""The job agreement of ``vflsec party`` when the parties' job files differ (issue 37, item 5), without a
network: each key's digest changes exactly with that key, and every party -- the one whose file differs,
the leader and a party whose file is the leader's -- stops with one line naming the keys that differ,
values shown only where they are the party's own, and the fix."""
from __future__ import annotations

import threading

import pytest

from vflsec.errors import CommandError
from vflsec.federation.channel import InMemoryHub
from vflsec.runtime.handshake import TAG_HELLO, agree_on_job
from vflsec.runtime.job_spec import load_job_spec
from vflsec.runtime.launch import to_toml

GLM = dict(protocol="plain", loss="logistic", lr=0.5, epochs=3, batch_size=16, seed=3, active="active",
           passives=["passive1", "passive2"], options={"clip": 1.0})


def _spec(tmp_path, name, **changes):
    table = {**GLM, **changes}
    table = {k: v for k, v in table.items() if v is not None}
    path = tmp_path / f"{name}.toml"
    path.write_text(to_toml({"job": table}))
    return load_job_spec(path)


def test_a_key_digest_changes_with_its_key_only(tmp_path):
    base = _spec(tmp_path, "base").key_digests()
    assert {"kind", "row_norm", "evaluate", "lr", "passives", "options.clip"} <= set(base)
    for name, changes, differ in [("lr", dict(lr=0.25), {"lr"}), ("sub", dict(options={"clip": 2.0}), {"options.clip"}),
                                  ("two", dict(epochs=4, seed=5), {"epochs", "seed"}),
                                  ("gone", dict(options=None), {"options.clip"}),
                                  ("type", dict(lr=1), {"lr"})]:
        other = _spec(tmp_path, name, **changes).key_digests()
        assert {k for k in set(base) | set(other) if base.get(k) != other.get(k)} == differ, name
    # the runner keys as they apply: row_norm written as its default is the same key
    assert _spec(tmp_path, "norm", row_norm="clip").key_digests() == base
    # no value in the clear
    assert not any("0.5" in v or "logistic" in v for v in base.values())


class _Endpoint:
    """An in-memory endpoint with the session calls of the gRPC channel (no-ops here)."""

    def __init__(self, endpoint):
        self._endpoint = endpoint
        self.name = endpoint.name

    def send(self, *args):
        self._endpoint.send(*args)

    def recv(self, *args, **kwargs):
        return self._endpoint.recv(*args, **kwargs)

    def accept_session(self, session):
        pass

    def begin_session(self, session):
        pass


def _agree(specs):
    hub = InMemoryHub(default_timeout=30)
    errors = {}

    def party(name):
        try:
            agree_on_job(_Endpoint(hub.endpoint(name)), specs[name], "active", ["passive1", "passive2"], 2)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors[name] = exc

    threads = [threading.Thread(target=party, args=(n,)) for n in specs]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    return errors, hub


def test_every_party_names_the_keys_that_differ_and_the_fix(tmp_path):
    same = _spec(tmp_path, "job")
    other = _spec(tmp_path, "job-other", lr=0.25, options={"clip": 2.0})
    errors, _ = _agree({"active": same, "passive1": same, "passive2": other})
    assert set(errors) == {"active", "passive1", "passive2"}
    assert all(isinstance(e, CommandError) for e in errors.values()), errors
    fix = "use the same job.toml (and the same --job overrides) on every party"
    job, job_other = str(tmp_path / "job.toml"), str(tmp_path / "job-other.toml")
    assert errors["active"].what == (f"the job file of party 'passive2' differs from this party's {job} in [job] "
                                     "lr (here 0.5), options.clip (here 1.0)")
    assert errors["active"].fix == f"{fix} (copy {job} to 'passive2')"
    assert errors["passive2"].what == (f"this party's job file {job_other} differs from the leader's (party "
                                       "'active') in [job] lr (here 0.25), options.clip (here 2.0)")
    assert errors["passive2"].fix == f"{fix} (copy the leader's job file over {job_other})"
    # a party whose file is the leader's names the keys, not another party's values
    assert errors["passive1"].what == ("the job file of party 'passive2' differs from the leader's (party "
                                       "'active') in [job] lr, options.clip")
    # what the parties tell one another when they stop holds no value
    assert all("0.25" not in e.shared and "0.5" not in e.shared for e in errors.values())


def test_a_peer_that_names_no_keys_is_still_one_line(tmp_path):
    """A follower of an older vflsec sends only the job's digest: the leader says the keys go unnamed."""
    same = _spec(tmp_path, "job")
    hub = InMemoryHub(default_timeout=30)
    errors = {}

    def leader():
        try:
            agree_on_job(_Endpoint(hub.endpoint("active")), same, "active", ["passive1"], 2)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors["active"] = exc

    thread = threading.Thread(target=leader)
    thread.start()
    hub.endpoint("passive1").send("active", TAG_HELLO, {"job_sha256": "0" * 64})
    thread.join(60)
    assert isinstance(errors["active"], CommandError)
    assert "keys its vflsec version does not name" in errors["active"].what


@pytest.mark.parametrize("reply", ["not json", "[1]", "{}"])
def test_a_refusal_that_names_no_party_is_an_error_of_the_leader(tmp_path, reply):
    from vflsec.runtime.handshake import TAG_SESSION

    hub = InMemoryHub(default_timeout=30)
    follower = _Endpoint(hub.endpoint("passive1"))
    hub.endpoint("active").send("passive1", TAG_SESSION, {"error": "x", "differs": reply})
    with pytest.raises(ValueError, match="refused the job naming no party"):
        agree_on_job(follower, _spec(tmp_path, "job"), "active", ["passive1"], 2)
