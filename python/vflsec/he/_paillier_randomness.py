"""Paillier randomizers computed ahead of time: :class:`RandomnessPool` (a number of
them, now) and :class:`RandomnessStream` (those of a planned sequence of requests,
in the background).

The expensive part of an encryption or a re-randomization is its randomizer
(``hs^alpha``, or ``r^n`` for a key without ``hs``: :mod:`vflsec.he._paillier_math`);
with it at hand one modular product per value is left ((1 + m n) rho, or c rho,
mod n^2). Both give ciphertexts of the same distribution as computing everything
at once, and the same plaintexts.

Whoever learns a randomizer can decrypt the ciphertext it randomized: each value
is used once and removed as it is taken, neither object is ever serialized, and
taking from one in a forked child raises (parent and child would use the same
values). The executor's workers make the values, as they make whole encryptions
(they see the plaintexts they encrypt): nothing of the private key is involved.
"""
from __future__ import annotations

import collections
import itertools
import os
from typing import TYPE_CHECKING, Any, Deque, Iterable, Iterator, List, Optional, Tuple

from .._arrays import check_positive_int
from . import _paillier_math as _pm
from .executor import PendingChunks, run_chunks, split_work

if TYPE_CHECKING:
    from .paillier import PaillierPublicKey

__all__ = ["RandomnessPool", "RandomnessStream", "randomizers_now"]

# The smallest chunk of full-size exponentiations worth a local pool round trip (as in paillier.py).
_MIN_CHUNK_EXP = 4


def _chunk_args(key: "PaillierPublicKey", bounds: List[Tuple[int, int]]) -> List[tuple]:
    # randomizers_chunk takes items only to count them: zeros are the cheapest to send.
    return [(key.n, [0] * (b - a), key.hs) for a, b in bounds]


def randomizers_now(key: "PaillierPublicKey", count: int, processes: Optional[int] = None) -> List[int]:
    """``count`` fresh randomizers of ``key``, computed now on this process's executor."""
    executor, bounds = split_work(processes, count, _MIN_CHUNK_EXP)
    return [v for part in run_chunks(executor, _pm.randomizers_chunk, _chunk_args(key, bounds)) for v in part]


class _StaysHere:
    """What both kinds share: the key, the process that made the values, no pickling."""

    __slots__ = ()
    _what = "randomness pool"
    public_key: "PaillierPublicKey"
    _pid: int

    def _check(self, public_key: "PaillierPublicKey") -> None:
        if public_key != self.public_key:
            raise ValueError(f"this {self._what} belongs to another public key")
        if os.getpid() != self._pid:
            raise RuntimeError(f"a {self._what} cannot be used in a forked child: make a new one there")

    def __getstate__(self) -> Any:
        raise TypeError(f"a {self._what} must not leave its process (its values decrypt ciphertexts)")


class RandomnessPool(_StaysHere):
    """Encryption randomizers computed ahead of time for one public key
    (:meth:`vflsec.he.PaillierPublicKey.precompute_randomness`).

    Each value is used for exactly one encryption and removed from the pool
    as it is taken; whoever learns a value can decrypt the ciphertext it
    randomized, so a pool is never serialized and stays in the process that
    made it (taking from a pool in a forked child raises, since parent and
    child would otherwise use the same values).
    """

    __slots__ = ("public_key", "_values", "_pid")

    def __init__(self, public_key: "PaillierPublicKey", values: List[int]):
        self.public_key = public_key
        self._values = list(values)
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"RandomnessPool({len(self._values)} randomizers for a {self.public_key.key_bits}-bit key)"

    def take(self, public_key: "PaillierPublicKey", count: int) -> List[int]:
        """Remove and return ``count`` randomizers (ValueError when too few are left)."""
        self._check(public_key)
        if count > len(self._values):
            raise ValueError(f"the randomness pool has {len(self._values)} randomizers left, {count} are needed: "
                             "precompute more (precompute_randomness)")
        taken = self._values[len(self._values) - count:]
        del self._values[len(self._values) - count:]
        return taken


