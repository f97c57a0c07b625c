"""The Ray executor on a real two-node Ray cluster on this machine (issue 28, items 2 and 3).

The cluster is Ray's own multi-node test utility (``ray.cluster_utils.Cluster``):
a head node and a worker node of one CPU each, every process on 127.0.0.1,
ports chosen by Ray among the free ones, its files in a temporary folder of its
own. The module's fixture starts it and stops it (``ray.shutdown()``, then
``Cluster.shutdown()``, which ends exactly the processes it started; never
``ray stop``, which would end every Ray process on the machine).

What is checked: Paillier through Ray equals the local process pool bit for bit
(the encrypted products, which are deterministic; encryptions and
re-randomizations through their exact decryptions); tasks reach both nodes; a
worker node killed mid-job is survived by Ray's task retry, or, without retries,
fails the job with one line naming the dead node, and a job past its time limit
fails with one line, never a hang; no private-key value is ever in what is sent
to a Ray task; a small Paillier HE-VFL fit through Ray equals the local pool's;
``[compute] engine = "ray"`` in a party file sets the executor.
"""
from __future__ import annotations

import gc
import math
import pickle
import shutil
import tempfile
import threading
import time
import warnings
from types import SimpleNamespace
from typing import Any, Iterator, List

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("phe")
pytest.importorskip("gmpy2")

import gmpy2  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from vflsec import he  # noqa: E402
from vflsec.he import _paillier_math as pm  # noqa: E402
from vflsec.he import paillier as P  # noqa: E402
from vflsec.he.ray_executor import RayExecutor  # noqa: E402

# slow: a Ray cluster starts in seconds, the whole module takes about a minute on 2 cores.
# network: Ray's processes talk over loopback sockets.
pytestmark = [pytest.mark.slow, pytest.mark.network]

NODE = dict(num_cpus=1, object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
# A dead node is noticed in about 2 s instead of Ray's default of tens of seconds.
FAST_HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4,
                      "health_check_initial_delay_ms": 0}
JOB_LIMIT_S = 120.0  # a job that has not ended by then has hung


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimpleNamespace]:
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process: these tests need a cluster of their own")
    patch = pytest.MonkeyPatch()
    # A short folder: Ray's unix socket paths live under it and must stay below 108 characters.
    folder = tempfile.mkdtemp(prefix="vr", dir="/tmp")
    patch.setenv("RAY_TMPDIR", folder)  # Ray's "current cluster" file too, not /tmp/ray's
    # Ray replaces a loopback address by this machine's IP when it connects (its rule for real
    # clusters); this one is on 127.0.0.1 only, so Ray is told to keep loopback addresses.
    patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    patch.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
    made = Cluster(initialize_head=True, connect=False,
                   head_node_args=dict(NODE, include_dashboard=False, temp_dir=f"{folder}/ray",
                                       _system_config=FAST_HEALTH_CHECKS))
    executor = None
    try:
        state = SimpleNamespace(cluster=made, worker=made.add_node(**NODE))
        executor = RayExecutor(made.address)
        state.executor = executor
        # The driver attaches to the head node, so the worker node can be killed under it.
        assert ray.get_runtime_context().get_node_id() == made.head_node.node_id
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", P.WeakKeyWarning)
            state.pk, state.sk = P.generate_keypair(2048)
        yield state
    finally:
        he.set_executor(None)
        if executor is not None:
            executor.close()
        ray.shutdown()
        made.shutdown()
        patch.undo()
        shutil.rmtree(folder, ignore_errors=True)


def _node_ids(cluster) -> set:
    return {cluster.cluster.head_node.node_id, cluster.worker.node_id}


def test_executor_joins_the_cluster_and_sees_both_nodes(cluster):
    executor = cluster.executor
    assert executor.cluster_address == cluster.cluster.address
    assert executor.n_workers == 2  # one CPU per node
    assert {n["NodeID"] for n in ray.nodes() if n["Alive"]} == _node_ids(cluster)
    # A second executor uses the connection as it is and does not own it: closing it leaves Ray connected.
    other = RayExecutor(cluster.cluster.address)
    other.close()
    assert ray.is_initialized()
    # A handle on the cluster, not a value: scikit-learn's clone keeps it, pickling rejoins the same cluster.
    from sklearn.base import clone

    from vflsec.glm import VerticalLogisticRegression

    assert clone(VerticalLogisticRegression("paillier", executor=executor)).executor is executor
    again = pickle.loads(pickle.dumps(executor))
    assert isinstance(again, RayExecutor) and again.cluster_address == executor.cluster_address


