"""Typed binary envelope for messages between parties (no pickle).

Wire schema, version 1 (all integers big-endian):

Envelope (one message)::

    magic  b"VFLE"            4 bytes
    version                   u8   (ENVELOPE_VERSION)
    kind                      u8   (KIND_DATA, KIND_DONE, KIND_ABORT)
    session                   str16   (u16 length + UTF-8)
    sender, receiver, tag     str16 each
    seq                       u64  (per sender -> receiver and session, from 0)
    payload                   value (below)

Value (type byte, then)::

    0x01 array   dtype str8 (numpy ``dtype.str``, kinds b/i/u/f only),
                 ndim u8 (<= 32), ndim x u64 extents, u64 nbytes, raw C-order bytes
    0x02 bytes   u64 length, bytes
    0x03 list    u32 count, count x (u64 length, bytes)      -- a list of bytes
    0x04 dict    u32 count, count x (str16 key, value)        -- values not dicts
    0x05 int     u32 length, two's-complement big-endian bytes (arbitrary precision)
    0x06 float   IEEE-754 binary64
    0x07 str     u32 length, UTF-8
    0x08 bool    u8 (0 or 1)

The decoder is strict: every length is checked against the bytes that
remain before anything is allocated, unknown type bytes, versions, dtypes or
trailing bytes are errors (:class:`EnvelopeError`), and nothing is ever
evaluated or unpickled. The payload rules (:func:`check_payload`) are the
channel contract's (:mod:`vflsec.federation.channel`), decoding gives what
the in-memory hub delivers (writable C-contiguous array copies, ``bytes``,
numpy scalars as Python scalars), and :func:`payload_nbytes`, the size every
channel records for a message, is ``len(encode_payload(payload))``.

Frames (transport chunks, one gRPC message each)::

    magic b"VFLF", version u8, index u32, count u32, total u64, data

A message is split into ``count`` frames; ``total`` (the message's byte
length, the same in every frame) is checked against the receiver's maximum
before the reassembly buffer is allocated.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional

import numpy as np

__all__ = [
    "ENVELOPE_VERSION",
    "Envelope",
    "EnvelopeError",
    "FrameAssembler",
    "KIND_ABORT",
    "KIND_DATA",
    "KIND_DONE",
    "decode_envelope",
    "decode_payload",
    "encode_envelope",
    "encode_payload",
    "encode_envelope_head",
    "payload_nbytes",
    "check_payload",
    "split_frames",
]

ENVELOPE_MAGIC = b"VFLE"
FRAME_MAGIC = b"VFLF"
ENVELOPE_VERSION = 1
FRAME_VERSION = 1

KIND_DATA = 0
KIND_DONE = 1
KIND_ABORT = 2
_KINDS = (KIND_DATA, KIND_DONE, KIND_ABORT)

_ARRAY_KINDS = "biuf"
_T_ARRAY, _T_BYTES, _T_LIST, _T_DICT, _T_INT, _T_FLOAT, _T_STR, _T_BOOL = range(1, 9)
_MAX_NDIM = 32
_MAX_EXTENT = 2**62  # numpy's largest array extent (and element count) is below 2^63
_DTYPE_RE = re.compile(r"^[<>|=][biuf](1|2|4|8|16)$")

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_F64 = struct.Struct(">d")
_FRAME_HEADER = struct.Struct(">4sBIIQ")
FRAME_HEADER_BYTES = _FRAME_HEADER.size


class EnvelopeError(ValueError):
    """Bytes that are not a valid envelope or frame (malformed, oversized,
    wrong version)."""


@dataclass(frozen=True)
class Envelope:
    kind: int
    session: str
    sender: str
    receiver: str
    tag: str
    seq: int
    payload: Any


# -- the payload rules -----------------------------------------------------------

def _check_array(arr: np.ndarray, where: str) -> None:
    if arr.dtype.kind not in _ARRAY_KINDS or arr.dtype.hasobject:
        raise TypeError(
            f"{where}: array dtype {arr.dtype} is not wire-encodable "
            "(numeric bool/int/uint/float dtypes only)"
        )


def _check_bytes_list(value: list, where: str) -> None:
    for i, item in enumerate(value):
        if not isinstance(item, (bytes, bytearray)):
            raise TypeError(
                f"{where}[{i}] is {type(item).__name__}; lists on the wire hold bytes only"
            )


def _check_dict_value(value: Any, where: str) -> None:
    if isinstance(value, np.ndarray):
        _check_array(value, where)
    elif isinstance(value, (bytes, bytearray, str, float)):
        pass
    elif isinstance(value, int):  # includes bool
        pass
    elif isinstance(value, np.generic) and value.dtype.kind in _ARRAY_KINDS:
        pass
    elif isinstance(value, list):
        _check_bytes_list(value, where)
    else:
        raise TypeError(
            f"{where} is {type(value).__name__}; dict values on the wire must be an "
            "array, bytes, int, float, str or a list of bytes"
        )


def check_payload(payload: Any) -> None:
    """Raise ``TypeError`` unless ``payload`` is wire-encodable: the payload rules of
    :mod:`vflsec.federation.channel` (its module docstring)."""
    if isinstance(payload, np.ndarray):
        _check_array(payload, "payload")
    elif isinstance(payload, (bytes, bytearray)):
        pass
    elif isinstance(payload, list):
        _check_bytes_list(payload, "payload")
    elif isinstance(payload, dict):
        for key, value in payload.items():
            if not isinstance(key, str):
                raise TypeError(f"payload dict keys must be str, got {type(key).__name__}")
            _check_dict_value(value, f"payload[{key!r}]")
    else:
        raise TypeError(
            f"payload of type {type(payload).__name__} is not wire-encodable; send a numeric "
            "numpy array, bytes, a list of bytes or a dict of those/int/float/str"
        )


# -- encoding -----------------------------------------------------------------

def _str16(value: str, what: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError(f"{what} is longer than 65535 UTF-8 bytes")
    return _U16.pack(len(raw)) + raw


def _encode_value(value: Any, out: List[Any], *, top: bool) -> None:
    """Append the encoding of ``value`` to ``out`` as bytes-like parts (an
    array's data as a view of its memory: sizing a payload copies nothing)."""
    if isinstance(value, np.ndarray):
        # reshape: ascontiguousarray makes a 0-d array 1-d; the wire keeps its shape.
        arr = np.ascontiguousarray(value).reshape(value.shape)
        dtype = arr.dtype.str.encode("ascii")
        out.append(_U8.pack(_T_ARRAY) + _U8.pack(len(dtype)) + dtype + _U8.pack(arr.ndim))
        if arr.ndim > _MAX_NDIM:
            raise ValueError(f"arrays on the wire have at most {_MAX_NDIM} dimensions")
        out.append(b"".join(_U64.pack(d) for d in arr.shape))
        out.append(_U64.pack(arr.nbytes))
        out.append(arr.reshape(-1).view(np.uint8).data)
    elif isinstance(value, (bytes, bytearray)):
        out.append(_U8.pack(_T_BYTES) + _U64.pack(len(value)))
        out.append(value)
    elif isinstance(value, list):
        out.append(_U8.pack(_T_LIST) + _U32.pack(len(value)))
        for item in value:
            out.append(_U64.pack(len(item)))
            out.append(item)
    elif isinstance(value, dict):
        if not top:
            raise TypeError("dicts do not nest on the wire")
        out.append(_U8.pack(_T_DICT) + _U32.pack(len(value)))
        for key, item in value.items():
            out.append(_str16(key, "a dict key"))
            _encode_value(item, out, top=False)
    elif isinstance(value, np.generic):
        _encode_value(value.item(), out, top=top)
    elif isinstance(value, bool):
        out.append(_U8.pack(_T_BOOL) + _U8.pack(int(value)))
    elif isinstance(value, int):
        length = max(1, (value.bit_length() + 8) // 8)
        out.append(_U8.pack(_T_INT) + _U32.pack(length) + value.to_bytes(length, "big", signed=True))
    elif isinstance(value, float):
        out.append(_U8.pack(_T_FLOAT) + _F64.pack(value))
    elif isinstance(value, str):
        raw = value.encode("utf-8")
        out.append(_U8.pack(_T_STR) + _U32.pack(len(raw)) + raw)
    else:  # check_payload ran first; this is a bug guard
        raise TypeError(f"not wire-encodable: {type(value).__name__}")


def _payload_parts(payload: Any) -> List[Any]:
    check_payload(payload)
    out: List[Any] = []
    _encode_value(payload, out, top=True)
    return out


def encode_payload(payload: Any) -> bytes:
    """Bytes of one payload value (TypeError for what ``check_payload`` refuses)."""
    return b"".join(_payload_parts(payload))


def payload_nbytes(payload: Any) -> int:
    """The wire size of ``payload``: ``len(encode_payload(payload))``, counted
    from the same encoding without joining it (TypeError for what
    ``check_payload`` refuses). The size every channel records per message:
    the in-memory hub and the gRPC channel alike."""
    return sum(memoryview(part).nbytes for part in _payload_parts(payload))


def encode_envelope_head(env: Envelope) -> bytes:
    """The envelope's bytes before its payload (magic, version, kind,
    session, sender, receiver, tag, seq)."""
    if env.kind not in _KINDS:
        raise ValueError(f"unknown envelope kind {env.kind}")
    if not 0 <= env.seq < 2 ** 64:
        raise ValueError("seq out of range")
    return b"".join([
        ENVELOPE_MAGIC, _U8.pack(ENVELOPE_VERSION), _U8.pack(env.kind),
        _str16(env.session, "session"), _str16(env.sender, "sender"),
        _str16(env.receiver, "receiver"), _str16(env.tag, "tag"), _U64.pack(env.seq),
    ])


def encode_envelope(env: Envelope) -> bytes:
    """:func:`encode_envelope_head` followed by :func:`encode_payload`."""
    return encode_envelope_head(env) + encode_payload(env.payload)


# -- decoding -----------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or n > len(self.buf) - self.pos:
            raise EnvelopeError(
                f"truncated: needs {n} bytes at offset {self.pos}, {len(self.buf) - self.pos} left"
            )
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return _U16.unpack(self.take(2))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def str16(self) -> str:
        raw = self.take(self.u16())
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EnvelopeError(f"invalid UTF-8 string: {exc}") from None


def _decode_dtype(code: str) -> np.dtype:
    if not _DTYPE_RE.match(code):
        raise EnvelopeError(f"dtype {code!r} is not allowed on the wire")
    try:
        dtype = np.dtype(code)
    except TypeError:
        raise EnvelopeError(f"unknown dtype {code!r}") from None
    if dtype.kind not in "biuf" or dtype.hasobject:
        raise EnvelopeError(f"dtype {code!r} is not allowed on the wire")
    return dtype


def _decode_value(r: _Reader, *, top: bool) -> Any:
    kind = r.u8()
    if kind == _T_ARRAY:
        dtype = _decode_dtype(bytes(r.take(r.u8())).decode("ascii", "replace"))
        ndim = r.u8()
        if ndim > _MAX_NDIM:
            raise EnvelopeError(f"array with {ndim} dimensions (max {_MAX_NDIM})")
        shape = tuple(r.u64() for _ in range(ndim))
        # numpy refuses extents and element counts past its index range (even
        # with a zero extent elsewhere): refuse them here, as the wire's error.
        count = 1
        for extent in shape:
            count *= max(extent, 1)  # numpy bounds the product of the non-zero extents
        if count > _MAX_EXTENT:
            raise EnvelopeError(f"array of shape {shape} is beyond numpy's index range")
        nbytes = r.u64()
        expected = dtype.itemsize
        for extent in shape:
            expected *= extent
        if nbytes != expected:
            raise EnvelopeError(f"array of shape {shape} and dtype {dtype} needs {expected} bytes, "
                                f"header says {nbytes}")
        raw = r.take(nbytes)  # bounds-checked before the copy below
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if kind == _T_BYTES:
        return bytes(r.take(r.u64()))
    if kind == _T_LIST:
        count = r.u32()
        # Each item needs at least its 8-byte length: bound count first.
        if count * 8 > len(r.buf) - r.pos:
            raise EnvelopeError(f"list of {count} items cannot fit in the remaining bytes")
        return [bytes(r.take(r.u64())) for _ in range(count)]
    if kind == _T_DICT:
        if not top:
            raise EnvelopeError("nested dict")
        count = r.u32()
        if count * 3 > len(r.buf) - r.pos:
            raise EnvelopeError(f"dict of {count} items cannot fit in the remaining bytes")
        out = {}
        for _ in range(count):
            key = r.str16()
            if key in out:
                raise EnvelopeError(f"duplicate dict key {key!r}")
            value = _decode_value(r, top=False)
            out[key] = value
        return out
    if kind in (_T_INT, _T_FLOAT, _T_STR, _T_BOOL):
        if top:
            raise EnvelopeError(f"a scalar (type {kind}) is not a valid top-level payload")
        if kind == _T_INT:
            return int.from_bytes(r.take(r.u32()), "big", signed=True)
        if kind == _T_FLOAT:
            return _F64.unpack(r.take(8))[0]
        if kind == _T_STR:
            try:
                return bytes(r.take(r.u32())).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EnvelopeError(f"invalid UTF-8 string: {exc}") from None
        flag = r.u8()
        if flag > 1:
            raise EnvelopeError(f"bool byte {flag}")
        return bool(flag)
    raise EnvelopeError(f"unknown value type byte {kind:#x}")


def decode_payload(data: bytes) -> Any:
    try:
        r = _Reader(memoryview(data))
        value = _decode_value(r, top=True)
    except EnvelopeError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        raise EnvelopeError(f"malformed payload ({type(exc).__name__}: {exc})") from None
    if r.pos != len(r.buf):
        raise EnvelopeError(f"{len(r.buf) - r.pos} trailing bytes after the payload")
    return value


def decode_envelope(data: bytes) -> Envelope:
    """Parse one envelope (EnvelopeError on anything malformed)."""
    try:
        return _decode_envelope(data)
    except EnvelopeError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        # Whatever else a hostile byte string provokes in numpy or struct is
        # still malformed input: the transport's own error, never a crash.
        raise EnvelopeError(f"malformed message ({type(exc).__name__}: {exc})") from None


def _decode_envelope(data: bytes) -> Envelope:
    r = _Reader(memoryview(data))
    if bytes(r.take(4)) != ENVELOPE_MAGIC:
        raise EnvelopeError("not a vflsec envelope (bad magic)")
    version = r.u8()
    if version != ENVELOPE_VERSION:
        raise EnvelopeError(f"envelope version {version}, this build speaks {ENVELOPE_VERSION}")
    kind = r.u8()
    if kind not in _KINDS:
        raise EnvelopeError(f"unknown envelope kind {kind}")
    session, sender, receiver, tag = r.str16(), r.str16(), r.str16(), r.str16()
    seq = r.u64()
    payload = _decode_value(r, top=True)
    if r.pos != len(r.buf):
        raise EnvelopeError(f"{len(r.buf) - r.pos} trailing bytes after the payload")
    return Envelope(kind, session, sender, receiver, tag, seq, payload)


# -- frames ---------------------------------------------------------------------

def split_frames(message: bytes, chunk_bytes: int) -> Iterator[bytes]:
    """The frames carrying ``message``, each with at most ``chunk_bytes`` of data."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be >= 1")
    total = len(message)
    count = max(1, -(-total // chunk_bytes))
    view = memoryview(message)
    for index in range(count):
        chunk = view[index * chunk_bytes:(index + 1) * chunk_bytes]
        yield _FRAME_HEADER.pack(FRAME_MAGIC, FRAME_VERSION, index, count, total) + bytes(chunk)


class FrameAssembler:
    """Reassembles one message from its frames, enforcing ``max_message_bytes``
    (checked on the first frame, before the buffer is allocated)."""

    def __init__(self, max_message_bytes: int, reserve: Optional[Callable[[int], None]] = None):
        # reserve(total) runs on the first frame, after the size check and before
        # the buffer is allocated: the caller's budget (it raises to refuse).
        self.max_message_bytes = int(max_message_bytes)
        self._reserve = reserve
        self._buf: bytearray = bytearray()
        self._count = self._total = self._next = 0
        self._filled = 0

    def add(self, frame: bytes) -> bool:
        """Add the next frame; True once the message is complete."""
        if not isinstance(frame, (bytes, bytearray)) or len(frame) < FRAME_HEADER_BYTES:
            raise EnvelopeError("frame shorter than its header")
        magic, version, index, count, total = _FRAME_HEADER.unpack_from(frame)
        if magic != FRAME_MAGIC:
            raise EnvelopeError("not a vflsec frame (bad magic)")
        if version != FRAME_VERSION:
            raise EnvelopeError(f"frame version {version}, this build speaks {FRAME_VERSION}")
        data = memoryview(frame)[FRAME_HEADER_BYTES:]
        if self._next == 0:
            if total > self.max_message_bytes:
                raise EnvelopeError(
                    f"message of {total} bytes exceeds the maximum of {self.max_message_bytes} bytes"
                )
            if count < 1 or count > total + 1:
                raise EnvelopeError(f"frame count {count} is inconsistent with {total} bytes")
            if self._reserve is not None:
                self._reserve(total)
            self._count, self._total = count, total
            self._buf = bytearray(total)
        elif count != self._count or total != self._total:
            raise EnvelopeError("frame header disagrees with the first frame of the message")
        if index != self._next:
            raise EnvelopeError(f"frame {index} arrived, expected frame {self._next}")
        if self._filled + len(data) > self._total:
            raise EnvelopeError("frames carry more bytes than the message declares")
        self._buf[self._filled:self._filled + len(data)] = data
        self._filled += len(data)
        self._next += 1
        if self._next == self._count:
            if self._filled != self._total:
                raise EnvelopeError(f"message declared {self._total} bytes, frames carried {self._filled}")
            return True
        return False

    @property
    def started(self) -> bool:
        return self._next > 0

    def message(self) -> bytes:
        if self._next != self._count or self._count == 0:
            raise EnvelopeError("message incomplete")
        return bytes(self._buf)
