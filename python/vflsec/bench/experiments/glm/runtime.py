"""The runtime side of ``vflsec bench glm`` (the HDP-VFL paper's Fig. 3).

Wall time, phases (compute / crypto / messaging) and bytes of each method on
synthetic data of Adult's shape, over epochs and over n. The HE-VFL protocols
with a DP model (``paillier_dp``, ``ckks_dp``) run the same cells as their
protocol without DP (epsilon 1, delta 0.01, the same clip k), so their ratio is
the cost of the key holder's noise. An HE method listed
in the grid's ``runtime_he_batches`` measures at most that many batches per
cell: a cell with more is measured on whole epochs (or, when one epoch has
more, a prefix of whole batches of one epoch) and extrapolated linearly in the
number of rows (an HE epoch's last batch is larger). Such cells say so
(``extrapolated``, ``measured_batches``, ``measured_rows``) and are drawn as
crosses. What is measured is decided by the configuration alone, never by how
long a cell would take on this machine.

The secret-sharing MPC methods (``mpc_semi2k``, ``mpc_cheetah``: :mod:`.mpc_cells`) train
plain VFL's recursion inside SPU with the engine's link on loopback TCP through a relay that
counts its bytes; their cells record the vflsec Channel's bytes (``channel_bytes``: the input
shares and the reveal, once per run) and the engine's (``engine_bytes``), ``bytes`` being the
sum. ``runtime_mpc_batches`` caps them as ``runtime_he_batches`` caps HE cells, counted in
engine steps (an MPC epoch's last batch is padded to a full one): time and engine bytes are
extrapolated linearly in steps, channel bytes in rows.

Every cell records ``cpu_seconds`` beside its wall ``seconds`` (:class:`.cpu.CPUClock`: every
party's thread and Paillier's worker processes).
"""
from __future__ import annotations

import contextlib
import math
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .cpu import CPUClock
from .grid import DELTA, HE_DP_METHODS, HE_METHODS, LAM, LEARNING_RATE, MPC_METHODS, PAPER_FIG1

__all__ = ["he_measurement", "mpc_measurement", "run_runtime"]


def run_runtime(rows: List[Dict[str, Any]], *, sizes: Sequence[int], epoch_counts: Sequence[int], epochs_n: int,
                features: Sequence[int], methods: Sequence[str], batch_size: int,
                he_batches: Mapping[str, int], paillier_3072: bool = False,
                lr: float = LEARNING_RATE, mpc_batches: Optional[Mapping[str, int]] = None) -> List[Dict[str, Any]]:
    """Wall time, CPU time, phases and bytes for each method (Paillier with 2048-bit keys), each
    cell appended to ``rows`` as it finishes (and ``rows`` returned). ``he_batches``:
    HE method -> the most batches a cell measures (:func:`he_measurement`); a method
    not in it is measured in full; ``mpc_batches`` the same for the MPC methods
    (:func:`mpc_measurement`; they need SPU, the ``mpc`` extra). ``paillier_3072`` adds one 3072-bit
    Paillier cell (n = ``epochs_n``, one epoch): the cost of 128-bit security. ``lr``: the
    experiment's learning rate (glm.toml's ``learning_rate``)."""
    from ...._progress import progress
    from ....data import make_synthetic

    limits = {**he_batches, **(mpc_batches or {})}
    if set(methods) & set(MPC_METHODS):
        _load_engine()
    cells = [(epochs_n, e) for e in epoch_counts] + [(n, 1) for n in sizes if not (n == epochs_n and 1 in epoch_counts)]
    cache: Dict[tuple, Any] = {}
    for n, epochs in progress(cells, desc="runtime", unit="cell"):
        ds = make_synthetic(n_samples=n, features_per_party=list(features), seed=0)
        parts = np.split(ds.X, np.cumsum(features)[:-1], axis=1)
        for method in methods:
            rows.append(_runtime_cell(method, parts, ds.y, n, epochs, batch_size, limits.get(method), cache,
                                      lr=lr))
        if paillier_3072 and n == epochs_n and epochs == 1:
            rows.append(_runtime_cell("paillier", parts, ds.y, n, 1, batch_size, he_batches.get("paillier"), cache,
                                      key_bits=3072, label="paillier-3072", lr=lr))
    return rows


