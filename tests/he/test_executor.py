"""The executor interface of a party's HE vector work (issue 28, item 2), without a Ray cluster.

The local pool stays the default and keeps ``set_num_processes``; an executor that
ships its tasks' arguments gets row shards (the vector-matrix product split by
rows, the shards' products multiplied together) and gives the local pool's
results bit for bit; decryption never goes to an executor other than the local
pool; the estimators take ``executor=``; a party file's ``[compute]`` table is
checked, and a Ray cluster that does not answer is one line and exit status 2
before any peer is contacted. The real Ray cluster is tests/he/test_executor_ray.py.
"""
from __future__ import annotations

import shutil
import tempfile
import time
import warnings
from typing import Any, Callable, List, Sequence

import numpy as np
import pytest

pytest.importorskip("phe")
pytest.importorskip("gmpy2")

from vflsec import he  # noqa: E402
from vflsec.he import _paillier_math as pm  # noqa: E402
from vflsec.he import paillier as P  # noqa: E402
from vflsec.he.executor import Executor, LocalPoolExecutor, executor_for, is_local_only  # noqa: E402


@pytest.fixture(autouse=True)
def default_executor():
    he.set_executor(None)
    yield
    he.set_executor(None)


class ShardingExecutor(Executor):
    """An executor whose tasks' arguments travel (as Ray's do), run here in this process;
    it keeps the functions it was given."""

    ships_arguments = True

    def __init__(self, workers: int = 3, task_items: int = 0):
        self.workers = workers
        self.min_task_items = task_items
        self.functions: List[Callable[..., Any]] = []
        self.jobs: List[Sequence[tuple]] = []

    @property
    def n_workers(self) -> int:
        return self.workers

    def task_items(self, min_chunk: int) -> int:
        return self.min_task_items

    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        self.functions.extend([func] * len(args_per_chunk))
        self.jobs.append(args_per_chunk)
        return [func(*args) for args in args_per_chunk]


def test_the_local_pool_is_the_default_and_follows_set_num_processes():
    default = he.get_executor()
    assert isinstance(default, LocalPoolExecutor) and not default.ships_arguments
    previous = he.get_num_processes()
    try:
        he.set_num_processes(3)
        assert default.n_workers == 3 and executor_for(None) == (default, 3)
        assert executor_for(1)[1] == 1 and executor_for(2) == (LocalPoolExecutor(2), 2)
    finally:
        he.set_num_processes(previous)
    assert LocalPoolExecutor(processes=2).n_workers == 2
    with pytest.raises(ValueError):
        LocalPoolExecutor(processes=0)


def test_set_and_use_executor():
    shards = ShardingExecutor()
    previous = he.set_executor(shards)
    assert isinstance(previous, LocalPoolExecutor) and he.get_executor() is shards
    assert he.set_executor(None) is shards and isinstance(he.get_executor(), LocalPoolExecutor)
    with pytest.raises(RuntimeError, match="inside"):
        with he.use_executor(shards):
            assert he.get_executor() is shards
            raise RuntimeError("inside")
    assert isinstance(he.get_executor(), LocalPoolExecutor)
    with he.use_executor(None) as current:  # None leaves the current executor
        assert current is he.get_executor()
    with pytest.raises(TypeError, match="vflsec.he.Executor"):
        he.set_executor("ray")
    # An explicit process count on a shipping executor splits for that many workers there.
    with he.use_executor(shards):
        assert executor_for(None) == (shards, 3) and executor_for(5) == (shards, 5)
        assert isinstance(executor_for(None, holds_secret=True)[0], LocalPoolExecutor)


def test_blocks_of_rows_and_columns_give_the_local_pools_results_bit_for_bit(keypair):
    pk, sk = keypair
    rng = np.random.default_rng(0)
    x, X = rng.standard_normal(300), rng.uniform(-2, 2, (300, 4))
    enc = pk.encrypt(x, processes=1)
    local_dot = enc.dot(X, processes=2).ciphertexts
    local_column = enc.dot(X[:, 1:2], processes=2).ciphertexts
    local_mul = enc.mul_plain(x, processes=2).ciphertexts
    shards = ShardingExecutor(workers=2)
    with he.use_executor(shards):
        dot = enc.dot(X)  # 4 columns for 2 workers: 2 groups of 2 columns, every row
        by_columns = shards.jobs[-1]
        column = enc.dot(X[:, 1:2])  # 1 column for 2 workers: 2 row shards of 150 rows
        by_rows = shards.jobs[-1]
        mul = enc.mul_plain(x)
        fresh = pk.encrypt(x)
        decrypted = sk.decrypt_raw(fresh)
    assert dot.ciphertexts == local_dot and mul.ciphertexts == local_mul
    assert column.ciphertexts == local_column and column.level == dot.level == 2
    assert decrypted == pk.encode(x)
    # Each task gets its block; the column groups share one list of ciphertexts (shipped once).
    assert [len(args[2]) for args in by_columns] == [2, 2] and by_columns[0][1] is by_columns[1][1]
    assert [(len(args[1]), len(args[2])) for args in by_rows] == [(150, 1), (150, 1)]
    # Decryption took the local pool, never the shipping executor.
    assert pm.decrypt_chunk not in shards.functions and is_local_only(pm.decrypt_chunk)
    assert not any(is_local_only(f) for f in shards.functions)