def test_paillier_through_ray_equals_the_local_pool_bit_for_bit(cluster):
    pk, sk = cluster.pk, cluster.sk
    rng = np.random.default_rng(0)
    # Sizes above what the executor keeps in this process (64 times the local pool's smallest
    # chunk: 256 encryptions, 4096 products, 4096 rows x columns of a vector-matrix product).
    x = rng.standard_normal(800)
    X = rng.uniform(-1, 1, (800, 6))
    scalars = rng.standard_normal(4096)
    enc = pk.encrypt(x, processes=1)
    long = pk.encrypt(scalars, processes=1)
    local_mul = long.mul_plain(scalars, processes=2).ciphertexts
    local_dot = enc.dot(X, processes=2).ciphertexts
    column_matrix = rng.uniform(-1, 1, (4096, 1))
    local_column = long.dot(column_matrix, processes=2).ciphertexts
    before = sum(cluster.executor.task_counts.values())
    with he.use_executor(cluster.executor):
        assert he.get_executor() is cluster.executor
        through_ray = pk.encrypt(x)
        mul = long.mul_plain(scalars)
        dot = enc.dot(X)  # 6 columns for 2 CPUs: 2 groups of 3 columns, the ciphertexts stored once
        column = long.dot(column_matrix)  # 1 column: 2 row shards multiplied together
        fresh = enc.obfuscate()
        randomizers = pk.precompute_randomness(400)
    assert he.get_executor() is not cluster.executor  # the block restored the default
    # The deterministic products: the same residues mod n^2.
    assert mul.ciphertexts == local_mul and mul.level == 2
    assert dot.ciphertexts == local_dot and dot.level == 2
    assert column.ciphertexts == local_column
    # Encryption and re-randomization draw fresh randomness: equal plaintexts, exactly.
    encoded = pk.encode(x)
    assert sk.decrypt_raw(through_ray, processes=1) == encoded
    assert sk.decrypt_raw(fresh, processes=1) == encoded
    assert not set(fresh.ciphertexts) & set(enc.ciphertexts)
    # A randomizer is an encryption of 0.
    taken = randomizers.take(pk, 400)
    assert sk.decrypt_raw(P.PaillierEncryptedVector(pk, taken), processes=1) == [0] * 400
    # The work went to Ray: encrypt, mul, both dots, obfuscate and the randomizers, a task per CPU each.
    assert sum(cluster.executor.task_counts.values()) - before == 12


def test_tasks_reach_both_nodes(cluster):
    pk = cluster.pk
    cts = pk.encrypt(np.linspace(-1, 1, 40), processes=1).ciphertexts
    scalars = [int(s) for s in np.random.default_rng(1).integers(1, 2**62, size=40)]
    before = dict(cluster.executor.task_counts)
    out = cluster.executor.map_chunks(pm.mul_chunk, [(pk.n, cts, scalars)] * 8)
    expected = pm.mul_chunk(pk.n, cts, scalars)
    assert out == [expected] * 8
    ran_on = {node for node, count in cluster.executor.task_counts.items() if count > before.get(node, 0)}
    assert ran_on == _node_ids(cluster)


def test_one_chunk_operations_take_the_nodes_in_turn(cluster):
    # Placement is by CPU slot, not Ray's best-effort SPREAD: two one-chunk operations in a row run on
    # the two one-CPU nodes, whatever the scheduler would have preferred.
    pk = cluster.pk
    cts = pk.encrypt(np.linspace(-1, 1, 8), processes=1).ciphertexts
    ran_on = set()
    for _ in range(2):
        before = dict(cluster.executor.task_counts)
        assert cluster.executor.map_chunks(pm.mul_chunk, [(pk.n, cts, [3] * 8)]) == [pm.mul_chunk(pk.n, cts, [3] * 8)]
        ran_on |= {node for node, count in cluster.executor.task_counts.items() if count > before.get(node, 0)}
    assert ran_on == _node_ids(cluster)


