"""Entity alignment split into ID buckets (vflsec.federation.psi): the same intersection whatever the
bucket count and the threads, every bucket a separate message each way, and a leader that asks for
more buckets than allowed or opens with another protocol is refused."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("private_set_intersection.python")

from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.federation.psi import (  # noqa: E402
    MAX_BUCKETS,
    PROTOCOL,
    TAG_PSI_REQUEST,
    TAG_PSI_RESULT,
    TAG_PSI_SETUP,
    align_ids,
    bucket_count,
    bucket_of,
)


def _sets(n=900, seed=0, parties=("a", "b", "c"), keep=0.7):
    rng = np.random.default_rng(seed)
    universe = [f"cust-{v}" for v in rng.permutation(10 ** 7)[:n]]
    sets = {}
    for name in parties:
        own = [u for u in universe if rng.random() < keep]
        rng.shuffle(own)
        sets[name] = own
    return sets


@pytest.mark.parametrize("bucket_target, workers", [(10 ** 6, 1), (100, 1), (100, 3), (7, 2)])
def test_every_bucketing_finds_the_same_sorted_intersection(run_psi, bucket_target, workers):
    sets = _sets()
    results, errors, hub = run_psi(sets, bucket_target=bucket_target, workers=workers)
    assert not errors, errors
    expected = sorted(set(sets["a"]) & set(sets["b"]) & set(sets["c"]))
    assert len(expected) > 100
    assert all(results[name] == expected for name in sets)
    # One request per bucket (after the header) to each member.
    requests = [r for r, _ in hub.transcript if r.tag == TAG_PSI_REQUEST and r.receiver == "b"]
    assert len(requests) == 1 + bucket_count(len(sets["a"]), bucket_target, workers)


def test_the_bucket_count_follows_the_target_and_gives_every_thread_work():
    assert bucket_count(10 ** 6, 20_000, 1) == 50
    assert bucket_count(20_000, 20_000, 1) == 1  # one thread: the unbucketed protocol
    assert bucket_count(20_000, 20_000, 2) == 4  # two threads: two buckets each
    assert bucket_count(1_500, 20_000, 8) == 1  # too few IDs to split
    assert bucket_count(10 ** 9, 1, 1) == MAX_BUCKETS


def test_the_bucket_of_an_id_is_the_same_at_every_party_and_spreads_ids():
    ids = [f"x{i}" for i in range(20000)]
    where = bucket_of(ids, 16)
    assert np.array_equal(where, bucket_of(list(reversed(ids)), 16)[::-1])
    counts = np.bincount(where, minlength=16)
    assert counts.min() > 1000 and counts.max() < 1500  # ~1250 each
    assert not bucket_of(ids, 1).any()


def _member_facing(header):
    """A member answering a leader that sends ``header`` first; the member's error."""
    hub = InMemoryHub(default_timeout=5)
    leader, member = hub.endpoint("a"), hub.endpoint("b")
    leader.send("b", TAG_PSI_REQUEST, header)
    with pytest.raises((ValueError, TypeError)) as info:
        align_ids(member, ["1", "2"], leader="a", members=())
    return str(info.value)


def test_a_member_refuses_too_many_buckets_and_another_protocol():
    assert "at most" in _member_facing({"protocol": PROTOCOL, "buckets": MAX_BUCKETS + 1})
    assert "at most" in _member_facing({"protocol": PROTOCOL, "buckets": 0})
    assert "same vflsec version" in _member_facing(b"an old unbucketed request")


def test_an_empty_bucket_on_either_side_is_still_answered(run_psi):
    # Two IDs per side in 64 buckets: most buckets are empty at one party or both.
    sets = {"a": ["p", "q", "r"], "b": ["q", "r", "s"]}
    results, errors, hub = run_psi(sets, bucket_target=1, workers=2)
    assert not errors and results["a"] == results["b"] == ["q", "r"]
    assert sum(1 for r, _ in hub.transcript if r.tag == TAG_PSI_SETUP) == 3


@pytest.mark.parametrize("bad", [{"workers": 0}, {"workers": 1.5}, {"bucket_target": 0}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        align_ids(InMemoryHub().endpoint("a"), ["1"], leader="a", members=(), **bad)


def test_the_leader_keeps_at_most_a_window_of_requests_unanswered(run_psi):
    sets = _sets(n=3000, parties=("a", "b"))
    results, errors, hub = run_psi(sets, bucket_target=50, workers=2)
    assert not errors, errors
    header = next(p for r, p in hub.transcript if r.tag == TAG_PSI_REQUEST)
    assert header["window"] == 4 and header["buckets"] > 4 * header["window"]
    outstanding = most = 0
    for record, _ in hub.transcript:
        if record.tag == TAG_PSI_REQUEST and record.receiver == "b":
            outstanding += 1
        elif record.tag == TAG_PSI_SETUP:
            outstanding -= 1
        most = max(most, outstanding)
    assert most == 1 + header["window"]  # the header and a full window, never more


def test_the_result_is_announced_in_parts(run_psi, monkeypatch):
    from vflsec.federation import psi

    monkeypatch.setattr(psi, "RESULT_PART", 7)
    sets = _sets(n=120)
    results, errors, hub = run_psi(sets, bucket_target=20, workers=2)
    assert not errors, errors
    expected = sorted(set(sets["a"]) & set(sets["b"]) & set(sets["c"]))
    assert results["a"] == results["b"] == results["c"] == expected
    parts = [p for r, p in hub.transcript if r.tag == TAG_PSI_RESULT and r.receiver == "b"]
    assert parts[0] == {"count": len(expected), "parts": -(-len(expected) // 7)} and len(parts) == 1 + parts[0]["parts"]


def test_a_member_refuses_a_bad_window_and_a_result_it_cannot_hold(run_psi, monkeypatch):
    from vflsec.federation import psi

    assert "window" in _member_facing({"protocol": PROTOCOL, "buckets": 2, "window": 3})
    assert "window" in _member_facing({"protocol": PROTOCOL, "buckets": 2, "window": 0})
    # An honest bucketed exchange, then a leader announcing an ID the member lacks.
    real = psi._announce
    monkeypatch.setattr(psi, "_announce", lambda endpoint, name, common: real(endpoint, name,
                                                                              psi.IdColumn.of(["1", "3"])))
    results, errors, _ = run_psi({"a": ["1", "2"], "b": ["1", "2"]})
    assert "announced ID '3' that party 'b' does not hold" in str(errors["b"])


def test_a_local_pool_executor_keeps_the_threads_and_another_object_is_refused(run_psi):
    from vflsec.he import LocalPoolExecutor

    sets = _sets(n=300, parties=("a", "b"))
    results, errors, hub = run_psi(sets, bucket_target=50, workers=2, executor=LocalPoolExecutor())
    assert not errors, errors
    assert results["a"] == results["b"] == sorted(set(sets["a"]) & set(sets["b"]))
    with pytest.raises(TypeError, match="vflsec.he.Executor"):
        align_ids(InMemoryHub().endpoint("a"), ["1"], leader="a", members=(), executor="ray")
