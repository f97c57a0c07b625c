"""PSI buckets on a party's Ray cluster (vflsec.federation.psi_workers; issue 28, item 2), on a real
two-node Ray cluster on this machine.

The cluster is Ray's own multi-node test utility (``ray.cluster_utils.Cluster``): a head node and a
worker node of one CPU each, every process on 127.0.0.1, its files in a temporary folder of its own,
started and stopped here (``ray.shutdown()``, then ``Cluster.shutdown()``, which ends exactly the
processes it started; never ``ray stop``).

What is checked: the leader's and a member's buckets through Ray find the same intersection as
this process's threads, with the same messages, and the work runs on both nodes; everything Ray
serializes for PSI is a bucket's own IDs, bytes that went over the parties' channel, index arrays,
bucket numbers and where the work ran (no key: a key object cannot even be pickled); a client actor
killed mid-run, or the worker node under one, fails ``align_ids`` with one line naming the node,
never a hang.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import pytest

pytest.importorskip("private_set_intersection.python")
ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from vflsec.federation import psi_workers  # noqa: E402
from vflsec.federation.channel import ChannelClosed, InMemoryHub  # noqa: E402
from vflsec.federation.psi import (  # noqa: E402
    TAG_PSI_REQUEST,
    TAG_PSI_RESPONSE,
    TAG_PSI_SETUP,
    align_ids,
    bucket_count,
)
from vflsec.he.ray_executor import RayExecutor  # noqa: E402

# slow: a Ray cluster starts in seconds, the module takes about a minute on 2 cores.
# network: Ray's processes talk over loopback sockets.
pytestmark = [pytest.mark.slow, pytest.mark.network]

NODE = dict(num_cpus=1, object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
# A dead node is noticed in about 2 s instead of Ray's default of tens of seconds.
FAST_HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4,
                      "health_check_initial_delay_ms": 0}
RUN_LIMIT_S = 120.0  # a run that has not ended by then has hung
PSI_TAGS = (TAG_PSI_REQUEST, TAG_PSI_SETUP, TAG_PSI_RESPONSE)


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimpleNamespace]:
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process: these tests need a cluster of their own")
    patch = pytest.MonkeyPatch()
    # A short folder: Ray's unix socket paths live under it and must stay below 108 characters.
    folder = tempfile.mkdtemp(prefix="vq", dir="/tmp")
    patch.setenv("RAY_TMPDIR", folder)
    # Ray replaces a loopback address by this machine's IP when it connects (its rule for real
    # clusters); this one is on 127.0.0.1 only, so Ray is told to keep loopback addresses.
    patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    patch.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args=dict(NODE, include_dashboard=False, temp_dir=f"{folder}/ray",
                                       _system_config=FAST_HEALTH_CHECKS))
    leader = None
    try:
        worker = made.add_node(**NODE)
        leader = RayExecutor(made.address)
        # Each party's own executor on the cluster (the second joins the first's connection), so
        # the work each party ran is counted apart (psi_workers.bucket_counts).
        member = RayExecutor(made.address)
        yield SimpleNamespace(cluster=made, worker=worker, nodes={made.head_node.node_id, worker.node_id},
                              leader=leader, member=member)
    finally:
        if leader is not None:
            leader.close()
        ray.shutdown()
        made.shutdown()
        patch.undo()
        shutil.rmtree(folder, ignore_errors=True)


def _sets(n: int, parties=("a", "b", "c"), keep=0.7, seed=0) -> Dict[str, List[str]]:
    rng = np.random.default_rng(seed)
    universe = [f"cust-{v}" for v in rng.permutation(10 ** 8)[:n]]
    sets = {}
    for name in parties:
        own = [u for u, kept in zip(universe, rng.random(n) < keep) if kept]
        rng.shuffle(own)
        sets[name] = own
    return sets


def _run(sets, executors: Dict[str, Any], leader="a", timeouts: Optional[Dict[str, float]] = None,
         wait: bool = True, **kwargs) -> SimpleNamespace:
    """Every party's align_ids in a thread of its own, each with its executor; joined within
    RUN_LIMIT_S unless ``wait`` is False (then the caller joins ``run.threads``)."""
    hub = InMemoryHub(default_timeout=RUN_LIMIT_S, keep_payloads=True)
    endpoints = {name: hub.endpoint(name) for name in sets}
    members = [n for n in sets if n != leader]
    run = SimpleNamespace(hub=hub, results={}, errors={}, threads=[])

    def party(name):
        try:
            run.results[name] = align_ids(endpoints[name], sets[name], leader=leader,
                                          members=members if name == leader else (),
                                          executor=executors.get(name), timeout=(timeouts or {}).get(name),
                                          **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            run.errors[name] = exc
            hub.abort(f"party {name!r} failed")  # as a party tells its peers (runtime.party)

    run.threads = [threading.Thread(target=party, args=(n,), daemon=True) for n in sets]
    for thread in run.threads:
        thread.start()
    if wait:
        _join(run)
    return run


def _join(run, limit: float = RUN_LIMIT_S) -> None:
    give_up = time.monotonic() + limit
    for thread in run.threads:
        thread.join(max(0.0, give_up - time.monotonic()))
    assert not any(thread.is_alive() for thread in run.threads), f"a party did not end within {limit} s"


def _messages(hub) -> Dict[tuple, list]:
    """Per (sender, receiver): the tags in the order sent, the PSI headers as sent."""
    out: Dict[tuple, list] = defaultdict(list)
    for record, payload in hub.transcript:
        header = record.tag == TAG_PSI_REQUEST and isinstance(payload, dict)
        out[(record.sender, record.receiver)].append(payload if header else record.tag)
    return dict(out)


def test_buckets_on_ray_find_what_threads_find_with_the_same_messages_on_both_nodes(cluster):
    sets = _sets(9000)
    expected = sorted(set(sets["a"]) & set(sets["b"]) & set(sets["c"]))
    assert len(expected) > 2000
    local = _run(sets, {}, bucket_target=800, workers=2)
    assert not local.errors, local.errors
    before = {name: psi_workers.bucket_counts(getattr(cluster, name)) for name in ("leader", "member")}
    # The leader and member "b" on Ray (one actor / one task per CPU of the two nodes), "c" on threads.
    through_ray = _run(sets, {"a": cluster.leader, "b": cluster.member}, bucket_target=800)
    assert not through_ray.errors, through_ray.errors
    for name in sets:
        assert local.results[name] == through_ray.results[name] == expected
    # The same messages: one request per bucket, a window of two per worker (2 CPUs, 2 threads).
    assert _messages(through_ray.hub) == _messages(local.hub)
    header = next(p for r, p in through_ray.hub.transcript if r.tag == TAG_PSI_REQUEST and r.receiver == "b")
    assert header["buckets"] == bucket_count(len(sets["a"]), 800, 2) and header["window"] == 4
    # The leader's buckets (its actors) and member b's (its tasks) ran on both nodes: each bucket
    # of the run with b blinded and intersected by the leader, answered by b.
    for name in ("leader", "member"):
        after = psi_workers.bucket_counts(getattr(cluster, name))
        ran = {node: count - before[name].get(node, 0) for node, count in after.items()}
        assert set(ran) == cluster.nodes and all(count > 0 for count in ran.values()), (name, ran)
    leader_ran = sum(psi_workers.bucket_counts(cluster.leader).values()) - sum(before["leader"].values())
    member_ran = sum(psi_workers.bucket_counts(cluster.member).values()) - sum(before["member"].values())
    runs_with_b = header["buckets"]
    runs_with_c = next(p for r, p in through_ray.hub.transcript
                       if r.tag == TAG_PSI_REQUEST and r.receiver == "c")["buckets"]
    assert leader_ran == 2 * (runs_with_b + runs_with_c) and member_ran == runs_with_b


# -- what goes through Ray's serialization -----------------------------------------------------------

class RecordingBucketWorkers(psi_workers.RayBucketWorkers):
    """Ray bucket workers that keep every argument of a task or actor call and every result
    as Ray serialized them (the call's arguments, the value ray.get returned)."""

    made: List["RecordingBucketWorkers"] = []

    def __init__(self, *args: Any, **kwargs: Any):
        self.sent: List[tuple] = []
        self.returned: List[Any] = []
        super().__init__(*args, **kwargs)
        RecordingBucketWorkers.made.append(self)

    def _submit(self, remote, *args):
        ray.cloudpickle.dumps(args)  # what Ray does with them: it must be possible
        self.sent.append(args)
        return super()._submit(remote, *args)

    def _fetched(self, value):
        self.returned.append(value)
        return super()._fetched(value)

    def close(self):
        self.closed = list(self.actors)
        super().close()


def _assert_killed(actors, limit: float = 30.0) -> None:
    """Each actor stops answering within ``limit`` seconds (ray.kill acts asynchronously: a call
    that reaches the actor before the kill is still answered)."""
    give_up = time.monotonic() + limit
    for actor in actors:
        while True:
            try:
                ray.get(actor.where.remote(), timeout=limit)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < give_up, f"an actor still answers {limit} s after align_ids ended"
            time.sleep(0.1)


def _recording(monkeypatch) -> List[RecordingBucketWorkers]:
    RecordingBucketWorkers.made = []
    monkeypatch.setattr(psi_workers, "RayBucketWorkers", RecordingBucketWorkers)
    return RecordingBucketWorkers.made


def test_a_psi_key_cannot_be_pickled_so_only_bytes_can_leave_its_process():
    psi = pytest.importorskip("private_set_intersection.python")
    for key in (psi.client.CreateWithNewKey(True), psi.server.CreateWithNewKey(True)):
        with pytest.raises(TypeError):
            ray.cloudpickle.dumps(key)


def _flatten(value: Any) -> Iterator[Any]:
    if isinstance(value, tuple):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def test_what_ray_serializes_for_psi_is_own_ids_wire_bytes_and_indices(cluster, monkeypatch):
    made = _recording(monkeypatch)
    sets = _sets(3000, parties=("a", "b"))
    run = _run(sets, {"a": cluster.leader, "b": cluster.member}, bucket_target=200)
    assert not run.errors, run.errors
    assert run.results["a"] == sorted(set(sets["a"]) & set(sets["b"]))
    assert len(made) == 2
    leader_work, member_work = (w for w in made)
    if member_work.closed:  # the order the two threads made them in: the leader's made actors
        leader_work, member_work = member_work, leader_work
    wire = {payload for record, payload in run.hub.transcript if record.tag in PSI_TAGS and isinstance(payload, bytes)}
    buckets = next(p for r, p in run.hub.transcript if r.tag == TAG_PSI_REQUEST)["buckets"]
    assert buckets >= 8

    def check(party: str, value: Any, allowed: tuple) -> None:
        assert isinstance(value, allowed) and not isinstance(value, bool), \
            f"{party}: a {type(value).__name__} went through Ray"
        if isinstance(value, bytes):
            assert value in wire, f"{party}: {len(value)} bytes through Ray that never went over the channel"
        elif isinstance(value, list):
            assert all(isinstance(i, str) for i in value) and set(value) <= set(sets[party]), \
                f"{party}: a list that is not of its own IDs went through Ray"
        elif isinstance(value, np.ndarray):
            assert value.dtype == np.int64 and value.ndim == 1 and (value >= 0).all()
        elif isinstance(value, str):
            assert value in cluster.nodes, f"{party}: the string {value[:40]!r} went through Ray"

    for party, work in (("a", leader_work), ("b", member_work)):
        assert work.sent and work.returned
        for args in work.sent:  # bucket numbers, the bucket's IDs, the bytes of a message
            for value in args:
                check(party, value, (int, list, bytes))
                if isinstance(value, int):
                    assert 0 <= value < buckets
        for result in work.returned:  # request bytes, index arrays, reply bytes; where: node and process IDs
            for value in _flatten(result):
                check(party, value, (bytes, np.ndarray, str, int))
    # What each kind of call sent and got back, by shape.
    assert {tuple(type(v).__name__ for v in args) for args in leader_work.sent} == \
        {(), ("int", "list"), ("int", "bytes", "bytes")}  # where, blind, intersect
    assert {tuple(type(v).__name__ for v in args) for args in member_work.sent} == {("list", "bytes")}
    # The member's buckets are stateless tasks: it made no actor; the leader one per worker.
    assert not member_work.closed
    assert len(leader_work.closed) == 2
    assert {leader_work.placement(i)[0] for i in range(2)} == cluster.nodes  # spread over both nodes
    _assert_killed(leader_work.closed)  # and gone (their keys with them) once align_ids returned
    # Every request the leader sent came back from its actors, every reply from the member's tasks.
    requests = {p for r, p in run.hub.transcript if r.tag == TAG_PSI_REQUEST and isinstance(p, bytes)}
    replies = {p for r, p in run.hub.transcript if r.tag in (TAG_PSI_SETUP, TAG_PSI_RESPONSE)}
    assert requests == {v for v in leader_work.returned if isinstance(v, bytes)}
    assert replies == {b for r in member_work.returned for b in _flatten(r) if isinstance(b, bytes)}


# -- failures ---------------------------------------------------------------------------------------

def _mid_run(sets, executors, made) -> SimpleNamespace:
    """A run of ``sets`` started in threads and waited for until the leader's two actors are up and
    the member has answered a bucket: mid-run. ``run.work``: the leader's bucket workers."""
    run = _run(sets, executors, bucket_target=1000, wait=False, timeouts={"b": 30.0})
    by = time.monotonic() + 60.0
    while time.monotonic() < by:
        leaders = [work for work in list(made) if len(work.actors) == 2]  # a member makes no actor
        if leaders and any(r.tag == TAG_PSI_SETUP for r, _ in run.hub.transcript):
            run.work = leaders[0]
            return run
        time.sleep(0.05)
    pytest.fail("the leader's actors did not start, or the member never answered")


def _failed_leader(run, since: float) -> str:
    run.threads[0].join(RUN_LIMIT_S)
    assert not run.threads[0].is_alive(), f"the leader did not end within {RUN_LIMIT_S} s"
    assert time.monotonic() - since < 30.0
    _join(run)  # the member: told by the hub that the leader failed
    error = run.errors.get("a")
    assert isinstance(error, RuntimeError), f"expected a failed run, got {error!r}"
    assert isinstance(run.errors.get("b"), ChannelClosed)
    message = str(error)
    assert "\n" not in message and " -- " in message
    return message


def test_a_client_actor_killed_mid_run_fails_align_ids_in_one_line_naming_its_node(cluster, monkeypatch):
    made = _recording(monkeypatch)
    # The member on threads: only the leader's actors are under test here.
    run = _mid_run(_sets(60000, parties=("a", "b"), keep=0.9), {"a": cluster.leader}, made)
    work = run.work
    node, pid = work.placement(1)
    assert run.threads[0].is_alive(), "the run ended before the actor was killed: give it more IDs"
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)  # a process of this test's own cluster, by its ID
    message = _failed_leader(run, killed)
    assert "PSI actor 1" in message and node in message and str(pid) in message, message
    _assert_killed(work.closed)  # the other actor was killed too, by align_ids on its way out
    ray.get(ray.remote(lambda: 1).remote(), timeout=30)  # the cluster is still usable


def test_a_worker_node_lost_mid_run_fails_align_ids_in_one_line_naming_it(cluster, monkeypatch):
    made = _recording(monkeypatch)
    # Both parties on Ray: the member's tasks on the lost node are retried, the leader's keys there are lost.
    run = _mid_run(_sets(60000, parties=("a", "b"), keep=0.9), {"a": cluster.leader, "b": cluster.member}, made)
    dead = cluster.worker.node_id
    assert dead in {run.work.placement(i)[0] for i in range(2)}  # an actor of the leader lives there
    assert run.threads[0].is_alive(), "the run ended before the node was lost: give it more IDs"
    lost = time.monotonic()
    cluster.cluster.remove_node(cluster.worker, allow_graceful=False)
    try:
        message = _failed_leader(run, lost)
    finally:  # a fresh worker node for whatever runs next
        cluster.worker = cluster.cluster.add_node(**NODE)
        cluster.cluster.wait_for_nodes()
        cluster.nodes = {cluster.cluster.head_node.node_id, cluster.worker.node_id}
    assert dead in message and "nodes that died during the run: " + dead in message, message