def test_chunks_submitted_without_waiting_come_back_as_map_chunks_gives_them(cluster):
    pk, sk, executor = cluster.pk, cluster.sk, cluster.executor
    cts = pk.encrypt(np.linspace(-1, 1, 40), processes=1).ciphertexts
    chunks = [(pk.n, cts[:20], list(range(1, 21))), (pk.n, cts[20:], list(range(-20, 0)))]

    def counts():
        return (executor.operations, len(executor.timeline), executor.background_operations,
                len(executor.background_tasks), sum(executor.task_counts.values()))

    before = counts()
    pending = executor.submit_chunks(pm.mul_chunk, chunks)
    assert pending.result() == [pm.mul_chunk(*args) for args in chunks]
    # Counted as work done in the background: its tasks, not an operation anybody waited for.
    operations, timeline, background, background_tasks, tasks = before
    assert counts() == (operations, timeline, background + 1, background_tasks + 2, tasks + 2)
    with pytest.raises(ValueError, match="key material"):
        executor.submit_chunks(pm.decrypt_chunk, [(sk.p, sk.q, cts[:2])])


def test_an_exception_of_the_chunk_function_comes_back_as_itself(cluster):
    pk = cluster.pk
    unreduced = [(pk.n, [pk.n + 5], pk.hs)] * 2  # encrypt_chunk takes plaintexts reduced modulo n
    with pytest.raises(ValueError) as caught:
        cluster.executor.map_chunks(pm.encrypt_chunk, unreduced)
    with pytest.raises(ValueError) as here:
        pm.encrypt_chunk(*unreduced[0])
    assert type(caught.value) is ValueError and str(caught.value) == str(here.value)


def _slow_chunks(pk, n_chunks: int, size: int = 300):
    """``n_chunks`` equal chunks of ``mul_chunk`` on ``size`` ciphertexts with 1024-bit
    exponents (about 4 ms a value here) and the result every chunk must give."""
    rng = np.random.default_rng(2)
    cts = pk.encrypt(rng.standard_normal(size), processes=1).ciphertexts
    scalars = [int.from_bytes(rng.bytes(128), "big") for _ in cts]
    return [(pk.n, cts, scalars)] * n_chunks, pm.mul_chunk(pk.n, cts, scalars)


def _run_in_thread(executor, func, chunks) -> SimpleNamespace:
    job = SimpleNamespace(result=None, error=None, started=time.monotonic())

    def run():
        try:
            job.result = executor.map_chunks(func, chunks)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            job.error = exc

    job.thread = threading.Thread(target=run, daemon=True)
    job.thread.start()
    return job


def _warm_both_nodes(cluster, executor, chunks) -> None:
    """Run chunks until each node has run one (its worker process up)."""
    for _ in range(10):
        before = dict(executor.task_counts)
        executor.map_chunks(pm.mul_chunk, chunks[:2])
        if {n for n, c in executor.task_counts.items() if c > before.get(n, 0)} == _node_ids(cluster):
            return
    pytest.fail("the worker node never ran a task")


def _kill_worker_mid_job(cluster, executor, chunks) -> SimpleNamespace:
    """Run ``chunks`` on ``executor``, kill the worker node while it runs one of them, and
    wait (bounded) for the job to end; a fresh worker node replaces the dead one after."""
    _warm_both_nodes(cluster, executor, chunks)
    job = _run_in_thread(executor, pm.mul_chunk, chunks)
    # Both nodes busy (no CPU left in the cluster): the worker node is running its first
    # chunk, which takes over a second; it is killed half a second into it.
    busy_by = time.monotonic() + 20.0
    while ray.available_resources().get("CPU", 0) > 0 and time.monotonic() < busy_by:
        time.sleep(0.05)
    time.sleep(0.5)
    assert job.thread.is_alive(), "the job ended before the node was killed: make the chunks slower"
    dead = cluster.worker.node_id
    cluster.cluster.remove_node(cluster.worker, allow_graceful=False)
    job.thread.join(JOB_LIMIT_S)
    job.hung = job.thread.is_alive()
    job.dead = dead
    job.seconds = time.monotonic() - job.started
    cluster.worker = cluster.cluster.add_node(**NODE)
    cluster.cluster.wait_for_nodes()
    return job


