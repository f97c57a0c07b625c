"""A split-learning job (with a seeded embedding-noise defense) where each
party is its own process talking over GrpcChannel with mutual TLS: the
trained modules equal those of the in-memory run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")
torch = pytest.importorskip("torch")

from vflsec.federation.launch import free_ports  # noqa: E402
from vflsec.federation.tls import init_certificates  # noqa: E402

pytestmark = pytest.mark.network

# Shared by the party processes and the in-memory reference: how a party
# builds its job, data, models and defense copy.
PARTY_LIB = r'''
import json
import numpy as np
import torch

def build_party(name, spec, arrays):
    from vflsec.splitnn.job import SplitJob, SplitPartyData
    from vflsec.splitnn.models import mlp_bottom
    from vflsec.splitnn.defenses import GaussianEmbeddingNoise
    from vflsec.splitnn.defenses.base import DefenseContext

    job = SplitJob(**{**spec["job"], "passives": tuple(spec["job"]["passives"])})
    defense = GaussianEmbeddingNoise(0.05, seed=7)
    defense.setup(DefenseContext(n_classes=job.n_classes, passive_parties=job.passives, n_samples=job.n_samples,
                                 batch_size=job.batch_size, epochs=job.epochs))
    index = job.parties.index(name)
    torch.manual_seed(100 + index)
    if name == job.active:
        head = torch.nn.Linear(4 * len(job.passives), job.n_classes)
        return job, SplitPartyData(X=None, bottom=None, defense=defense, y=arrays["y"], head=head)
    bottom = mlp_bottom(arrays["X"].shape[1], (6,), 4)
    return job, SplitPartyData(X=arrays["X"], bottom=bottom, defense=defense)

def module_arrays(result):
    out = {}
    for prefix, module in (("bottom", result.bottom), ("head", result.head)):
        if module is not None:
            for key, value in module.state_dict().items():
                out[f"{prefix}.{key}"] = value.detach().cpu().numpy()
    return out
'''

WORKER = PARTY_LIB + r'''
import sys
torch.set_num_threads(1)
from vflsec.federation.grpc_channel import GrpcChannel, NetworkSettings
from vflsec.federation.tls import load_tls
from vflsec.splitnn.trainer import PROGRAMS

name, work = sys.argv[1], sys.argv[2]
spec = json.load(open(f"{work}/spec.json"))
with np.load(f"{work}/{name}.npz", allow_pickle=False) as f:
    arrays = {k: f[k] for k in f.files}
job, data = build_party(name, spec, arrays)
certs = f"{work}/certs"
channel = GrpcChannel(name, f"127.0.0.1:{spec['ports'][name]}",
                      {p: f"127.0.0.1:{port}" for p, port in spec["ports"].items() if p != name},
                      tls=load_tls(f"{certs}/ca.pem", f"{certs}/{name}.pem", f"{certs}/{name}.key"),
                      settings=NetworkSettings(peer_timeout=10.0, heartbeat_interval=0.5))
channel.start()
try:
    channel.wait_for_peers()
    result = PROGRAMS[job.role_of(name)](channel, job, data)
    np.savez(f"{work}/{name}-out.npz", **module_arrays(result))
    channel.notify_done()
except BaseException as exc:
    channel.notify_abort(repr(exc))
    raise
finally:
    channel.close()
'''


def test_split_learning_three_processes_match_in_memory(tmp_path):
    from vflsec.splitnn.trainer import run_split_job

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    n = 120
    parts = {"passive1": rng.normal(size=(n, 3)).astype(np.float32),
             "passive2": rng.normal(size=(n, 2)).astype(np.float32)}
    y = (parts["passive1"][:, 0] + parts["passive2"][:, 1] > 0).astype(np.int64)
    names = ["active", "passive1", "passive2"]
    spec = {"job": dict(n_samples=n, n_classes=2, epochs=2, batch_size=30, lr=0.01, optimizer="adam", seed=4,
                        active="active", passives=["passive1", "passive2"]),
            "ports": dict(zip(names, free_ports(3)))}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    arrays = {"active": {"y": y}, **{p: {"X": parts[p]} for p in parts}}
    for name in names:
        np.savez(tmp_path / f"{name}.npz", **arrays[name])
    init_certificates(tmp_path / "certs", names)
    import vflsec

    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(Path(vflsec.__file__).resolve().parents[1]) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    procs = {name: subprocess.Popen([sys.executable, "-c", WORKER, name, str(tmp_path)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in names}
    try:
        outputs = {name: proc.communicate(timeout=90) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in procs.items():
        assert proc.returncode == 0, f"{name}:\n{outputs[name][1].decode(errors='replace')[-3000:]}"

    namespace: dict = {}
    exec(PARTY_LIB, namespace)  # noqa: S102 - the same builder the party processes ran
    built = {name: namespace["build_party"](name, spec, arrays[name]) for name in names}
    job = built["active"][0]
    reference = run_split_job(job, {name: data for name, (_, data) in built.items()})
    for name in names:
        expected = namespace["module_arrays"](reference.results[name])
        with np.load(tmp_path / f"{name}-out.npz", allow_pickle=False) as got:
            assert set(got.files) == set(expected)
            for key, value in expected.items():
                np.testing.assert_array_equal(got[key], value, err_msg=f"{name} {key}")
