"""A protocol "mpc" job as three ``vflsec party`` processes: PSI over gRPC with mutual TLS, then the
MPC engine's own link between the processes (TLS from the same CA); the weights each party writes
are the in-process run's within the engine's fixed-point error."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")
pytest.importorskip("spu")

from vflsec.glm.job import GLMJob, PartyData  # noqa: E402
from vflsec.glm.model import GLMDesign  # noqa: E402
from vflsec.glm.runner import run_job  # noqa: E402
from vflsec.runtime.launch import write_local_job  # noqa: E402

pytestmark = [pytest.mark.network, pytest.mark.slow]

NAMES = ("active", "passive1", "passive2")
#: two runs of the engine differ by its random truncation errors (a few 2^-18 per step)
FIXED_POINT_TOLERANCE = 1e-3


def _frames(n=160, seed=1, keep=0.9):
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{v:06d}" for v in rng.permutation(10 ** 6)[:n]])
    blocks = [rng.normal(size=(n, 3)), rng.normal(size=(n, 2)), rng.normal(size=(n, 2))]
    y = (blocks[0][:, 0] + blocks[1][:, 0] - blocks[2][:, 1] + 0.5 * rng.normal(size=n) > 0).astype(np.float64)
    frames = {}
    for p, name in enumerate(NAMES):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < keep))
        frames[name] = (ids[kept].tolist(), blocks[p][kept], y[kept] if p == 0 else None)
    return frames


def _in_process(job_table, frames):
    """The same job in one process (threads, the engine's in-memory link) on the aligned rows."""
    common = sorted(set.intersection(*[set(f[0]) for f in frames.values()]))
    design = GLMDesign(loss=job_table["loss"])
    data, widths = {}, {}
    for name, (ids, X, y) in frames.items():
        position = {v: i for i, v in enumerate(ids)}
        order = [position[c] for c in common]
        block = design.block(X[order], "active" if name == job_table["active"] else "passive")
        data[name] = PartyData(block, None if y is None else design.fit_labels(y[order]).encode(y[order]))
        widths[name] = block.shape[1]
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in job_table.items() if k != "mpc_protocol"}
    job = GLMJob(n_samples=len(common), options={"mpc_protocol": job_table["mpc_protocol"]}, widths=widths,
                 **fields)
    return run_job(job, data), design


def _processes_match_in_process(tmp_path, job, fast_network, run_parties, party_outputs):
    """Run ``job`` as three processes; assert each party's weights are the in-process run's (fixed-point
    error). Returns the processes' outputs and each party's in-process ``(coef, intercept)``."""
    frames = _frames()
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    outputs = party_outputs(local, run_parties(local, 180.0))
    reference, design = _in_process(job, frames)
    expected = {}
    for name in NAMES:
        role = "active" if name == "active" else "passive"
        expected[name] = design.split_coef(reference.results[name].coef, role)
        np.testing.assert_allclose(np.array(outputs[name]["coef"]), expected[name][0], rtol=0,
                                   atol=FIXED_POINT_TOLERANCE)
    return outputs, expected


@pytest.mark.parametrize("mpc_protocol", ["aby3", "semi2k"])
def test_three_processes_give_the_in_process_weights(tmp_path, fast_network, run_parties, party_outputs,
                                                     mpc_protocol):
    job = dict(protocol="mpc", mpc_protocol=mpc_protocol, loss="logistic", lr=0.5, epochs=3, batch_size=16, seed=3,
               active="active", passives=["passive1", "passive2"])
    outputs, expected = _processes_match_in_process(tmp_path, job, fast_network, run_parties, party_outputs)
    for name in NAMES:
        if name == "active":
            assert outputs[name]["intercept"] == pytest.approx(expected[name][1], abs=FIXED_POINT_TOLERANCE)
        # over the channel: the start-up (job, PSI), the shares of the inputs and the reveal, nothing per step
        tags = set(outputs[name]["bytes_sent_by_tag"])
        assert {"mpc_input", "mpc_reveal"} <= tags and not {t for t in tags if t.startswith("ir_")}
        # the engine's own link: its bytes on the wire, counted by the relay in front of each party's link
        assert outputs[name]["info"]["engine_bytes_in"] > 10_000 and outputs[name]["info"]["engine_bytes_out"] > 0
    assert np.abs(np.array(outputs["active"]["coef"])).max() > 0.05  # a model was learnt, not zeros


def test_an_mpc_dp_job_as_three_processes_gives_the_in_process_weights(tmp_path, fast_network, run_parties,
                                                                      party_outputs):
    """DP-SGD inside the engine (protocol "mpc_dp"): with a test noise seed every party draws its sample
    and noise shares as in-process, so the weights agree within the engine's fixed-point error."""
    job = dict(protocol="mpc_dp", mpc_protocol="aby3", loss="logistic", lr=0.5, epochs=2, batch_size=36, seed=3,
               epsilon=2.0, noise_seed=11, k=None, lam=0.0, active="active", passives=["passive1", "passive2"])
    outputs, _ = _processes_match_in_process(tmp_path, job, fast_network, run_parties, party_outputs)
    for name in NAMES:
        info = outputs[name]["info"]
        assert info["dp_mechanism"] == "mpc_dp_sgd" and info["epsilon_spent"] <= 2.0
        assert "mpc_run_input" in outputs[name]["bytes_sent_by_tag"]  # the sample draws and noise shares
    assert np.abs(np.array(outputs["active"]["coef"])).max() > 0.05


def test_a_party_killed_inside_the_engine_stops_the_others_naming_it(tmp_path, fast_network, child_env):
    from vflsec.runtime.launch import kill_parties, start_parties, wait_parties

    frames = _frames()
    job = dict(protocol="mpc", mpc_protocol="semi2k", loss="logistic", lr=0.5, epochs=200, batch_size=16, seed=3,
               active="active", passives=["passive1", "passive2"])
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    procs = start_parties(local, env=child_env)
    try:
        deadline = time.monotonic() + 120
        while "epoch 2/" not in procs["active"].stderr_path.read_text():
            assert time.monotonic() < deadline, procs["active"].stderr_path.read_text()
            assert procs["active"].process.poll() is None, procs["active"].stderr_path.read_text()
            time.sleep(0.05)
        procs["passive2"].process.kill()
        killed_at = time.monotonic()
        status = wait_parties({n: procs[n] for n in ("active", "passive1")}, fast_network["peer_timeout"] + 30)
        elapsed = time.monotonic() - killed_at
    finally:
        kill_parties(procs)
    for name, (rc, err) in status.items():
        assert rc == 1, f"{name} should fail after passive2 died (rc={rc}):\n{err[-3000:]}"
        assert f"vflsec party {name}: error:" in err and "'passive2'" in err, err[-3000:]
    assert elapsed < fast_network["peer_timeout"] + 30
