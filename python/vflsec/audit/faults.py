"""Broken copies of the mechanisms, to show that an audit would notice.

:func:`halved_noise` is a context manager under which every DP release of the
product draws **half** the noise it claims, while every claim (calibration,
``privacy_spent()``, the sigma a mechanism reports) stays what the honest code
says. It patches the two places all noise is drawn (the mechanism layer owns
every release, and each release ends in one of them):

* the lattice Gaussian (:func:`vflsec.kernels.add_gaussian_noise`, every
  Gaussian mechanism's release): its lattice noise ``Z`` halved and rounded,
  on the lattice of the sigma asked for (noise of about ``sigma / 2``);
* the integer lattice noise (:func:`vflsec.kernels.lattice_gaussian`, DP
  inside MPC's noise shares): each draw halved and rounded (noise of about
  ``sigma / 2``, on the same lattice);
* randomized response (:class:`vflsec.dp.randomized_response.RandomizedResponseMechanism`,
  the label-DP trees): it keeps a label as often as ``2 epsilon`` allows
  (the analogue of doubling a sensitivity: twice the privacy loss per label).

A Gaussian mechanism run with half its noise has twice its Gaussian-DP ``mu``
and more than twice its epsilon at the same delta: ``vflsec audit --fault
halved-noise`` must then fail every case whose pair is strong enough (its
lower bound above half the claim). The callers import these functions at call
time (``from ..kernels import add_gaussian_noise`` inside the function), so
patching the package's attribute reaches every release.

Never for production: it exists to test the auditor (tests/audit) and to show
its power in the committed audit (:mod:`.runner`).
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator

import numpy as np

__all__ = ["FAULTS", "halved_noise"]


@contextlib.contextmanager
def halved_noise() -> Iterator[None]:
    """Every DP release inside the block draws half its claimed noise (module docstring)."""
    from .. import kernels
    from ..dp import randomized_response as rr
    from ..kernels import noise

    honest_add = noise.add_gaussian_noise
    honest_lattice = noise.lattice_gaussian
    honest_keep_words = rr.RandomizedResponseMechanism.keep_words

    def add_half(x: Any, sigma: float, *, generator: Any = None) -> Any:
        # The honest release g (rint(x / g) + Z), then Z halved on the same lattice g (callers check
        # that what they receive stays on the lattice of the sigma they asked for).
        released = honest_add(x, sigma, generator=generator)
        if sigma == 0:
            return released
        g = noise.lattice_spacing(sigma)
        if hasattr(released, "detach"):  # a torch tensor keeps its type and device
            import torch

            rounded = torch.round(torch.as_tensor(x).detach().to(released.device, released.dtype) / g) * g
            return rounded + torch.round((released - rounded) / (2.0 * g)) * g
        out = np.asarray(released)
        rounded = np.rint(np.asarray(x, dtype=out.dtype) / g) * g
        return (rounded + np.rint((out - rounded) / (2.0 * g)) * g).astype(out.dtype)

    def lattice_half(shape: Any, sigma: float, *, generator: Any = None) -> np.ndarray:
        return np.rint(honest_lattice(shape, sigma, generator=generator) / 2.0).astype(np.int64)

    def keep_words_doubled(self: Any) -> int:
        return rr._keep_words(2.0 * self.epsilon)

    patched = [(kernels, "add_gaussian_noise", add_half), (noise, "add_gaussian_noise", add_half),
               (kernels, "lattice_gaussian", lattice_half), (noise, "lattice_gaussian", lattice_half)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    try:
        for owner, name, fault in patched:
            setattr(owner, name, fault)
        rr.RandomizedResponseMechanism.keep_words = property(keep_words_doubled)  # type: ignore[assignment,method-assign]
        yield
    finally:
        for owner, name, honest in saved:
            setattr(owner, name, honest)
        rr.RandomizedResponseMechanism.keep_words = honest_keep_words  # type: ignore[method-assign]


#: fault name (``vflsec audit --fault``) -> context manager
FAULTS: Dict[str, Callable[[], Any]] = {"halved-noise": halved_noise}