def test_a_worker_node_killed_mid_job_is_survived_by_task_retry(cluster):
    chunks, expected = _slow_chunks(cluster.pk, 4)
    job = _kill_worker_mid_job(cluster, cluster.executor, chunks)  # max_retries=3
    assert not job.hung, f"the job did not end within {JOB_LIMIT_S} s of losing a node"
    assert job.error is None, f"the job failed although its lost tasks could be retried: {job.error}"
    assert job.result is not None and len(job.result) == len(chunks)
    assert all(part == expected for part in job.result)


def test_without_retries_a_killed_worker_node_fails_the_job_in_one_line_naming_it(cluster):
    chunks, _ = _slow_chunks(cluster.pk, 4)
    job = _kill_worker_mid_job(cluster, RayExecutor(cluster.cluster.address, max_retries=0), chunks)
    assert not job.hung, f"the job did not end within {JOB_LIMIT_S} s of losing a node"
    assert isinstance(job.error, RuntimeError), f"expected a failed job, got {job.error!r} (it recovered: " \
                                                f"{job.result is not None})"
    message = str(job.error)
    assert "\n" not in message and " -- " in message
    assert "mul_chunk" in message and job.dead in message, message


def test_a_job_past_its_time_limit_fails_in_one_line_and_frees_the_cluster(cluster):
    chunks, expected = _slow_chunks(cluster.pk, 16, size=100)
    limited = RayExecutor(cluster.cluster.address, timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"not finished within timeout_s=1 s") as caught:
        limited.map_chunks(pm.mul_chunk, chunks)
    assert time.monotonic() - start < 15.0
    assert "\n" not in str(caught.value)
    # The cancelled tasks leave the cluster usable.
    assert cluster.executor.map_chunks(pm.mul_chunk, chunks[:2]) == [expected] * 2


# -- secrets stay with the key holder ------------------------------------------------------------

