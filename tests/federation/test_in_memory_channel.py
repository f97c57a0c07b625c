import threading
import time

import numpy as np
import pytest

from vflsec.federation import (
    ChannelClosed,
    ChannelTimeout,
    InMemoryHub,
    payload_nbytes,
)
from vflsec.federation.envelope import encode_payload

# Wire sizes from the envelope's schema (federation/envelope.py): an array is a type byte, a dtype
# string with its length byte ("<f8": 1 + 3), ndim (1), 8 per extent, an 8-byte length and the data.


def _array_bytes(ndim: int, data: int, dtype: str = "<f8") -> int:
    return 1 + 1 + len(dtype) + 1 + 8 * ndim + 8 + data


def _pair():
    hub = InMemoryHub()
    return hub, hub.endpoint("a"), hub.endpoint("b")


def test_array_roundtrip_and_byte_accounting():
    hub, a, b = _pair()
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    a.send("b", "ir", x)
    got = b.recv("a", "ir")
    np.testing.assert_array_equal(got, x)
    assert got.dtype == np.float64
    expected = _array_bytes(2, 96)
    assert payload_nbytes(x) == expected == len(encode_payload(x))
    (rec,) = hub.records
    assert (rec.sender, rec.receiver, rec.tag, rec.nbytes, rec.seq) == ("a", "b", "ir", expected, 0)
    assert hub.total_bytes() == expected
    assert hub.bytes_by_tag() == {"ir": expected}


def test_bytes_by_tag_sums_per_tag():
    hub, a, b = _pair()
    a.send("b", "x", np.zeros(10, dtype=np.float32))
    a.send("b", "x", np.zeros(10, dtype=np.float32))
    b.send("a", "ct", [b"\x01" * 100, b"\x02" * 50])
    per_tag = hub.bytes_by_tag()
    assert per_tag["x"] == 2 * _array_bytes(1, 40, "<f4")
    assert per_tag["ct"] == 1 + 4 + (8 + 100) + (8 + 50)  # type, count, (length, bytes) per item
    assert hub.total_bytes() == sum(per_tag.values())
    assert [r.seq for r in hub.records] == [0, 1, 2]


def test_dict_payload_size_counts_keys_and_bigints():
    n = (1 << 3071) + 12345  # a 3072-bit modulus
    payload = {"n": n, "name": "paillier", "scale": 2.0, "blob": b"abc"}
    size = payload_nbytes(payload)
    expected = 1 + 4 + sum(2 + len(k) for k in payload)  # type, count, (u16 length, key) per key
    expected += (1 + 4 + 385) + (1 + 4 + 8) + (1 + 8) + (1 + 8 + 3)  # int, str, float, bytes values
    assert size == expected == len(encode_payload(payload))


@pytest.mark.parametrize("payload", [
    np.array(2.5), np.zeros((0, 3)), np.arange(6, dtype=">i4").reshape(2, 3), np.asfortranarray(np.ones((3, 2))),
    np.ones((4, 4))[::2, ::2], np.array([True, False]), b"", bytearray(b"xyz"), [], [b"a", bytearray(b"bc")],
    {}, {"flag": True, "no": False, "neg": -(1 << 70), "zero": 0, "np_int": np.int64(-3), "np_bool": np.bool_(True),
         "np_float": np.float32(0.5), "text": "h\u00e9", "raw": b"\x00", "arr": np.zeros((2, 1), np.uint8),
         "blobs": [b"1", b"22"]},
])
def test_recorded_size_is_the_envelope_encoding_length(payload):
    """One wire-size definition: what the hub records is len() of the gRPC encoder's bytes."""
    hub, a, _ = _pair()
    a.send("b", "t", payload)
    assert hub.records[0].nbytes == payload_nbytes(payload) == len(encode_payload(payload))


def test_fifo_per_sender_receiver_tag():
    hub, a, b = _pair()
    for i in range(5):
        a.send("b", "t1", np.array([i]))
        a.send("b", "t2", np.array([100 + i]))
    assert [int(b.recv("a", "t2")[0]) for _ in range(5)] == [100, 101, 102, 103, 104]
    assert [int(b.recv("a", "t1")[0]) for _ in range(5)] == [0, 1, 2, 3, 4]
    assert hub.pending() == {}