def _load_engine() -> None:
    """Import SPU and JAX before the first MPC cell is timed: importing them once per process is
    not a cost of training."""
    from ....mpc.engine import load_spu

    load_spu()
    import jax  # noqa: F401  (SPU's front end traces the program with it)


def he_measurement(n: int, epochs: int, batch_size: int, max_batches: Optional[int]) -> Tuple[int, int, int]:
    """``(rows, epochs, batches)`` an HE cell of ``epochs`` epochs over ``n`` rows measures
    when it may measure at most ``max_batches`` batches (None: no limit). An HE job joins
    an epoch's partial last chunk to the batch before it (``vflsec.glm.he_vfl.he_batches``):
    ``floor(n / b)`` batches per epoch. Within the limit the whole run; else as many whole
    epochs as fit; else a prefix of whole batches of one epoch."""
    return _measurement(n, epochs, batch_size, max_batches, max(1, n // batch_size))


def mpc_measurement(n: int, epochs: int, batch_size: int, max_batches: Optional[int]) -> Tuple[int, int, int]:
    """:func:`he_measurement` for an MPC cell, whose epoch is ``ceil(n / b)`` engine steps (the
    last batch padded to a full one under a mask, :func:`vflsec.glm.mpc.epoch_schedule`)."""
    return _measurement(n, epochs, batch_size, max_batches, math.ceil(n / batch_size))


def _measurement(n: int, epochs: int, batch_size: int, max_batches: Optional[int],
                 per_epoch: int) -> Tuple[int, int, int]:
    total = epochs * per_epoch
    if max_batches is None or max_batches >= total:
        return n, epochs, total
    if max_batches >= per_epoch:
        ep = max_batches // per_epoch
        return n, ep, ep * per_epoch
    return max_batches * batch_size, 1, max_batches


def _runtime_cell(method: str, parts: List[np.ndarray], y: np.ndarray, n: int, epochs: int, batch_size: int,
                  max_batches: Optional[int], cache: Dict[tuple, Any], *, key_bits: int = 2048,
                  label: Optional[str] = None, lr: float = LEARNING_RATE) -> Dict[str, Any]:
    from ....glm import VerticalLogisticRegression

    cell: Dict[str, Any] = {"dataset": "synthetic(adult-shape)", "method": label or method, "n": n, "epochs": epochs}
    he = method in HE_METHODS + HE_DP_METHODS
    mpc = method in MPC_METHODS
    if method.startswith("paillier"):
        cell["key_bits"] = key_bits
    protection, options = method, {}
    if mpc:
        from .mpc_cells import engine_protocol

        protection, options = "mpc", {"mpc_protocol": engine_protocol(method)}
        cell.update(mpc_protocol=options["mpc_protocol"], engine_link=ENGINE_LINK)

    def fit(rows: int, ep: int) -> Tuple[float, float, Dict[str, Any]]:
        with warnings.catch_warnings():
            # The 2048-bit Paillier key warns by design: the rows carry key_bits and the report says so.
            warnings.filterwarnings("ignore", message=".*2048.*")
            model = VerticalLogisticRegression(protection=protection, epsilon=1.0, delta=DELTA, lam=LAM,
                                               lr=lr, epochs=ep, batch_size=min(batch_size, rows),
                                               k=PAPER_FIG1.k,
                                               seed=0, key_bits=key_bits, **options)
            with _engine_links(mpc), CPUClock() as cpu:
                t0 = time.perf_counter()
                model.fit([p[:rows] for p in parts], y[:rows])
                seconds = time.perf_counter() - t0
            return seconds, cpu.seconds, model.history_

    def cached_fit(rows: int, ep: int) -> Tuple[float, float, Dict[str, Any]]:
        # Cells at the same n and key share their measured runs (same data, same batches).
        key = (method, key_bits, n, rows, ep)
        if key not in cache:
            if he or mpc:
                cache[key] = fit(rows, ep)
            else:
                # Milliseconds: one run is at the mercy of the machine; the median of 3 is reported.
                runs = [fit(rows, ep) for _ in range(3)]
                cache[key] = (float(np.median([r[0] for r in runs])), float(np.median([r[1] for r in runs])),
                              runs[-1][2])
        return cache[key]

    if mpc:
        measured_rows, ep, _ = mpc_measurement(n, epochs, batch_size, max_batches)
        return {**cell, **_mpc_figures(*cached_fit(measured_rows, ep), n=n, epochs=epochs, batch_size=batch_size,
                                       max_batches=max_batches)}
    if he:
        measured_rows, ep, measured_batches = he_measurement(n, epochs, batch_size, max_batches)
        secs, cpu, hist = cached_fit(measured_rows, ep)
        if (measured_rows, ep) != (n, epochs):
            # Scale by rows, not batches: an epoch's last batch is larger
            # (n = 10,000, b = 3,200: 3,600 rows), and HE work is per row.
            scale = epochs * n / (ep * measured_rows)
            return {**cell, "seconds": secs * scale, "cpu_seconds": cpu * scale, "extrapolated": True,
                    "measured_batches": measured_batches, "measured_rows": ep * measured_rows,
                    "measured_seconds": secs, "measured_cpu_seconds": cpu,
                    "bytes": int(hist["total_bytes"] * scale),
                    "phases": {k: v * scale for k, v in hist["time"].items() if k != "wall"}}
        return {**cell, "seconds": secs, "cpu_seconds": cpu, "extrapolated": False,
                "measured_batches": measured_batches, "bytes": int(hist["total_bytes"]),
                "phases": {k: v for k, v in hist["time"].items() if k != "wall"}}
    secs, cpu, hist = cached_fit(n, epochs)
    return {**cell, "seconds": secs, "cpu_seconds": cpu, "extrapolated": False,
            "measured_batches": epochs * math.ceil(n / batch_size), "bytes": int(hist["total_bytes"]),
            "phases": {k: v for k, v in hist["time"].items() if k != "wall"}}


# Where an MPC runtime cell's engine traffic goes (recorded in the cell; the report states it).
ENGINE_LINK = "loopback TCP through a byte-counting relay (MeteredLinks)"


def _engine_links(mpc: bool) -> Any:
    """The MPC cells' link provider (:func:`.mpc_cells.counted_engine_links`); nothing for the others."""
    if not mpc:
        return contextlib.nullcontext()
    from .mpc_cells import counted_engine_links

    return counted_engine_links()


def _mpc_figures(secs: float, cpu: float, hist: Dict[str, Any], *, n: int, epochs: int, batch_size: int,
                 max_batches: Optional[int]) -> Dict[str, Any]:
    """An MPC cell's time, CPU and bytes from its measured run (:func:`mpc_measurement`), extrapolated
    when the run measured fewer steps than the cell has: time, CPU and engine bytes linearly in engine
    steps, the Channel's bytes (the input shares and the reveal, sent once per run) in rows."""
    measured_rows, ep, steps = mpc_measurement(n, epochs, batch_size, max_batches)
    channel, engine = int(hist["total_bytes"]), int(hist["engine_total_bytes"])
    phases = {k: v for k, v in hist["time"].items() if k != "wall"}
    if (measured_rows, ep) == (n, epochs):
        return {"seconds": secs, "cpu_seconds": cpu, "extrapolated": False, "measured_batches": steps,
                "bytes": channel + engine, "channel_bytes": channel, "engine_bytes": engine, "phases": phases}
    by_steps = epochs * math.ceil(n / batch_size) / steps
    channel, engine = int(channel * n / measured_rows), int(engine * by_steps)
    return {"seconds": secs * by_steps, "cpu_seconds": cpu * by_steps, "extrapolated": True,
            "measured_batches": steps, "measured_rows": ep * measured_rows, "measured_seconds": secs,
            "measured_cpu_seconds": cpu, "bytes": channel + engine, "channel_bytes": channel, "engine_bytes": engine,
            "phases": {k: v * by_steps for k, v in phases.items()}}
