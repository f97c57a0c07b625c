"""SEAL objects (ciphertexts, keys) to bytes and back, for :mod:`vflsec.he.ckks`.

TenSEAL's sealapi saves and loads SEAL objects through file paths only. They
go through an anonymous in-memory file (memfd, Linux) or, elsewhere, a file
in a private temporary directory; one per call, so threads never share one.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any, Callable, Iterator, Tuple


def use_memfd() -> bool:
    return hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd")


@contextlib.contextmanager
def scratch_file(data: bytes = b"") -> Iterator[Tuple[str, Callable[[], bytes]]]:
    """A path holding ``data`` and a function reading the file's current bytes."""
    if use_memfd():
        fd = os.memfd_create("vflsec-ckks", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

            def read() -> bytes:
                size = os.fstat(fd).st_size
                parts, offset = [], 0
                while offset < size:
                    part = os.pread(fd, size - offset, offset)
                    if not part:
                        break
                    parts.append(part)
                    offset += len(part)
                return b"".join(parts)

            yield f"/proc/self/fd/{fd}", read
        finally:
            os.close(fd)
    else:
        folder = tempfile.mkdtemp(prefix="vflsec-ckks-")
        try:
            path = os.path.join(folder, "object")
            with open(path, "wb") as f:
                f.write(data)

            def read() -> bytes:
                with open(path, "rb") as f:
                    return f.read()

            yield path, read
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def seal_to_bytes(obj: Any) -> bytes:
    with scratch_file() as (path, read):
        obj.save(path)
        return read()


def seal_load(obj: Any, seal_context: Any, data: bytes) -> None:
    """``obj.load`` from bytes; SEAL checks the object is valid for the context."""
    with scratch_file(data) as (path, _read):
        obj.load(seal_context, path)