def test_a_grid_of_more_workers_than_columns_splits_the_rows_and_shares_each_shard(keypair):
    pk, _ = keypair
    rng = np.random.default_rng(1)
    x, X = rng.standard_normal(300), rng.uniform(-2, 2, (300, 3))
    enc = pk.encrypt(x, processes=1)
    local_dot = enc.dot(X, processes=2).ciphertexts
    shards = ShardingExecutor(workers=8)
    with he.use_executor(shards):
        dot = enc.dot(X)
    assert dot.ciphertexts == local_dot
    # 3 columns for 8 workers: one column per group, 2 row shards (8 // 3), so 6 tasks.
    job = shards.jobs[-1]
    assert [(len(args[1]), len(args[2])) for args in job] == [(150, 1)] * 6
    assert job[0][1] is job[1][1] is job[2][1] and job[3][1] is job[4][1] is job[5][1]
    assert job[0][1] is not job[3][1]


def test_work_below_an_executors_task_size_stays_in_this_process_and_one_task_is_shipped(keypair):
    pk, sk = keypair
    x = np.linspace(-1, 1, 40)
    enc = pk.encrypt(x, processes=1)
    expected = enc.dot(np.ones((40, 2)), processes=1).ciphertexts
    small = ShardingExecutor(workers=2, task_items=10**6)
    with he.use_executor(small):
        assert he.executor.split_work(None, 40, 4) == (LocalPoolExecutor(1), [(0, 40)])
        assert sk.decrypt_raw(pk.encrypt(x)) == pk.encode(x)
        assert enc.dot(np.ones((40, 2))).ciphertexts == expected
    assert small.functions == []
    # An operation of one chunk (6 values: one chunk of at least 4) still goes to the shipping executor.
    single = ShardingExecutor(workers=1)
    with he.use_executor(single):
        assert sk.decrypt_raw(pk.encrypt(x[:6])) == pk.encode(x[:6])
    assert single.functions == [pm.encrypt_chunk]
    assert he.executor.even_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert he.executor.even_bounds(2, 4) == [(0, 1), (1, 2)] and he.executor.even_bounds(0, 3) == []


def test_multiply_shards_refuses_shards_of_different_widths(keypair):
    pk, _ = keypair
    assert pm.multiply_shards(pk.n, []) == []
    with pytest.raises(ValueError, match="columns"):
        pm.multiply_shards(pk.n, [[1, 2], [3]])


def test_estimator_takes_an_executor_and_does_not_save_it(tmp_path):
    from vflsec.glm import VerticalLogisticRegression

    rng = np.random.default_rng(1)
    parts = [rng.uniform(-1, 1, (256, 2)), rng.uniform(-1, 1, (256, 2))]
    y = (parts[0][:, 0] + parts[1][:, 1] > 0).astype(int)
    shards = ShardingExecutor(workers=2)
    model = VerticalLogisticRegression("paillier", key_bits=2048, epochs=1, batch_size=256, executor=shards)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.WeakKeyWarning)
        model.fit(parts, y)
    assert pm.encrypt_chunk in shards.functions and pm.dot_columns_chunk in shards.functions
    assert isinstance(he.get_executor(), LocalPoolExecutor)  # for the fit only
    path = tmp_path / "model.json"
    model.save(path)
    assert VerticalLogisticRegression.load(path).executor is None
    with pytest.raises(TypeError, match="vflsec.he.Executor"):
        VerticalLogisticRegression("paillier", key_bits=2048, epochs=1, executor="ray").fit(parts, y)


