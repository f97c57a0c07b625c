"""Paillier randomizers made ahead in the background (issue 28: the offline work of a Paillier
epoch off the step's path): ``PaillierPublicKey.randomness_stream``, ``Executor.submit_chunks``.

A stream makes the randomizers of the next planned requests on the executor without waiting
for them, and serves each planned request from them; what it hands out are encryptions of 0
(a randomizer is one), each once; a request of another size is made now; it never leaves its
process. The local pool's ``submit_chunks`` returns what ``map_chunks`` does. (Through Ray:
tests/he/test_executor_ray.py.)
"""
from __future__ import annotations

import pickle
import warnings
from typing import Any, Callable, List, Sequence

import numpy as np
import pytest

pytest.importorskip("phe")
pytest.importorskip("gmpy2")

from vflsec import he  # noqa: E402
from vflsec.he import _paillier_math as pm  # noqa: E402
from vflsec.he import paillier as P  # noqa: E402
from vflsec.he.executor import Executor, LocalPoolExecutor, PendingChunks  # noqa: E402


class _Deferred(PendingChunks):
    def __init__(self, owner: "DeferringExecutor", func: Callable[..., Any], args_per_chunk: Sequence[tuple]):
        self.owner, self.func, self.args_per_chunk = owner, func, args_per_chunk
        self.cancelled = False

    def result(self) -> List[Any]:
        assert not self.cancelled
        self.owner.collected.append(self)
        return [self.func(*args) for args in self.args_per_chunk]

    def cancel(self) -> None:
        self.cancelled = True


class DeferringExecutor(Executor):
    """An executor whose submitted chunks run only when their result is asked for (as a
    remote worker's would be done by then); it keeps what it was given."""

    ships_arguments = True

    def __init__(self, workers: int = 2):
        self.workers = workers
        self.submitted: List[_Deferred] = []
        self.collected: List[_Deferred] = []
        self.mapped: List[Callable[..., Any]] = []
        self.mapped_items: List[int] = []  # per map_chunks call: the items of its chunks

    @property
    def n_workers(self) -> int:
        return self.workers

    def map_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> List[Any]:
        self.mapped.append(func)
        self.mapped_items.append(sum(len(args[1]) for args in args_per_chunk))
        return [func(*args) for args in args_per_chunk]

    def submit_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> PendingChunks:
        self.submitted.append(_Deferred(self, func, args_per_chunk))
        return self.submitted[-1]


def _values(operation: _Deferred) -> int:
    return sum(len(args[1]) for args in operation.args_per_chunk)


def _decrypt(sk, pk, values) -> List[int]:
    return sk.decrypt_raw(P.PaillierEncryptedVector(pk, values), processes=1)


def test_a_stream_serves_the_planned_requests_from_work_started_ahead(keypair):
    pk, sk = keypair
    executor = DeferringExecutor()
    with he.use_executor(executor):
        stream = pk.randomness_stream(iter([8, 6, 8, 5]), ahead=2)
        # On creation: the next two requests' values (8 + 6), as one background operation split as
        # the executor splits its operations.
        assert [_values(op) for op in executor.submitted] == [14] and executor.collected == []
        assert all(func is pm.randomizers_chunk for func in (op.func for op in executor.submitted))
        chunks = [len(args[1]) for args in executor.submitted[0].args_per_chunk]
        assert chunks == [b - a for a, b in executor.chunk_bounds(14, 2, 4)] and len(stream) == 0
        stream.refill()  # nothing missing: nothing new
        assert len(executor.submitted) == 1
        x = np.linspace(-1, 1, 8)
        enc = pk.encrypt(x, randomness=stream)  # the first planned request
        assert executor.collected == executor.submitted and len(stream) == 6 and executor.mapped == []
        np.testing.assert_allclose(sk.decrypt(enc, processes=1), x, atol=1e-11)
        stream.refill()  # the plan's third request (8) is missing now
        assert [_values(op) for op in executor.submitted] == [14, 8]
        # A request of another size than the next planned one is made now; the plan stays.
        off_plan = stream.take(pk, 3)
        assert executor.mapped == [pm.randomizers_chunk] and len(stream) == 6
        assert _decrypt(sk, pk, off_plan) == [0] * 3  # a randomizer is an encryption of 0
        second = stream.take(pk, 6)
        third = stream.take(pk, 8)
        assert _decrypt(sk, pk, second + third) == [0] * 14
        assert len({*second, *third, *off_plan, *enc.ciphertexts}) == 3 + 6 + 8 + 8  # each value once
        # Nothing was made ahead for the last request: it is made when asked for.
        assert len(executor.submitted) == 2
        assert _decrypt(sk, pk, stream.take(pk, 5)) == [0] * 5 and executor.mapped[-1] is pm.randomizers_chunk
        # The plan is done: refilling starts nothing.
        stream.refill()
        assert len(executor.submitted) == 2


def test_a_stream_can_be_closed_stays_in_its_process_and_refuses_another_key(keypair):
    pk, _ = keypair
    executor = DeferringExecutor()
    with he.use_executor(executor):
        stream = pk.randomness_stream([4, 4])
    with pytest.raises(TypeError, match="must not leave its process"):
        pickle.dumps(stream)
    other = P.PaillierPublicKey(pk.n + 2)  # a modulus of its own: another key
    with pytest.raises(ValueError, match="another public key"):
        stream.take(other, 4)
    with pytest.raises(ValueError):
        pk.randomness_stream([4], ahead=0)
    with pytest.raises(ValueError):
        pk.randomness_stream([4, -1], ahead=2)
    stream.close()
    assert executor.submitted[0].cancelled and len(stream) == 0
    with he.use_executor(executor):
        assert len(stream.take(pk, 4)) == 4  # after close: made now
    assert executor.collected == []


