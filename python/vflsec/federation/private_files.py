"""Write files that hold secrets (private keys, model weights) safely.

:func:`write_private_bytes` (and :func:`write_file`, its form for public
files) never reuses a predictable temporary name: the data go to a fresh
random name in the target's directory, created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600 (0644 for public files), are
fsynced, and the file is renamed into place with :func:`os.replace`. A
pre-existing file or symlink at a ``*.tmp`` name is therefore never opened,
and a symlink at the final path is refused (``ValueError``) instead of being
written through. The rename replaces the directory entry, so an existing file
with looser permissions is replaced by the new 0600 one.

The runtime's outputs that hold model weights should be written with
:func:`write_private_bytes` (or :func:`private_open` for writers that need a
file object, e.g. ``np.savez``).
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import IO, Iterator, Union

__all__ = ["private_open", "write_file", "write_private_bytes"]

PathLike = Union[str, "os.PathLike[str]"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise ValueError(f"refusing to write {path}: it is a symlink (remove it first)")


@contextlib.contextmanager
def private_open(path: PathLike, *, private: bool = True) -> Iterator[IO[bytes]]:
    """A binary file object whose contents replace ``path`` atomically on
    success (0600 when ``private``); on an exception the temporary file is
    removed and ``path`` is left as it was."""
    final = Path(path)
    _refuse_symlink(final)
    directory = final.parent
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    mode = 0o600 if private else 0o644
    for _ in range(100):
        tmp = directory / f".{final.name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, flags, mode)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(f"could not create a temporary file next to {final}")
    try:
        # The umask may have narrowed the mode; never widened it. Set it exactly.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _refuse_symlink(final)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_file(path: PathLike, data: bytes, *, private: bool) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring)."""
    with private_open(path, private=private) as fh:
        fh.write(data)


def write_private_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically with mode 0600, never through a
    symlink or a pre-existing temporary file."""
    write_file(path, data, private=True)
