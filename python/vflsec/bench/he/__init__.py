"""Paillier and CKKS throughput against phe and HEU, and one HE-VFL epoch, in one run.

``vflsec bench he [--quick] [--config FILE] [--seed N] [--out DIR] [--key-bits 2048 3072]``
(or ``python -m vflsec bench he``) times, for every Paillier key size:
encryption, decryption, ciphertext addition, ciphertext times plaintext with
41-bit (vflsec's 2^40 fixed-point encoding of |x| < 2) and 53-bit scalars, the
encrypted vector-matrix product X^T [[r]] and re-randomization, for

- vflsec in-process (``processes=1``, CPU time) and with 2 worker processes
  (wall time; their CPU time read from /proc where it can be),
- vflsec's old paths as named baselines: "vflsec classic r^n" (a key without
  the DJN fixed base) and "vflsec per-product" (one exponentiation per matrix
  entry, the product before the Pippenger multi-exponentiation),
- ``phe`` (python-paillier) on the same modulus,
- SecretFlow HEU's ZPaillier and OU (``sf-heu``) where it imports,

then vflsec's CKKS layer (and TenSEAL directly): encryption, the diagonal
vector-matrix product beside the per-column one it replaced ("vflsec CKKS
per-column (old path)", same run and values), serialized and public-context
sizes; and one epoch of Paillier HE-VFL
logistic regression with the new and the old path (CPU time in-process).
Every timed result is decrypted (a spot check) so a broken path cannot be
timed. Writes ``DIR/results.json``, ``DIR/report.md`` and ``DIR/he.png``.

Plaintexts, matrices and the training data come from ``--seed``; keys and the
encryption randomness come from the operating system's CSPRNG by design (a
seeded encryption would be insecure), so rates vary a little run to run while
the plaintext workload is identical.

The sizes are data: ``configs/he.toml`` (:class:`HEGrid`). Modules: :mod:`.timing`
(CPU / wall measurement and the spot-checked method runner), :mod:`.old_path`
(vflsec's old Paillier paths as baselines),
:mod:`.paillier` (Paillier primitives against phe and HEU), :mod:`.ckks`
(CKKS primitives), :mod:`.epoch` (one HE-VFL epoch, new path against old),
:mod:`.report` (criteria, conclusion, ``report.md`` and ``he.png``).
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from tqdm import tqdm

from ..common import git_revision, machine_info, package_versions, write_json
from ..config import BenchConfigError, with_overrides
from .ckks import bench_ckks
from .epoch import bench_epoch
from .grid import HEGrid, load_grid
from .old_path import old_paillier_path, per_product_dot
from .paillier import OPS, _add_ratios, _optional_heu, _paillier_sizes, bench_paillier
from .report import (
    TARGET_CKKS_DOT_VS_PER_COLUMN,
    TARGET_DOT_VS_PHE,
    TARGET_ENCRYPT_VS_PHE,
    TARGET_EPOCH_CPU,
    TARGET_VS_HEU,
    _ckks_criteria,
    _conclusion,
    _criteria,
    plot,
    render,
    render_report,
)
from .timing import _PROG, _load_snapshot

__all__ = ["HEGrid", "OPS", "TARGET_CKKS_DOT_VS_PER_COLUMN", "TARGET_DOT_VS_PHE", "TARGET_ENCRYPT_VS_PHE",
           "TARGET_EPOCH_CPU", "TARGET_VS_HEU", "load_grid", "add_arguments", "bench_ckks", "bench_epoch",
           "bench_paillier", "main", "old_paillier_path",
           "per_product_dot", "plot", "render_report", "run"]


def _fail(message: str) -> NoReturn:
    print(f"{_PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _check_key_bits(values: Optional[Sequence[int]]) -> Optional[List[int]]:
    if values is None:
        return None
    out: List[int] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 2048 or v % 2:
            _fail(f"--key-bits must be even integers >= 2048, got {v!r}")
        if v not in out:
            out.append(v)
    if not out:
        _fail("--key-bits is empty")
    return out


def run(quick: bool = False, seed: Optional[int] = None, out: Optional[Path] = None,
        key_bits: Optional[Sequence[int]] = None, sizes: Optional[Dict[str, Any]] = None, epoch: bool = True,
        ckks: bool = True, config: Optional[Path] = None) -> Dict[str, Any]:
    """Run the benchmark and write ``results.json``, ``report.md`` and ``he.png``.

    ``config``: a user's copy of ``he.toml`` (default: the shipped one);
    ``seed``, ``key_bits`` and ``sizes`` (entries of the grid; tests use tiny
    ones) override it; ``epoch=False`` / ``ckks=False`` skip those sections.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        _fail(f"--seed must be an integer >= 0, got {seed!r}")
    bits_list = _check_key_bits(key_bits)
    out = Path(out) if out is not None else Path("bench-out") / "he"
    grid = load_grid(quick, config)
    overrides: Dict[str, Any] = dict(sizes or {})
    if "seed" in overrides:
        raise ValueError("unknown size keys: ['seed'] (pass seed=)")
    if bits_list is not None:
        overrides["key_bits"] = bits_list
    if seed is not None:
        overrides["seed"] = seed
    if overrides:
        try:
            grid = with_overrides(grid, "command line", **overrides)
        except BenchConfigError as exc:
            if sizes and set(sizes) - set(grid.sizes()):
                raise ValueError(f"unknown size keys: {sorted(set(sizes) - set(grid.sizes()))}") from None
            raise exc
    seed = grid.seed
    cfg: Dict[str, Any] = grid.sizes()
    cfg.update(quick=bool(quick), seed=seed, epoch=bool(epoch), ckks=bool(ckks))
    heu = _optional_heu()
    notes: List[str] = []
    if heu is None:
        notes.append("sf-heu (SecretFlow HEU) is not installed: its ZPaillier and OU rows are skipped "
                     "(`pip install sf-heu`).")
    else:
        notes.append("HEU runs its C++ batch API (heu.numpy) with its own thread pool; its CPU time counts every "
                     "thread. HEU OU is Okamoto-Uchiyama (n = p^2 q of the same bit length), a different scheme "
                     "from Paillier. HEU generates its own keys (same size); phe and the vflsec baselines use the "
                     "same modulus as vflsec.")
    result: Dict[str, Any] = {
        "benchmark": "he",
        "machine": machine_info(),
        "versions": package_versions(["vflsec", "phe", "gmpy2", "sf-heu", "tenseal", "numpy"]),
        "git": git_revision(),
        "config": cfg,
        "randomness": "plaintexts, matrices and data from --seed; keys and encryption randomness from the OS "
                      "CSPRNG (by design)",
        "load": {"start": _load_snapshot()},
        "heu_available": heu is not None,
        "notes": notes,
        "setup": [], "paillier": [], "paillier_sizes": [], "ckks": [], "ckks_sizes": {}, "epoch": None,
    }
    start = time.perf_counter()
    from ...he import WeakKeyWarning, shutdown_pool

    steps = len(cfg["key_bits"]) * len(OPS) + int(ckks) + int(epoch)
    try:
        with warnings.catch_warnings(), tqdm(total=steps, desc="bench he", unit="step") as progress:
            warnings.simplefilter("ignore", WeakKeyWarning)
            for bits in cfg["key_bits"]:
                bench_paillier(bits, grid, seed, heu, result["paillier"], result["setup"], progress)
                result["paillier_sizes"].append(_paillier_sizes(bits, cfg["ckks_rows"], cfg["dot_cols"]))
            shutdown_pool()
            if ckks:
                bench_ckks(grid, seed, result["ckks"], result["ckks_sizes"])
                progress.update(1)
            if epoch:
                result["epoch"] = bench_epoch(grid, seed)
                progress.update(1)
    finally:
        shutdown_pool()
    _add_ratios(result["paillier"])
    for r in result["paillier"]:
        if not r["verified"]:
            notes.append(f"{r['key_bits']}-bit {r['op']} / {r['method']}: its spot-check decryption did NOT match; "
                         "its rate is not comparable and it is left out of the criteria.")
    result["seconds"] = time.perf_counter() - start
    result["load"]["end"] = _load_snapshot()
    result["criteria"] = {**_criteria(result["paillier"], result["epoch"]), **_ckks_criteria(result["ckks"])}
    result["conclusion"] = _conclusion(result)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result)
    report = render(result, out)
    print(report)
    print(f"\nwrote {out / 'results.json'}, {out / 'report.md'}, {out / 'he.png'}")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="Paillier-2048 only, small sizes (X 400 x 10; epoch n = 2000, batch 400): about 2 "
                             "minutes on 2 cores")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the plaintexts, matrices and training data (keys and encryption randomness "
                             "always come from the OS CSPRNG); default: the config's, 0")
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "he", help="output directory "
                        "(default bench-out/he)")
    parser.add_argument("--key-bits", type=int, nargs="+", default=None, metavar="BITS",
                        help="Paillier modulus sizes (default: the config's; 2048 3072, --quick: 2048)")

    def one_line_error(message: str) -> NoReturn:
        _fail(message)

    # argparse's own errors (a non-integer --seed, ...) in one line too, with exit code 2.
    parser.error = one_line_error  # type: ignore[method-assign]


def main(argv: Optional[List[str]] = None) -> int:
    from ..command import add_config_arguments, run_command

    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.splitlines()[0], allow_abbrev=False)
    add_arguments(parser)
    add_config_arguments(parser, "he")
    return run_command(sys.modules[__name__], "he", vars(parser.parse_args(argv)))
