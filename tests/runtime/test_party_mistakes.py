"""Mistakes found only between the parties of a ``vflsec party`` job (issue 37, item 5), through real
processes: IDs that no two parties write alike, fewer common IDs than a batch and a peer that never
starts are each one line ``vflsec party: error: <what> -- <fix>`` with exit status 2 at every party
that runs, and nothing of one party's IDs reaches another. (Job files that differ:
tests/runtime/test_glm_party_jobs.py and test_job_agreement.py; a model from another run:
tests/runtime/test_predict_job.py.)"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.runtime.launch import write_local_job  # noqa: E402

pytestmark = [pytest.mark.network, pytest.mark.slow]

JOB = dict(protocol="plain", loss="logistic", lr=0.5, epochs=2, batch_size=16, seed=3, active="active",
           passives=["passive"])


def _frames(active_ids, passive_ids):
    rng = np.random.default_rng(0)
    n = len(active_ids)
    return {"active": (active_ids, rng.normal(size=(n, 2)), (rng.random(n) < 0.4).astype(float)),
            "passive": (passive_ids, rng.normal(size=(len(passive_ids), 2)), None)}


def _error_line(err):
    """The one ``vflsec party: error:`` line, which is the last line."""
    lines = [line for line in err.splitlines() if line.startswith("vflsec party") and ": error: " in line]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    what, sep, fix = lines[0].partition(" -- ")
    assert what.startswith("vflsec party: error: ") and sep and fix, lines[0]
    return lines[0]


def test_ids_written_differently_name_the_formats_and_the_fix_at_every_party(tmp_path, fast_network, run_parties):
    numbers = [str(v) for v in range(4700, 4760)]
    prefixed = [f"C{v:06d}" for v in range(4700, 4760)]
    local = write_local_job(tmp_path, JOB, _frames(numbers, prefixed), network=fast_network, insecure=True)
    status = run_parties(local, 60)
    assert {name: rc for name, (rc, _) in status.items()} == {"active": 2, "passive": 2}, status
    active, passive = _error_line(status["active"][1]), _error_line(status["passive"][1])
    assert ("the parties share no IDs (PSI found none): this party's look like '4700', '4701', '4702' (digits "
            "only, 4 long); those of party 'passive' are 'C' + 6 digits, with leading zeros") in active
    assert "this party's look like 'C004700', 'C004701', 'C004702' ('C' + 6 digits" in passive
    assert "those of party 'active' are digits only, 4 long" in passive
    for line in (active, passive):
        assert "strip the prefix 'C'" in line and "zero-pad the numbers to 6 digits" in line
    # each party's IDs stay its own: no ID of one party appears in the other's output
    assert not any(item in status["active"][1] for item in prefixed)
    assert not any(f"'{item}'" in status["passive"][1] for item in numbers)


def test_a_peer_that_never_starts_is_named_with_its_address_and_the_fix(tmp_path, run_parties):
    ids = [str(v) for v in range(20)]
    local = write_local_job(tmp_path, JOB, _frames(ids, ids), insecure=True,
                            network=dict(peer_timeout=4.0, heartbeat_interval=0.5, connect_timeout=2.0))
    status = run_parties(local, 60, names=["active"])
    rc, err = status["active"]
    assert rc == 2, err
    address = local.configs["passive"].read_text().split('listen = "')[1].split('"')[0]
    line = _error_line(err)
    assert (f"vflsec party: error: peer party 'passive' at {address} never answered in 2 s (nothing listens "
            "there) -- start 'vflsec party --config <its party file>' on that machine; check the address of "
            "'passive' in [peers] of ") in line
    assert line.endswith(f"in [peers] of {local.configs['active']}; raise [network] connect_timeout in "
                         f"{local.configs['active']} if it starts later")


def test_fewer_common_ids_than_a_batch_is_one_line_at_every_party(tmp_path, fast_network, run_parties):
    ids = [f"id{v:03d}" for v in range(40)]
    local = write_local_job(tmp_path, JOB, _frames(ids[:25], ids[15:]), network=fast_network, insecure=True)
    status = run_parties(local, 60)
    assert {name: rc for name, (rc, _) in status.items()} == {"active": 2, "passive": 2}, status
    for _, err in status.values():
        assert _error_line(err) == (f"vflsec party: error: the parties share only 10 IDs, fewer than batch_size = "
                                    f"16 in {local.job_file} -- lower batch_size in every party's copy of "
                                    f"{local.job_file} (at most 10), or give the parties more customers in common")