def test_re_randomizing_with_taken_randomness_keeps_the_plaintexts(keypair):
    pk, sk = keypair
    x = np.array([0.25, -3.5, 1e-6, 7.0])
    enc = pk.encrypt(x, processes=1)
    product = enc.mul_plain(x, processes=1)
    pool = pk.precompute_randomness(8, processes=1)
    fresh = product.obfuscate(randomness=pool)
    assert fresh.rerandomized and len(pool) == 4 and fresh.level == product.level == 2
    assert not set(fresh.ciphertexts) & set(product.ciphertexts)
    np.testing.assert_allclose(sk.decrypt(fresh, processes=1), x * x, atol=1e-9)
    wire = product.to_bytes(randomness=pool)  # re-randomized from the pool before it is sent
    assert len(pool) == 0
    sent = P.PaillierEncryptedVector.from_bytes(pk, wire)
    assert not set(sent.ciphertexts) & set(product.ciphertexts)
    np.testing.assert_allclose(sk.decrypt(sent, processes=1), x * x, atol=1e-9)
    assert enc.to_bytes(randomness=pool) == enc.to_bytes()  # fresh already: nothing taken
    with pytest.raises(ValueError, match="ciphertexts but"):
        pm.rerandomize_with(pk.n, [1, 2], [3])


def test_the_local_pools_submitted_chunks_give_what_map_chunks_gives(keypair):
    pk, _ = keypair
    cts = pk.encrypt(np.linspace(-1, 1, 12), processes=1).ciphertexts
    chunks = [(pk.n, cts[:6], list(range(1, 7))), (pk.n, cts[6:], list(range(-6, 0)))]
    expected = [pm.mul_chunk(*args) for args in chunks]
    pool = LocalPoolExecutor(2)
    try:
        pending = pool.submit_chunks(pm.mul_chunk, chunks)
        assert pending.result() == expected == pool.map_chunks(pm.mul_chunk, chunks)
        assert pool.submit_chunks(pm.mul_chunk, chunks[:1]).result() == expected[:1]  # one chunk: to the pool too
    finally:
        pool.close()
    assert LocalPoolExecutor(1).submit_chunks(pm.mul_chunk, chunks).result() == expected  # in this process


def test_a_paillier_party_makes_its_batch_randomness_ahead(keypair):
    """The HE-VFL parties tell their scheme the batch sizes to come: a Paillier party's
    encryptions and re-randomizations then take randomizers made ahead, and the fit is the
    one without them bit for bit."""
    from vflsec.glm import VerticalLogisticRegression

    rng = np.random.default_rng(5)
    parts = [rng.uniform(-1, 1, (300, 2)), rng.uniform(-1, 1, (300, 2))]
    y = (parts[0][:, 0] + parts[1][:, 1] > 0).astype(int)

    def fit(executor=None):
        model = VerticalLogisticRegression("paillier", key_bits=2048, epochs=2, batch_size=100, lr=1.0,
                                           executor=executor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", P.WeakKeyWarning)
            return model.fit(parts, y)

    reference = fit(LocalPoolExecutor(1))
    executor = DeferringExecutor()
    model = fit(executor)
    for a, b in zip(reference.coef_, model.coef_):
        assert np.array_equal(a, b)
    assert reference.intercept_ == model.intercept_
    # 2 epochs of 3 batches of 100 rows: both data parties made 600 randomizers ahead, in the background.
    made = [_values(op) for op in executor.submitted]
    assert sum(made) == 2 * 600 and all(op in executor.collected for op in executor.submitted)
    # Encryption and re-randomization of a batch never waited for a randomizer made then: what
    # was encrypted or re-randomized whole here is the loss term (1 value) and the masked
    # gradients (2 values; 3 with the active party's intercept), never a batch.
    whole = [items for func, items in zip(executor.mapped, executor.mapped_items)
             if func in (pm.encrypt_chunk, pm.obfuscate_chunk, pm.randomizers_chunk)]
    assert whole and set(whole) <= {1, 2, 3}


def test_on_the_local_pool_a_paillier_party_makes_no_randomness_ahead(keypair):
    """The local pool is the reference: its round trip is cheap, so a party there encrypts and
    re-randomizes as before (randomizer chunks made ahead would wait in its queue)."""
    from vflsec.glm.job import GLMJob
    from vflsec.glm.paillier import PaillierScheme

    pk, sk = keypair

    class RecordingPool(LocalPoolExecutor):
        def __init__(self) -> None:
            super().__init__(1)
            self.submitted: List[Callable[..., Any]] = []

        def submit_chunks(self, func: Callable[..., Any], args_per_chunk: Sequence[tuple]) -> PendingChunks:
            self.submitted.append(func)
            return super().submit_chunks(func, args_per_chunk)

    job = GLMJob(protocol="paillier", n_samples=40, batch_size=20, epochs=1, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048)
    x = np.linspace(-1, 1, 20)
    for executor, ahead in [(RecordingPool(), False), (DeferringExecutor(), True)]:
        with he.use_executor(executor):
            scheme = PaillierScheme(pk.to_dict(), job)
            scheme.prepare_fresh([20, 20])
            enc = scheme.encrypt(x)
        assert bool(executor.submitted) is ahead
        np.testing.assert_allclose(sk.decrypt(enc, processes=1), x, atol=1e-11)