class RecordingRayExecutor(RayExecutor):
    """A RayExecutor that keeps every task it submits as Ray serializes it (cloudpickle),
    and the private keys alive in this process when it did."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.submitted: List[Any] = []
        self.private_keys: List[Any] = []
        self.stored: List[Any] = []
        super().__init__(*args, **kwargs)

    def _keys_now(self) -> None:
        if not self.private_keys:  # the run's key holder made its key before anything was encrypted
            self.private_keys = [o for o in gc.get_objects() if isinstance(o, P.PaillierPrivateKey)]

    def _submit(self, func, args, node=None):
        self._keys_now()
        self.submitted.append((func, args, ray.cloudpickle.dumps((func, args))))
        return super()._submit(func, args, node)

    def _put(self, value):
        # What several tasks share goes to the object store once: that is sent too.
        self._keys_now()
        self.stored.append((value, ray.cloudpickle.dumps(value)))
        return super()._put(value)


def _secret_values(sk) -> dict:
    p, q = sk.p, sk.q
    n = p * q
    lam = (p - 1) * (q - 1) // math.gcd(p - 1, q - 1)
    values = {"p": p, "q": q, "p^2": p * p, "q^2": q * q, "phi": (p - 1) * (q - 1), "lambda": lam,
              "mu": int(gmpy2.invert(lam, n)), "p^-1 mod q": int(gmpy2.invert(p, q))}
    values.update({f"phe {name}": int(getattr(sk.phe, name)) for name in ("hp", "hq", "psquare", "qsquare",
                                                                          "p_inverse")})
    return values


def _integers(value: Any) -> Iterator[int]:
    if isinstance(value, int):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _integers(item)


def _assert_nothing_secret(recorder, sk) -> None:
    secrets = _secret_values(sk)
    encodings = {name: [s.to_bytes((s.bit_length() + 7) // 8, order) for order in ("little", "big")]
                 + [str(s).encode()] for name, s in secrets.items()}
    sent = [(func, args, blob) for func, args, blob in recorder.submitted]
    sent += [(None, value, blob) for value, blob in recorder.stored]
    for func, args, blob in sent:
        what = "the object store" if func is None else func.__name__
        assert func is None or not he.executor.is_local_only(func)
        leaked = set(_integers(list(args))) & set(secrets.values())
        assert not leaked, f"{what} was given a private-key value"
        for name, forms in encodings.items():
            assert not any(form in blob for form in forms), f"{name} is in the bytes sent to {what}"


PUBLIC_WORK = {pm.encrypt_chunk, pm.obfuscate_chunk, pm.randomizers_chunk, pm.mul_chunk, pm.dot_columns_chunk}


def test_no_private_key_value_is_serialized_to_a_ray_task(cluster):
    pk, sk = cluster.pk, cluster.sk
    recorder = RecordingRayExecutor(cluster.cluster.address)
    rng = np.random.default_rng(3)
    # Above the sizes the executor keeps in this process (see the bit-for-bit test).
    x, X = rng.standard_normal(4096), rng.uniform(-1, 1, (4096, 3))
    with he.use_executor(recorder):
        enc = pk.encrypt(x)
        enc.dot(X)  # 3 columns for 2 CPUs: the ciphertexts go to the object store once
        wire = enc.mul_plain(x).to_bytes()  # re-randomized before it is sent: obfuscate through Ray
        pk.precompute_randomness(300)
        # The key holder's work: decryption stays in this process and its local pool.
        decrypted = sk.decrypt(enc)
        squares = sk.decrypt(P.PaillierEncryptedVector.from_bytes(pk, wire), processes=2)
    assert np.allclose(decrypted, x, atol=1e-11)
    assert np.allclose(squares, x * x, atol=1e-9)
    assert {func for func, _, _ in recorder.submitted} == PUBLIC_WORK
    assert [len(value) for value, _ in recorder.stored] == [4096]  # the dot's shared ciphertexts
    _assert_nothing_secret(recorder, sk)
    # A function that takes key material is refused outright.
    with pytest.raises(ValueError, match="key material"):
        recorder.map_chunks(pm.decrypt_chunk, [(sk.p, sk.q, enc.ciphertexts[:2])] * 2)


# -- the estimator ----------------------------------------------------------------------------------

def _estimator(executor=None):
    from vflsec.glm import VerticalLogisticRegression

    return VerticalLogisticRegression("paillier", key_bits=2048, epochs=1, batch_size=1024, lr=1.0,
                                      executor=executor, timeout=JOB_LIMIT_S)


def _fit(model, parts, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.WeakKeyWarning)
        return model.fit(parts, y)


def test_estimator_fit_through_ray_equals_the_local_pool_and_ships_no_secret(cluster):
    rng = np.random.default_rng(4)
    # Batches of 1024 rows and 4 columns a party: big enough for Ray tasks (see the bit-for-bit test).
    n = 2048
    parts = [rng.uniform(-1, 1, (n, 4)), rng.uniform(-1, 1, (n, 4))]
    y = np.where(parts[0][:, 0] + parts[1][:, 1] + 0.3 * rng.standard_normal(n) > 0, 1, 0)
    local = _fit(_estimator(), parts, y)
    recorder = RecordingRayExecutor(cluster.cluster.address)
    through_ray = _fit(_estimator(recorder), parts, y)
    assert he.get_executor() is not recorder  # the fit's executor was for the fit only
    for a, b in zip(local.coef_, through_ray.coef_):
        assert np.array_equal(a, b)
    assert local.intercept_ == through_ray.intercept_
    # Encryption (its randomizers, made ahead in the background) and the products went to Ray;
    # the key holder's key never did.
    funcs = {func for func, _, _ in recorder.submitted}
    assert {pm.randomizers_chunk, pm.dot_columns_chunk} <= funcs <= PUBLIC_WORK
    assert recorder.background_operations > 0
    # The run's own key (made by its key holder) was alive when the tasks were submitted.
    assert any(key is not cluster.sk for key in recorder.private_keys)
    for key in recorder.private_keys:
        _assert_nothing_secret(recorder, key)


# -- the party file ----------------------------------------------------------------------------------

def test_party_file_compute_ray_sets_the_executor(cluster, party_files):
    from vflsec.runtime.startup import prepare_party

    config = party_files({"engine": "ray", "address": cluster.cluster.address})
    try:
        prepare_party(config, insecure=True)
        executor = he.get_executor()
        assert isinstance(executor, RayExecutor) and executor.cluster_address == cluster.cluster.address
    finally:
        he.set_executor(None)
