"""The measurements of ``vflsec bench he``, in the order they run: every
Paillier key size (:mod:`.paillier`), then CKKS (:mod:`.ckks`), then one HE-VFL
epoch (:mod:`.epoch`). Each finished part is added to the results at once, so
an interrupted run keeps it (the runner writes it, marked partial)."""
from __future__ import annotations

import warnings
from typing import Any, Dict, Iterator, List

from .grid import HEGrid

__all__ = ["RANDOMNESS", "run_cells"]

RANDOMNESS = ("plaintexts, matrices and data from --seed; keys and encryption randomness from the OS CSPRNG "
              "(by design)")


def _heu_note(available: bool) -> str:
    if not available:
        return "sf-heu (SecretFlow HEU) is not installed: its ZPaillier and OU rows are skipped (`pip install sf-heu`)."
    return ("HEU runs its C++ batch API (heu.numpy) with its own thread pool; its CPU time counts every thread. "
            "HEU OU is Okamoto-Uchiyama (n = p^2 q of the same bit length), a different scheme from Paillier. "
            "HEU generates its own keys (same size); phe and the vflsec baselines use the same modulus as vflsec.")


def run_cells(grid: HEGrid, result: Dict[str, Any]) -> None:
    """Measure everything ``grid`` asks for into ``result`` (the runner's envelope), then
    record the criteria as judged now and the conclusion (the report recomputes both)."""
    from ...._progress import progress
    from ....he import WeakKeyWarning, shutdown_pool
    from .paillier import OPS, _optional_heu

    heu = _optional_heu()
    notes: List[str] = [_heu_note(heu is not None)]
    result.update({
        "randomness": RANDOMNESS, "heu_available": heu is not None, "notes": notes,
        "setup": [], "paillier": [], "paillier_sizes": [], "ckks": [], "ckks_sizes": {}, "epoch": None,
    })
    steps = len(grid.key_bits) * len(OPS) + int(grid.ckks) + int(grid.epoch)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakKeyWarning)
            for _ in progress(_steps(grid, heu, result), desc="bench he", unit="step", total=steps):
                pass
    finally:
        shutdown_pool()
    for r in result["paillier"]:
        if not r["verified"]:
            notes.append(f"{r['key_bits']}-bit {r['op']} / {r['method']}: its spot-check decryption did NOT match; "
                         "its rate is not comparable and it is left out of the criteria.")
    from .report import conclusion, criteria_record

    result["criteria"] = criteria_record(result)
    result["conclusion"] = conclusion(result)


def _steps(grid: HEGrid, heu: Any, result: Dict[str, Any]) -> Iterator[str]:
    """Run the sections one step at a time (a progress step each), adding to ``result`` as they finish."""
    from ....he import shutdown_pool
    from .ckks import bench_ckks
    from .epoch import bench_epoch
    from .paillier import _add_ratios, _paillier_sizes, bench_paillier

    for bits in grid.key_bits:
        for op in bench_paillier(bits, grid, grid.seed, heu, result["paillier"], result["setup"]):
            _add_ratios(result["paillier"])  # against phe's row of the same key and operation, once it exists
            yield f"Paillier-{bits} {op}"
        result["paillier_sizes"].append(_paillier_sizes(bits, grid.ckks_rows, grid.dot_cols))
    shutdown_pool()
    if grid.ckks:
        bench_ckks(grid, grid.seed, result["ckks"], result["ckks_sizes"])
        yield "CKKS"
    if grid.epoch:
        result["epoch"] = bench_epoch(grid, grid.seed)
        yield "epoch"
