import numpy as np
import pytest

from vflsec.federation import InMemoryHub
from vflsec.glm import (
    GLMJob,
    PartyData,
    PartyError,
    PartyResult,
    PhaseClock,
    get_protocol,
    register_protocol,
    run_job,
)


# --- runner / registry with a toy protocol ---------------------------------
def _echo_active(endpoint, job, data):
    clock = PhaseClock()
    X, y = data.checked(job, endpoint.name, needs_labels=True)
    total = X.sum(axis=0)
    for p in job.passives:
        total = total + endpoint.recv(p, "colsum").sum()
    return PartyResult(endpoint.name, "active", total, timings=clock.timings(endpoint))


def _echo_passive(endpoint, job, data):
    clock = PhaseClock()
    X, _ = data.checked(job, endpoint.name, needs_labels=False)
    endpoint.send(job.active, "colsum", X.sum(axis=0))
    return PartyResult(endpoint.name, "passive", None, timings=clock.timings(endpoint))


def _failing_passive(endpoint, job, data):
    raise RuntimeError("boom")


register_protocol("_test_echo", {"active": _echo_active, "passive": _echo_passive}, replace=True)
register_protocol("_test_fail", {"active": _echo_active, "passive": _failing_passive}, replace=True)


def test_runner_runs_each_party_and_records_messages():
    job = GLMJob("_test_echo", n_samples=4, batch_size=2, passives=("p1", "p2"))
    data = {
        "active": PartyData(np.ones((4, 2)), np.array([1.0, -1, 1, -1])),
        "p1": PartyData(np.ones((4, 3))),
        "p2": PartyData(2 * np.ones((4, 1))),
    }
    out = run_job(job, data)
    np.testing.assert_allclose(out.results["active"].coef, [4 + 12 + 8, 4 + 12 + 8])
    assert {r.sender for r in out.records} == {"p1", "p2"}
    assert set(out.bytes_by_tag()) == {"colsum"}
    t = out.results["p1"].timings
    assert set(t) == {"compute", "crypto", "messaging", "total"}


def test_runner_propagates_failure_with_party_name_and_unblocks_others():
    job = GLMJob("_test_fail", n_samples=4, batch_size=2)
    data = {"active": PartyData(np.ones((4, 2)), np.ones(4)), "passive": PartyData(np.ones((4, 3)))}
    with pytest.raises(PartyError, match="'passive'.*boom"):
        run_job(job, data, timeout=10)


def test_runner_keeps_value_errors_as_value_errors():
    job = GLMJob("_test_echo", n_samples=4, batch_size=2)
    data = {"active": PartyData(np.ones((4, 2)), np.ones(4)), "passive": PartyData(np.ones((3, 3)))}
    with pytest.raises(ValueError, match="'passive'.*3 rows"):
        run_job(job, data, timeout=10)


def test_unknown_protocol():
    with pytest.raises(ValueError, match="unknown protocol 'nope'"):
        get_protocol("nope")


def test_batches_are_a_public_function_of_the_job():
    job = GLMJob("_test_echo", n_samples=10, batch_size=4, epochs=2, seed=3)
    batches = list(job.batches())
    assert len(batches) == job.total_steps == 6
    for epoch in range(2):
        idx = np.concatenate([b for e, _, b in batches if e == epoch])
        assert sorted(idx.tolist()) == list(range(10))
    again = [b for _, _, b in GLMJob("_test_echo", n_samples=10, batch_size=4, epochs=2, seed=3).batches()]
    assert all(np.array_equal(x, y) for x, (_, _, y) in zip(again, batches))
