"""A whole `vflsec party` job whose parties run their HE vector work and PSI buckets on a real two-node
Ray cluster (``[compute] engine = "ray"``): the same aligned rows and model as on the local pools, the
tasks on both nodes.
The cluster is Ray's own multi-node test utility on 127.0.0.1, in a folder of its own, started and
stopped here (never `ray stop`)."""
from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")
ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from vflsec.runtime.launch import to_toml, write_local_job  # noqa: E402

pytestmark = [pytest.mark.network, pytest.mark.slow]

NODE = dict(num_cpus=1, object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")


@pytest.fixture(scope="module")
def two_nodes():
    patch = pytest.MonkeyPatch()
    folder = tempfile.mkdtemp(prefix="vp", dir="/tmp")  # short: Ray's socket paths stay < 108 characters
    patch.setenv("RAY_TMPDIR", folder)
    # Ray replaces a loopback address by this machine's IP (its rule for real clusters); this cluster is on
    # 127.0.0.1 only: keep loopback addresses, here and (through the environment) in the party processes.
    patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    patch.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args=dict(NODE, include_dashboard=False, temp_dir=f"{folder}/ray"))
    try:
        worker = cluster.add_node(**NODE)
        yield cluster, {cluster.head_node.node_id, worker.node_id}
    finally:
        cluster.shutdown()
        patch.undo()
        shutil.rmtree(folder, ignore_errors=True)


def _frames(n=700, seed=4):
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{v:05d}" for v in rng.permutation(10 ** 5)[:n]])
    frames = {}
    for p, (name, width) in enumerate((("active", 3), ("passive1", 2))):
        kept = rng.permutation(np.flatnonzero(rng.random(n) < 0.9))
        X = rng.normal(size=(n, width))
        frames[name] = (ids[kept].tolist(), X[kept], (X[:, 0] > 0).astype(float)[kept] if p == 0 else None)
    return frames


@pytest.mark.filterwarnings("ignore::vflsec.he.WeakKeyWarning")  # 2048 bits on purpose: speed
def test_a_paillier_party_job_through_ray_trains_the_local_pools_model(two_nodes, tmp_path, fast_network,
                                                                      run_parties, party_outputs):
    cluster, nodes = two_nodes
    job = dict(protocol="paillier", loss="logistic", lr=0.5, epochs=1, batch_size=300, seed=3, key_bits=2048,
               active="active", passives=["passive1"], coordinator="coordinator")
    frames = _frames()
    outputs = {}
    for engine in ("local", "ray"):
        local = write_local_job(tmp_path / engine, job, frames, network=fast_network)
        if engine == "ray":
            for name in ("active", "passive1"):
                config = local.configs[name]
                config.write_text(config.read_text() + "\n" + to_toml({"compute": {"engine": "ray",
                                                                                   "address": cluster.address}}))
        outputs[engine] = party_outputs(local, run_parties(local, 180.0))
    for name in ("active", "passive1"):
        # Decryptions are exact, so the weights do not depend on where the encrypted work ran.
        np.testing.assert_allclose(outputs["ray"][name]["coef"], outputs["local"][name]["coef"], rtol=0, atol=1e-12)
        assert outputs["local"][name]["compute"]["engine"] == "local"
        # PSI through Ray aligned the same rows.
        assert outputs["ray"][name]["ids_sha256"] == outputs["local"][name]["ids_sha256"]
    tasks = {}
    for name in ("active", "passive1"):
        used = outputs["ray"][name]["compute"]
        assert used["engine"] == "RayExecutor" and used["cluster"] == cluster.address
        for node, count in used["tasks_per_node"].items():
            tasks[node] = tasks.get(node, 0) + count
        # Its PSI buckets ran on the cluster too: the one bucket of these ~600 IDs blinded and
        # intersected by an actor of the active party, answered by a task of the passive party.
        assert set(used["psi_buckets_per_node"]) <= nodes
        assert sum(used["psi_buckets_per_node"].values()) == (2 if name == "active" else 1), used
    assert set(tasks) == nodes and all(count > 0 for count in tasks.values())
