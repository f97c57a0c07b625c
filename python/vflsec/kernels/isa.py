"""Which instruction-set path the CPU kernels run, and forcing one.

The extension is compiled for baseline x86-64 and carries each hot kernel once
more per instruction set it supports; the path is chosen at run time from the
CPU's features (``cpp/isa_dispatch.hpp``). Three kernel families choose
independently:

* ``"noise"``: the ChaCha20 noise kernels and the lattice Gaussian release
  (paths ``"default"``, ``"avx2"``, ``"avx512f"``);
* ``"distances"``: the pairwise-distance tiles (``"baseline"``, ``"avx2"``,
  ``"avx512f"``, ``"avx512vl"``);
* ``"fcm"``: the fused fuzzy c-means pass (``"default"``, ``"avx2"``,
  ``"avx512f"``).

:func:`force_isa` is the one way to pin a family to a path: tests use it to
check that every path gives the same results, benchmarks to time each path.
Seeded noise streams are bit-identical on every path.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .. import _core

__all__ = ["force_isa", "kernel_isa", "supported_isas"]


def kernel_isa() -> dict[str, str]:
    """The path each kernel family uses now: ``{"noise": ..., "distances": ..., "fcm": ...}``."""
    return dict(_core.kernel_isa())


def supported_isas() -> dict[str, list[str]]:
    """The paths this CPU supports, per family, most portable first.

    The first entry of each list (``"default"`` or ``"baseline"``) runs on
    every x86-64 CPU.
    """
    return {family: list(paths) for family, paths in _core._supported_kernel_isas().items()}


@contextmanager
def force_isa(family: str, path: str) -> Iterator[str]:
    """Run the ``with`` block with ``family``'s kernels on ISA path ``path``.

    ``path`` is one of ``supported_isas()[family]``, or ``"auto"`` for the
    CPU's best. Yields the path in use; on exit the family's previous path is
    restored, also when the block raises. Blocks nest.

    Raises ``ValueError`` (and changes nothing) for an unknown family, an
    unknown path, or a path this CPU lacks; ``TypeError`` when either is not
    a string.

    The choice is process-wide: do not force a family while another thread
    runs one of its kernels.
    """
    if not isinstance(family, str) or not isinstance(path, str):
        raise TypeError(f"family and path must be str, got {type(family).__name__} and {type(path).__name__}")
    current = _core.kernel_isa()
    if family not in current:
        raise ValueError(f"unknown kernel family {family!r}; expected one of {', '.join(sorted(current))}")
    previous = current[family]
    in_use = _core._select_kernel_isa(family, path)
    try:
        yield in_use
    finally:
        _core._select_kernel_isa(family, previous)