def test_ray_executor_checks_its_arguments_before_connecting():
    from vflsec.he.ray_executor import RayExecutor

    for bad, error in [(dict(address="ray://head:10001"), ValueError), (dict(address="head"), ValueError),
                       (dict(address=6379), TypeError), (dict(num_cpus=0), ValueError),
                       (dict(max_retries=-1), ValueError), (dict(timeout_s=0), ValueError)]:
        with pytest.raises(error):
            RayExecutor(**bad)


def test_ray_executor_at_an_address_where_nothing_answers_fails_in_one_line_at_once():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is initialised in this process: an executor would use that connection")
    from vflsec.he.ray_executor import RayExecutor
    from vflsec.runtime.launch import free_ports

    address = f"127.0.0.1:{free_ports(1)[0]}"
    start = time.monotonic()
    with pytest.raises(ConnectionError) as caught:
        RayExecutor(address, connect_timeout_s=5.0)
    assert time.monotonic() - start < 10.0 and not ray.is_initialized()
    message = str(caught.value)
    assert "\n" not in message and f"no Ray cluster answers at {address}" in message and " -- " in message


@pytest.mark.slow
@pytest.mark.network
def test_ray_executor_without_an_address_runs_a_ray_instance_of_its_own_and_stops_it(keypair, monkeypatch):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is initialised in this process: an executor would use that connection")
    from vflsec.he.ray_executor import RayExecutor

    pk, _ = keypair
    # Ray's files in a short folder of the test's own (its unix socket paths must stay below 108 characters).
    folder = tempfile.mkdtemp(prefix="vr", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    executor = RayExecutor(num_cpus=1)
    try:
        assert ray.is_initialized() and executor.n_workers == 1
        cts = pk.encrypt([0.5, -1.5, 2.0], processes=1).ciphertexts
        assert executor.map_chunks(pm.mul_chunk, [(pk.n, cts, [3, -2, 7])] * 2) == [
            pm.mul_chunk(pk.n, cts, [3, -2, 7])] * 2
        assert sum(executor.task_counts.values()) == 2
    finally:
        executor.close()  # it started this instance: close stops it
        shutil.rmtree(folder, ignore_errors=True)
    assert not ray.is_initialized()


# -- the party file's [compute] table ---------------------------------------------------------------

@pytest.mark.parametrize("table, expected", [
    ({"engine": "spark"}, "[compute] engine must be one of 'local', 'ray', got 'spark'"),
    ({"engine": "local", "address": "10.0.0.5:6379"}, "[compute] address is set but engine is 'local'"),
    ({"engine": "ray", "address": "head-node"}, "is not HOST:PORT"),
    ({"engine": "ray", "workers": "4"}, "unknown [compute] keys ['workers']"),
    ({"engine": 1}, "[compute] engine must be a non-empty string"),
])
def test_compute_table_mistakes_are_refused_with_a_fix(party_files, table, expected):
    from vflsec.runtime.config import load_party_config

    with pytest.raises(ValueError) as caught:
        load_party_config(party_files(table))
    assert expected in str(caught.value)


def test_compute_table_defaults_to_the_local_pool(party_files):
    from vflsec.runtime.config import load_party_config
    from vflsec.runtime.startup import prepare_party

    assert load_party_config(party_files({})).compute == {"engine": "local"}
    assert load_party_config(party_files({"engine": "ray", "address": "auto"})).compute["address"] == "auto"
    he.set_executor(ShardingExecutor())
    prepare_party(party_files({"engine": "local"}), insecure=True)
    assert he.get_executor() == LocalPoolExecutor()


def _party(capsys, config):
    from vflsec import cli

    started = time.monotonic()
    with pytest.raises(SystemExit) as info:
        cli.main(["party", "--config", str(config), "--insecure"])
    return info.value.code, capsys.readouterr().err, time.monotonic() - started


def test_an_unknown_engine_is_one_line_and_exit_2(capsys, party_files):
    code, err, _ = _party(capsys, party_files({"engine": "spark"}))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("vflsec party: error: ") and "engine = \"local\"" in err.split(" -- ", 1)[1]


def test_a_ray_cluster_that_does_not_answer_is_one_line_and_exit_2_before_any_peer(capsys, party_files):
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("Ray is initialised in this process: the party would use that connection")
    from vflsec.runtime.launch import free_ports

    address = f"127.0.0.1:{free_ports(1)[0]}"
    code, err, elapsed = _party(capsys, party_files({"engine": "ray", "address": address}))
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"vflsec party: error: [compute]: no Ray cluster answers at {address}")
    assert " -- " in err and elapsed < 30.0  # the address check waits 10 s at most
    assert not ray.is_initialized()
