"""A party's aligned rows as Parquet shards, streamed per batch (vflsec.glm.shards, issue 28): the rows
read back are the rows written, training on them is bit for bit training on the rows in memory with the
same shard-local schedule ("plain" and "hdp"), and at most two shards are ever held."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from vflsec.glm.job import GLMJob, PartyData  # noqa: E402
from vflsec.glm.model import GLMDesign  # noqa: E402
from vflsec.glm.registry import register_protocol  # noqa: E402
from vflsec.glm.runner import run_job  # noqa: E402
from vflsec.glm.shards import ShardedTable  # noqa: E402


def _parties(n=700, widths=(3, 4, 2), seed=0, loss="logistic"):
    rng = np.random.default_rng(seed)
    blocks = [1.5 * rng.standard_normal((n, d)) for d in widths]
    signal = blocks[0][:, 0] - blocks[-1][:, 1] + 0.3 * rng.standard_normal(n)
    y = (signal > 0.2).astype(float) if loss == "logistic" else 3.0 * signal + 1.0
    return blocks, y, rng.permutation(n)  # rows as read, their labels, the aligned order


def _tables(tmp_path, blocks, order, targets, shard_rows):
    tables = []
    for p, X in enumerate(blocks):
        folder = tmp_path / f"party{p}"
        folder.mkdir()
        tables.append(ShardedTable.write(folder, X, order, shard_rows, targets if p == 0 else None))
    return tables


def _run(job, design, parts, targets):
    names = (job.active, *job.passives)
    data = {name: PartyData(design.rows(X, "active" if i == 0 else "passive", order), targets if i == 0 else None)
            for i, (name, (X, order)) in enumerate(zip(names, parts))}
    return run_job(job, data)


def test_the_rows_read_back_are_the_rows_written(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((250, 3))
    order = rng.permutation(250)
    labels = rng.standard_normal(250)
    table = ShardedTable.write(tmp_path, X, order, 60, labels)
    aligned = X[order]
    assert table.shape == (250, 3) and len(table) == 250 and table.n_shards == 5
    assert [path.name for path in table.files()] == [f"shard-{s:06d}.parquet" for s in range(5)]
    idx = rng.permutation(250)[:77]
    assert table[idx].tobytes() == aligned[idx].tobytes()
    assert table[55:185].tobytes() == aligned[55:185].tobytes()
    assert table[np.array([-1, 0])].tobytes() == aligned[[-1, 0]].tobytes()
    assert table.labels is not None and table.labels[idx].tobytes() == labels[idx].tobytes()
    assert np.asarray(table).tobytes() == aligned.tobytes()
    assert np.asarray(table.labels).tobytes() == labels.tobytes()
    assert table.max_resident == 2
    table.remove()
    assert list(tmp_path.iterdir()) == [] and table.resident == 0


@pytest.mark.parametrize("protocol,loss", [("plain", "logistic"), ("hdp", "logistic"), ("hdp", "least_squares")])
def test_streaming_the_shards_trains_the_model_of_the_rows_in_memory(tmp_path, protocol, loss):
    blocks, y, order = _parties(loss=loss)
    design = GLMDesign(loss=loss)
    labels = design.fit_labels(y[order])
    targets = labels.encode(y[order])
    extra = dict(noise_seed=9, epsilon=2.0) if protocol == "hdp" else {}
    job = GLMJob(protocol, n_samples=len(y), loss=loss, batch_size=64, epochs=3, seed=2, lr=0.3, shard_rows=150,
                 passives=("p1", "p2"), **extra)
    in_memory = _run(job, design, [(X, order) for X in blocks], targets)
    tables = _tables(tmp_path, blocks, order, targets, 150)
    names = (job.active, *job.passives)
    data = {name: PartyData(design.rows(table, "active" if i == 0 else "passive"),
                            table.labels if i == 0 else None) for i, (name, table) in enumerate(zip(names, tables))}
    streamed = run_job(job, data)
    for name in names:
        assert streamed.results[name].coef.tobytes() == in_memory.results[name].coef.tobytes(), name
    assert streamed.results["active"].history == in_memory.results["active"].history
    assert all(table.max_resident == 2 for table in tables)
    # And the shard-local order is the job's: the global permutation trains another model.
    unsharded = _run(dataclasses.replace(job, shard_rows=0), design, [(X, order) for X in blocks], targets)
    assert unsharded.results["active"].coef.tobytes() != in_memory.results["active"].coef.tobytes()


def test_an_epoch_reads_each_shard_once_and_holds_at_most_two(tmp_path):
    blocks, y, order = _parties(n=1000, widths=(3, 2))
    table = ShardedTable.write(tmp_path, blocks[0], order, 96, y[order])
    job = GLMJob("plain", n_samples=1000, batch_size=64, epochs=4, seed=3, shard_rows=96)
    aligned = blocks[0][order]
    labels = table.labels
    assert labels is not None
    epoch_loads = {}
    for epoch, _, idx in job.batches():
        if epoch not in epoch_loads:
            table.release()  # count this epoch's reads alone
            epoch_loads[epoch] = table.loads
        assert table[idx].tobytes() == aligned[idx].tobytes()
        assert labels[idx].tobytes() == y[order][idx].tobytes()  # from the shards just read: no read of its own
        assert table.resident <= 2
    loads = np.diff([*epoch_loads.values(), table.loads])
    assert loads.tolist() == [table.n_shards] * 4 == [11] * 4
    assert table.max_resident == 2


def test_a_batch_larger_than_a_shard_still_holds_two(tmp_path):
    # GLMJob refuses shard_rows below batch_size; the table itself reads any selection, shard after shard.
    X = np.arange(200.0).reshape(100, 2)
    table = ShardedTable.write(tmp_path, X, None, 10)
    assert table[np.arange(95, 5, -1)].tobytes() == X[95:5:-1].tobytes()
    assert table.max_resident == 2 and table.loads == 10


def test_a_shard_that_changed_during_the_run_is_named(tmp_path):
    table = ShardedTable.write(tmp_path, np.ones((30, 2)), None, 10)
    table.files()[1].unlink()
    with pytest.raises(ValueError, match=r"shard 1 of the party's rows .*shard-000001.parquet.* cannot be read"):
        table[np.array([15])]
    table2 = ShardedTable.write(tmp_path, np.ones((20, 2)), None, 10)
    ShardedTable.write(tmp_path, np.ones((10, 3)), None, 10)  # shard 0 overwritten with other columns
    with pytest.raises(ValueError, match="the file changed during the run"):
        table2[np.array([0])]


def test_bad_selections_and_bad_rows_are_refused(tmp_path):
    table = ShardedTable.write(tmp_path, np.ones((30, 2)), None, 10)
    with pytest.raises(IndexError, match="outside the 30 rows"):
        table[np.array([30])]
    with pytest.raises(TypeError, match="1-D integer index array or a slice"):
        table[np.array([0.5])]
    with pytest.raises(TypeError, match="pass no index"):
        GLMDesign().rows(table, "active", np.arange(30))
    with pytest.raises(ValueError, match="no feature columns"):
        ShardedTable.write(tmp_path, np.ones((3, 0)), None, 10)
    with pytest.raises(ValueError, match="2 labels for 3 rows"):
        ShardedTable.write(tmp_path, np.ones((3, 1)), None, 10, np.ones(2))


@pytest.mark.parametrize("value,error,match", [
    (-1, ValueError, "shard_rows must be >= 0"), (True, TypeError, "shard_rows must be an integer, got bool"),
    (64.0, TypeError, "shard_rows must be an integer, got float"),
    (63, ValueError, r"shard_rows must be 0 \(no shards\) or at least batch_size \(64\), got 63"),
])
def test_bad_shard_rows_is_one_clear_error(value, error, match):
    with pytest.raises(error, match=match):
        GLMJob("plain", n_samples=100, batch_size=64, shard_rows=value)
    assert GLMJob("plain", n_samples=100, batch_size=64, shard_rows=64).shard_rows == 64
    assert GLMJob("plain", n_samples=100, batch_size=64, shard_rows=10 ** 9).shard_rows == 10 ** 9  # one shard


def test_protocols_that_do_not_read_by_the_job_batches_refuse_shard_rows():
    blocks, y, _ = _parties(n=200, widths=(2, 2))
    job = GLMJob("paillier", n_samples=200, batch_size=50, shard_rows=100, coordinator="c", key_bits=2048)
    data = {"active": PartyData(blocks[0], np.where(y > 0, 1.0, -1.0)), "passive": PartyData(blocks[1])}
    with pytest.raises(ValueError, match="protocol 'paillier' does not take shard_rows"):
        run_job(job, data)

    def program(endpoint, job, data):  # a protocol that did not declare shard_schedule
        raise AssertionError("never started")

    register_protocol("_test_no_shards", {"active": program, "passive": program}, replace=True)
    with pytest.raises(ValueError, match="'_test_no_shards' does not take shard_rows"):
        run_job(GLMJob("_test_no_shards", n_samples=200, batch_size=50, shard_rows=100), data)
    with pytest.raises(TypeError, match="shard_schedule"):
        register_protocol("_test_no_shards", {"active": program, "passive": program}, replace=True,
                          shard_schedule="yes")  # type: ignore[arg-type]
