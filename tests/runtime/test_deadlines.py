"""``vflsec party`` against a leader that is alive but does not follow the
protocol (issue 18, items 3 and 4): a follower must fail within the job's
deadline with one line naming the leader and the step, and a message under a
tag the job never receives fails it naming the sender."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.federation.grpc_channel import GrpcChannel, MessageRejected, NetworkSettings  # noqa: E402
from vflsec.federation.tls import load_tls  # noqa: E402
from vflsec.glm.registry import get_protocol  # noqa: E402
from vflsec.runtime import deadlines  # noqa: E402
from vflsec.runtime.config import load_party_config  # noqa: E402
from vflsec.runtime.handshake import agree_on_job  # noqa: E402
from vflsec.runtime.job_spec import load_job_spec  # noqa: E402
from vflsec.runtime.kinds import get_job_kind  # noqa: E402
from vflsec.runtime.launch import kill_parties, start_parties, wait_parties, write_local_job  # noqa: E402

pytestmark = pytest.mark.network

NETWORK = dict(peer_timeout=4.0, heartbeat_interval=0.5, connect_timeout=30.0, handshake_timeout=3.0,
               step_timeout=3.0)


def _local_job(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"id-{i:04d}" for i in range(40)]
    frames = {"active": (ids, rng.normal(size=(40, 2)), (rng.random(40) < 0.5).astype(float)),
              "passive1": (ids, rng.normal(size=(40, 2)), None)}
    job = dict(protocol="plain", loss="logistic", lr=0.5, epochs=1, batch_size=8, seed=0, active="active",
               passives=["passive1"])
    return write_local_job(tmp_path, job, frames, network=NETWORK)


def _fake_leader(local):
    """A GrpcChannel in the leader's place: it answers pings, nothing more by itself."""
    cfg = load_party_config(local.configs["active"])
    assert cfg.tls is not None
    channel = GrpcChannel("active", cfg.listen, cfg.peers, tls=load_tls(cfg.tls["ca"], cfg.tls["cert"], cfg.tls["key"]),
                          settings=NetworkSettings(peer_timeout=4.0, heartbeat_interval=0.5), session="handshake")
    return channel.start()


def _error_lines(err: str):
    return [line for line in err.splitlines() if line.startswith("vflsec party passive1: error:")]


def test_silent_leader_fails_the_follower_naming_leader_and_step(tmp_path, run_parties):
    local = _local_job(tmp_path)
    leader = _fake_leader(local)
    try:
        started = time.monotonic()
        status = run_parties(local, 60.0, names=["passive1"])
        elapsed = time.monotonic() - started
    finally:
        leader.close()
    rc, err = status["passive1"]
    assert rc == 1, f"the follower should fail, got {rc}:\n{err}"
    assert elapsed < 45.0
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert "'active'" in lines[0] and "'job_session'" in lines[0] and "handshake" in lines[0], lines[0]


def test_unexpected_tag_after_agreement_fails_the_follower_naming_the_leader(tmp_path, child_env):
    local = _local_job(tmp_path)
    leader = _fake_leader(local)
    try:
        procs = start_parties(local, ["passive1"], env=child_env)
        try:
            leader.wait_for_peers()
            agree_on_job(leader, load_job_spec(local.job_file), "active", ["passive1"])
            time.sleep(1.0)  # the follower declares its tags once it has the go
            with pytest.raises(MessageRejected, match="protocol error"):
                leader.send("passive1", "not_a_tag_of_this_job", np.zeros(8))
            status = wait_parties(procs, 60.0)
        finally:
            kill_parties(procs)
    finally:
        leader.close()
    rc, err = status["passive1"]
    assert rc == 1, f"the follower should fail, got {rc}:\n{err}"
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert "'active'" in lines[0] and "protocol error" in lines[0] and "not_a_tag_of_this_job" in lines[0]


def test_every_job_kind_declares_the_tags_its_programs_receive():
    from vflsec.federation.channel import InMemoryHub
    from vflsec.glm import GLMJob, PartyData, run_job

    rng = np.random.default_rng(1)
    X = [rng.normal(size=(24, 2)), rng.normal(size=(24, 2))]
    X = [B / np.maximum(1.0, np.linalg.norm(B, axis=1, keepdims=True)) for B in X]
    y = np.where(rng.random(24) < 0.5, 1.0, -1.0)
    kind = get_job_kind("glm")
    for protocol in ("plain", "hdp", "taylor"):
        extra = {"coordinator": "coordinator"} if get_protocol(protocol).needs_coordinator else {}
        if protocol == "hdp":
            extra["options"] = {"epsilon": 8.0}
        job = GLMJob(protocol=protocol, n_samples=24, batch_size=8, epochs=1, lr=0.5, passives=("passive",), **extra)
        hub = InMemoryHub()
        run_job(job, {"active": PartyData(X[0], y), "passive": PartyData(X[1])}, hub=hub, timeout=60)
        used = {record.tag for record in hub.records}
        declared = deadlines.expected_tags(kind, job)
        assert declared is not None and used <= declared, (protocol, used - (declared or set()))
    assert deadlines.expected_tags(get_job_kind("splitnn"), None) >= {"sl_embedding", "sl_gradient"}
    assert kind.default_step_timeout(GLMJob(protocol="paillier", n_samples=100, coordinator="c")) > \
        kind.default_step_timeout(GLMJob(protocol="plain", n_samples=100)) >= 60