class RandomnessStream(_StaysHere):
    """The randomizers of a planned sequence of requests, computed ahead on the executor
    while this process does other work (:meth:`vflsec.he.PaillierPublicKey.randomness_stream`).

    ``counts``: the sizes of the requests to come, in order (e.g. the batch vector a
    party encrypts or re-randomizes at each training step; read lazily). The stream
    keeps the randomizers of the next ``ahead`` planned requests made or being made:
    :meth:`refill` hands what is missing to the executor as one operation
    (:meth:`vflsec.he.executor.Executor.submit_chunks`) and returns at once. Call it
    where the executor's workers would otherwise wait: after an operation of the step
    has been handed to them (its tasks then go first and the randomizers fill the
    time until the next step needs the workers). The stream refills itself once, on
    creation. :meth:`take` (what ``encrypt(..., randomness=)`` and ``obfuscate(...,
    randomness=)`` call) hands out the next request's values, waiting for them if they
    are still being made (and making now any that are missing); a request of another
    size than the next planned one gets values made now and leaves the plan as it is.

    Through an executor whose tasks cost a round trip (Ray) this takes the
    randomizers' round trips off the step's path: what is left there is one modular
    product per value, in this process. ``close()`` gives up what is being made.
    """

    _what = "randomness stream"

    def __init__(self, public_key: "PaillierPublicKey", counts: Iterable[int], *, ahead: int = 2,
                 processes: Optional[int] = None):
        self.public_key = public_key
        self.ahead = check_positive_int(ahead, "ahead")
        self.processes = processes
        self._plan: Iterator[int] = iter(counts)
        self._next: Deque[int] = collections.deque()  # the next planned counts, read from the plan
        self._ready: List[int] = []
        self._making: Deque[Tuple[PendingChunks, int]] = collections.deque()  # (operation, values)
        self._in_making = 0
        self._pid = os.getpid()
        self.refill()

    def __len__(self) -> int:
        """Randomizers made and not taken (not counting those being made)."""
        return len(self._ready)

    def __repr__(self) -> str:
        return (f"RandomnessStream({len(self._ready)} randomizers ready, {self._in_making} being made, for a "
                f"{self.public_key.key_bits}-bit key)")

    def _read_plan(self) -> None:
        while len(self._next) < self.ahead:
            count = next(self._plan, None)
            if count is None:
                return
            self._next.append(check_positive_int(count, "a planned count", minimum=0))

    def refill(self) -> None:
        """Start making the randomizers the next ``ahead`` planned requests lack."""
        self._check(self.public_key)
        self._read_plan()
        missing = sum(self._next) - len(self._ready) - self._in_making
        if missing <= 0:
            return
        executor, bounds = split_work(self.processes, missing, _MIN_CHUNK_EXP)
        operation = executor.submit_chunks(_pm.randomizers_chunk, _chunk_args(self.public_key, bounds))
        self._making.append((operation, missing))
        self._in_making += missing

    def take(self, public_key: "PaillierPublicKey", count: int) -> List[int]:
        """Remove and return ``count`` randomizers: the next planned request's (the stream's),
        or for a request of another size ``count`` made now."""
        self._check(public_key)
        self._read_plan()
        if not self._next or count != self._next[0]:
            return randomizers_now(self.public_key, count, self.processes)
        self._next.popleft()
        while len(self._ready) < count and self._making:
            operation, made = self._making.popleft()
            self._in_making -= made
            self._ready.extend(itertools.chain.from_iterable(operation.result()))
        if len(self._ready) < count:
            self._ready.extend(randomizers_now(self.public_key, count - len(self._ready), self.processes))
        taken = self._ready[:count]
        del self._ready[:count]
        return taken

    def close(self) -> None:
        """Give up the randomizers being made and drop those made (the plan ends here)."""
        for operation, _ in self._making:
            operation.cancel()
        self._making.clear()
        self._in_making = 0
        self._ready.clear()
        self._next.clear()
        self._plan = iter(())
