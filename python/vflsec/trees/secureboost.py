"""SecureBoost (Cheng et al., IEEE Intelligent Systems 2021): gradients under Paillier.

The active party makes a Paillier key (:func:`vflsec.he.generate_keypair`; the DJN
fixed-base encryption, on the IFMA kernel where the CPU has it) and sends the
public key. Each round it encrypts one plaintext per row that packs the row's
gradient, hessian and a count of one (FATE's packing, :class:`SlotFormat`); a
passive party multiplies the ciphertexts of a node's rows bin by bin (ciphertext
products add the plaintexts: :class:`NativeRows`, the C++ kernel on AVX-512 IFMA,
or :func:`aggregate_bins` with gmpy2 elsewhere), packs ``k`` bin sums into
one ciphertext by shifting them into their slots (``c^(2^(W i))``: one
decryption opens ``k`` bins; FATE's "cipher compression"), re-randomizes the
packed ciphertexts (their randomness would otherwise be a product of the active
party's own) and sends them. The active party decrypts them and reads every bin's
gradient sum, hessian sum and row count, exactly: the histograms are the plain
protocol's, bit for bit, so the trees are too.

What each party learns: the passive parties only ciphertexts (and, as in every
SecureBoost, each node's instance space, which the active party announces:
:mod:`vflsec.trees.protocol`); the active party each bin's sums and count, no row
of a passive party's features.

A passive party that deviates: the active party checks every histogram it decrypts against what
it knows (each feature's bins count the node's rows and sum to its gradient and hessian totals)
and the rows a passive party sends left against the sums its histogram gave the chosen split;
crafted bins (a row's ciphertext raised to a power, an encrypted offset, a swapped row) fail the
job naming the party (``tests/trees/test_secureboost_deviation.py``). What remains to a passive
party whose answers pass the checks is what a binning of its own columns can show: each node's
instance space (as in every SecureBoost), with groups no smaller than ``min_samples_leaf`` rows on
either side of a split; not measured.

An active party that deviates: each passive party checks its steps against the job's growth rules
(:mod:`vflsec.trees.bounds`): no child of fewer than ``min_samples_leaf`` rows (a one-row child's
histogram would show that row's bin on every feature), no split past ``max_depth`` or
``max_leaf_nodes``, no second split of a node before its children, the smaller child built; a
deviation fails the job naming the active party (``tests/trees/test_trees_bounds_on_receipt.py``).
What the checks cannot see: the rows of the active party's own splits (so it can announce, in two
rounds, nodes whose rows differ by one row: the difference of their histograms' counts is that row's
bins) and which of a passive party's thresholds it asks for (it scores them itself, so any split
within the rules is one an honest run could ask for); not measured.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, List

import gmpy2
import numpy as np

from .. import _core
from ..he._paillier_math import native_in_use
from ..he.paillier import PaillierEncryptedVector, PaillierPublicKey, generate_keypair
from .histogram import BinLayout, Histogram
from .protection import Protection, register_protection
from .weights import power_of_two_at_least

__all__ = ["NativeRows", "SecureBoost", "SlotFormat", "aggregate_bins", "pack_bins"]

TAG_KEY = "trees_public_key"


@dataclass(frozen=True)
class SlotFormat:
    """The bits of one row's plaintext and of a bin's sum: ``count`` (low ``count_bits``),
    the hessian (``h_bits``), the gradient shifted to be non-negative (the rest), each
    wide enough for the sum over every row. ``slots`` such sums share one packed plaintext."""

    fraction_bits: int
    count_bits: int
    h_bits: int
    g_bits: int
    key_bits: int

    @classmethod
    def for_job(cls, n_samples: int, fraction_bits: int, key_bits: int) -> "SlotFormat":
        row_bits = int(n_samples).bit_length()  # a sum of n_samples values has row_bits more bits
        # |g| <= 1 (offset by 1: 0..2), 0 <= h <= 1/4, each on the grid of 2^-fraction_bits.
        return cls(fraction_bits, row_bits, fraction_bits - 2 + row_bits + 1, fraction_bits + 2 + row_bits,
                   key_bits)

    @property
    def width(self) -> int:
        return self.count_bits + self.h_bits + self.g_bits

    @property
    def slots(self) -> int:
        """Sums per packed plaintext: their total stays below 2^(key_bits - 1) < n."""
        return max(1, (self.key_bits - 1) // self.width)

    def encode(self, g: np.ndarray, h: np.ndarray) -> List[int]:
        scale = 2 ** self.fraction_bits
        g_int = np.rint(g * scale).astype(np.int64) + scale  # 0 .. 2 scale
        h_int = np.rint(h * scale).astype(np.int64)
        if g_int.min(initial=0) < 0 or g_int.max(initial=0) > 2 * scale or h_int.min(initial=0) < 0 \
                or h_int.max(initial=0) > scale // 4:
            raise ValueError("SecureBoost packs log-loss gradients (|g| <= 1) and hessians (0 <= h <= 1/4) only")
        shift_h, shift_g = self.count_bits, self.count_bits + self.h_bits
        return [(int(a) << shift_g) | (int(b) << shift_h) | 1 for a, b in zip(g_int, h_int)]

    def decode(self, packed: List[int], total: int) -> Histogram:
        """The first ``total`` bin sums from packed plaintexts."""
        scale = 2 ** self.fraction_bits
        slot_mask, count_mask, h_mask = (1 << self.width) - 1, (1 << self.count_bits) - 1, (1 << self.h_bits) - 1
        G, H, C = np.empty(total), np.empty(total), np.empty(total, dtype=np.int64)
        index = 0
        for value in packed:
            for _ in range(self.slots):
                if index == total:
                    break
                slot = value & slot_mask
                value >>= self.width
                count = slot & count_mask
                h_sum = (slot >> self.count_bits) & h_mask
                g_sum = (slot >> (self.count_bits + self.h_bits)) - count * scale
                # Integers below 2^53 and a power-of-two scale: exact in float64.
                G[index], H[index], C[index] = g_sum / scale, h_sum / scale, count
                index += 1
        if index != total:
            raise ValueError(f"a packed histogram holds {index} bins, {total} expected")
        return Histogram(G, H, C)


class NativeRows:
    """A round's ciphertexts in the C++ kernel (cpp/paillier_histogram.cpp: Montgomery form once,
    then eight features per IFMA product, OpenMP over groups of eight features)."""

    def __init__(self, public: PaillierPublicKey, ciphertexts: List[int]):
        size = public.ciphertext_bytes
        self.size = size
        self.rows = _core.PaillierCiphertextRows(public.n.to_bytes(public.plaintext_bytes, "little"),
                                                 b"".join(c.to_bytes(size, "little") for c in ciphertexts))

    def __len__(self) -> int:
        return int(self.rows.count)

    def histogram_bytes(self, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> bytes:
        """Every bin's product, as little-endian ciphertexts."""
        return self.rows.histogram(np.ascontiguousarray(rows, dtype=np.int64), codes,
                                   layout.offsets[:-1].astype(np.int64), layout.total)

    def histogram(self, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> List[Any]:
        return self._ints(self.histogram_bytes(codes, rows, layout))

    def pack(self, bins: bytes, slots: int, width: int) -> List[Any]:
        """:func:`pack_bins` in the kernel (eight groups per IFMA product)."""
        return self._ints(self.rows.pack(bins, slots, width))

    def _ints(self, data: bytes) -> List[Any]:
        size = self.size
        return [gmpy2.mpz(int.from_bytes(data[i * size:(i + 1) * size], "little")) for i in range(len(data) // size)]


def aggregate_bins(ciphertexts: List[Any], codes: np.ndarray, rows: np.ndarray, layout: BinLayout,
                   nsquare: Any) -> List[Any]:
    """Each bin's product (mod n^2) of the ciphertexts of ``rows`` that fall in it, for every
    feature (an empty bin: 1, the trivial encryption of 0): the gmpy2 path, where the CPU
    lacks AVX-512 IFMA (:class:`NativeRows` elsewhere; the same products)."""
    offsets = layout.offsets[:-1]
    bins: List[Any] = [gmpy2.mpz(1)] * layout.total
    flat = (codes[rows].astype(np.int64) + offsets)
    for r, row_bins in zip(rows.tolist(), flat.tolist()):
        c = ciphertexts[r]
        for b in row_bins:
            bins[b] = bins[b] * c % nsquare
    return bins


def pack_bins(bins: List[Any], slots: int, width: int, nsquare: Any) -> List[int]:
    """Groups of ``slots`` bin ciphertexts as one each: ``prod_i c_i^(2^(width i))`` by Horner's rule."""
    shift = gmpy2.mpz(1) << width
    packed = []
    for start in range(0, len(bins), slots):
        group = bins[start:start + slots]
        acc = group[-1]
        for c in reversed(group[:-1]):
            acc = gmpy2.powmod(acc, shift, nsquare) * c % nsquare
        packed.append(int(acc))
    return packed


@register_protection
class SecureBoost(Protection):
    name = "secureboost"

    def start(self, endpoint: Any, job: Any, role: str) -> None:
        self.format = SlotFormat.for_job(job.n_samples, job.gradient_bits, job.key_bits)
        self.scale = 1.0  # the round's power of two the packed gradients are divided by (release)
        if role == "active":
            clock = time.perf_counter()
            self.public, self.private = generate_keypair(job.key_bits)
            self.seconds["keygen"] += time.perf_counter() - clock
            for party in job.passives:
                endpoint.send(party, TAG_KEY, self.public.to_dict())
        else:
            self.public = PaillierPublicKey.from_dict(endpoint.recv(job.active, TAG_KEY))
            if self.public.key_bits != job.key_bits:
                raise ValueError(f"party {job.active!r} sent a {self.public.key_bits}-bit key; the job says "
                                 f"{job.key_bits}")
        self.nsquare = gmpy2.mpz(self.public.nsquare)

    def release(self, g: np.ndarray, h: np.ndarray) -> Any:
        clock = time.perf_counter()
        # Weighted gradients (weights.py) may pass the slots' |g| <= 1, h <= 1/4: packed divided by a power of
        # two (exact, g / scale stays on the job's grid), the opened sums multiplied back; the scale stays here.
        self.scale = power_of_two_at_least(max(float(np.max(np.abs(g), initial=0.0)),
                                               4.0 * float(np.max(h, initial=0.0))))
        vector = self.public.encrypt_encoded(self.format.encode(g / self.scale, h / self.scale))
        data = vector.to_bytes()
        self.seconds["encrypt"] += time.perf_counter() - clock
        return {"ciphertexts": data}

    def receive(self, payload: Any, n_samples: int) -> Any:
        data = payload.get("ciphertexts") if isinstance(payload, dict) else None
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError("the round's gradients are not {ciphertexts: bytes}")
        vector = PaillierEncryptedVector.from_bytes(self.public, data)
        if len(vector) != n_samples:
            raise ValueError(f"the round's ciphertexts are {len(vector)}, not one per row ({n_samples})")
        if native_in_use():
            return NativeRows(self.public, vector.ciphertexts)
        return [gmpy2.mpz(c) for c in vector.ciphertexts]

    def aggregate(self, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout) -> Any:
        slots, width = self.format.slots, self.format.width
        clock = time.perf_counter()
        if isinstance(gradients, NativeRows):
            bins = gradients.histogram_bytes(codes, rows, layout)
            self.seconds["aggregate"] += time.perf_counter() - clock
            clock = time.perf_counter()
            packed = gradients.pack(bins, slots, width)
        else:
            products = aggregate_bins(gradients, codes, rows, layout, self.nsquare)
            self.seconds["aggregate"] += time.perf_counter() - clock
            clock = time.perf_counter()
            packed = pack_bins(products, slots, width, self.nsquare)
        data = PaillierEncryptedVector(self.public, [int(c) for c in packed]).to_bytes()  # re-randomized
        self.seconds["pack"] += time.perf_counter() - clock
        return {"ciphertexts": data}

    def open(self, payload: Any, layout: BinLayout, party: str) -> Histogram:
        data = payload.get("ciphertexts") if isinstance(payload, dict) else None
        clock = time.perf_counter()
        vector = PaillierEncryptedVector.from_bytes(self.public, data)
        expected = -(-layout.total // self.format.slots)
        if len(vector) != expected:
            raise ValueError(f"party {party!r} sent {len(vector)} packed ciphertexts; {layout.total} bins need "
                             f"{expected}")
        plaintexts = self.private.decrypt_raw(vector)
        self.seconds["decrypt"] += time.perf_counter() - clock
        hist = self.format.decode(plaintexts, layout.total)
        return hist if self.scale == 1.0 else Histogram(hist.G * self.scale, hist.H * self.scale, hist.C)