def test_recv_timeout_names_peer_and_tag():
    _, a, b = _pair()
    start = time.perf_counter()
    with pytest.raises(ChannelTimeout, match=r"'b'.*'grad'.*'a'") as info:
        b.recv("a", "grad", timeout=0.05)
    assert time.perf_counter() - start >= 0.05
    assert info.value.sender == "a" and info.value.tag == "grad"
    assert isinstance(info.value, TimeoutError)


def test_hub_default_timeout():
    hub = InMemoryHub(default_timeout=0.02)
    hub.endpoint("a")
    with pytest.raises(ChannelTimeout):
        hub.endpoint("b").recv("a", "x")


def test_blocking_recv_wakes_on_send_from_other_thread():
    _, a, b = _pair()

    def later():
        time.sleep(0.05)
        a.send("b", "late", b"hello")

    t = threading.Thread(target=later)
    t.start()
    assert b.recv("a", "late", timeout=5) == b"hello"
    t.join()
    assert b.messaging_seconds >= 0.04


def test_send_copies_arrays():
    _, a, b = _pair()
    x = np.ones(4)
    d = {"w": np.zeros(3)}
    a.send("b", "x", x)
    a.send("b", "d", d)
    x[:] = 7
    d["w"][:] = 7
    got = b.recv("a", "x")
    assert np.all(got == 1)
    assert not np.shares_memory(got, x)
    assert np.all(b.recv("a", "d")["w"] == 0)


def test_non_contiguous_array_is_sent_as_contiguous_copy():
    _, a, b = _pair()
    x = np.arange(20.0).reshape(4, 5)[:, ::2]
    a.send("b", "x", x)
    got = b.recv("a", "x")
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, x)


class _Secret:
    pass


@pytest.mark.parametrize(
    "payload",
    [
        _Secret(),
        {"obj": _Secret()},
        np.array([_Secret()], dtype=object),
        np.array(["a", "b"]),
        np.array([1 + 2j]),
        [b"ok", "not bytes"],
        {1: np.zeros(2)},
        (np.zeros(2),),
        3.0,
        None,
        [np.zeros(2)],
    ],
)
def test_non_wire_payloads_are_refused(payload):
    hub, a, _ = _pair()
    with pytest.raises(TypeError):
        a.send("b", "x", payload)
    assert hub.records == []


def test_unknown_receiver_and_self_messaging():
    _, a, _ = _pair()
    with pytest.raises(ValueError, match="unknown party 'c'"):
        a.send("c", "x", b"")
    with pytest.raises(ValueError, match="itself"):
        a.send("a", "x", b"")
    with pytest.raises(TypeError):
        a.send("b", "", b"")
    with pytest.raises(ValueError):
        a.recv("b", "x", timeout=0)


def test_abort_wakes_blocked_receivers():
    hub, a, b = _pair()
    errors = []

    def wait():
        try:
            b.recv("a", "never")
        except ChannelClosed as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.02)
    hub.abort("test")
    t.join(2)
    assert not t.is_alive()
    assert len(errors) == 1 and "test" in str(errors[0])
    with pytest.raises(ChannelClosed):
        a.send("b", "x", b"")


def test_transcript_keeps_payload_copies_only_when_asked():
    hub = InMemoryHub(keep_payloads=True)
    a, b = hub.endpoint("a"), hub.endpoint("b")
    x = np.arange(3.0)
    a.send("b", "ir", x)
    x[:] = -1
    b.recv("a", "ir")[:] = 99  # the receiver's copy is its own
    ((rec, payload),) = hub.transcript
    assert rec.tag == "ir"
    np.testing.assert_array_equal(payload, [0.0, 1.0, 2.0])
    plain = InMemoryHub()
    plain.endpoint("b")
    plain.endpoint("a").send("b", "ir", x)
    assert plain.transcript == [] and len(plain.records) == 1
