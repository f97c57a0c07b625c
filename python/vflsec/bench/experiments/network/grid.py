"""The grid of ``vflsec bench network`` (``network.toml``) and its :class:`~vflsec.bench.experiment.Experiment`."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...config import load_variant, spec, with_overrides
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["EXPERIMENT", "JobSettings", "LinkGrid", "METHODS", "MPC_METHODS", "NetworkExperiment", "NetworkGrid",
           "NetworkSettings", "PartiesAndData", "load_grid", "mpc_protocol", "with_seed"]

#: the secret-sharing MPC methods (protection "mpc" on SPU, the ``mpc`` extra): ``mpc_<engine protocol>``
MPC_METHODS = ("mpc_semi2k", "mpc_cheetah", "mpc_aby3")
METHODS = ("plain", "hdp", "paillier", "ckks") + MPC_METHODS


@dataclass(frozen=True)
class JobSettings:
    """The GLM job every method runs (``[<variant>.job]``)."""

    loss: str = field(metadata=spec(choices=("logistic",)))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    epochs: int = field(metadata=spec(low=1))
    paillier_epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    seed: int = field(metadata=spec(low=0))
    hdp_epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    hdp_delta: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    hdp_noise_seed: int = field(metadata=spec(low=0))
    key_bits: int = field(metadata=spec(low=2048))


@dataclass(frozen=True)
class NetworkSettings:
    """The ``vflsec party`` processes' network settings (``[<variant>.network]``, seconds)."""

    peer_timeout: float = field(metadata=spec(low=0, low_inclusive=False))
    heartbeat_interval: float = field(metadata=spec(low=0, low_inclusive=False))
    connect_timeout: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class PartiesAndData:
    """The methods, the parties and their data: what the loopback stage and the
    link stage both describe."""

    methods: Tuple[str, ...] = field(metadata=spec(choices=METHODS, non_empty=True))
    parties: Tuple[str, ...] = field(metadata=spec(non_empty=True))
    dataset: str = field(metadata=spec(choices=("adult", "synthetic")))
    features_per_party: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    rows: int = field(metadata=spec(low=2))
    keep: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    data_seed: int = field(metadata=spec(low=0))

    _table_prefix = ""  # names the table in errors

    def __post_init__(self) -> None:
        where = self._table_prefix
        if len(self.parties) < 2 or len(set(self.parties)) != len(self.parties):
            raise BenchConfigError(f"{where}parties must be 2 or more distinct names, got {list(self.parties)}")
        if len(self.features_per_party) != len(self.parties):
            raise BenchConfigError(f"{where}features_per_party has {len(self.features_per_party)} entries for "
                                   f"{len(self.parties)} parties; give one per party")


@dataclass(frozen=True)
class LinkGrid(PartiesAndData):
    """The link stage (``[<variant>.links]``, run with ``--links``): one job per
    method, in memory and as processes over every link profile."""

    job: JobSettings

    _table_prefix = "links: "


@dataclass(frozen=True)
class NetworkGrid(PartiesAndData):
    """One variant of ``network.toml`` (``[full]`` or ``[quick]``)."""

    psi_sizes: Tuple[int, ...] = field(metadata=spec(low=1))
    psi_overlap: float = field(metadata=spec(low=0, high=1))
    job: JobSettings
    network: NetworkSettings
    links: LinkGrid


def load_grid(quick: bool, path: Optional[Path] = None) -> NetworkGrid:
    """``[quick]`` or ``[full]`` of the shipped ``network.toml`` or of the user's copy ``path``."""
    return load_variant(NetworkGrid, "network", "quick" if quick else "full", path)


def with_seed(grid: NetworkGrid, seed: int) -> NetworkGrid:
    """``grid`` with ``--seed``: the seed of the data, the party split and every job (the HDP
    noise: ``seed + 1``), in the loopback stage and the link stage alike."""
    source = "command line (--seed)"

    def job(settings: JobSettings) -> JobSettings:
        return with_overrides(settings, source, seed=seed, hdp_noise_seed=seed + 1)

    links = with_overrides(grid.links, source, data_seed=seed, job=job(grid.links.job))
    return with_overrides(grid, source, data_seed=seed, job=job(grid.job), links=links)


def mpc_protocol(method: str) -> str:
    """``"mpc_cheetah"`` -> ``"cheetah"``: the engine protocol of an MPC method."""
    return method[len("mpc_"):]


def _check_engine_parties(method: str, stage: PartiesAndData) -> None:
    from ....mpc.engine import MPC_PROTOCOLS

    try:  # the engine protocol's own rule and message
        MPC_PROTOCOLS[mpc_protocol(method)].check_parties(len(stage.parties))
    except ValueError as exc:
        raise BenchConfigError(f"{stage._table_prefix}{method}: {exc}, or leave {method} out") from None


def parse_links_option(text: str) -> List[Any]:
    """``--links`` as link profiles (:func:`.links.parse_links`); a one-line
    :class:`BenchConfigError` for a mistake."""
    from .links import parse_links

    try:
        return parse_links(text)
    except ValueError as exc:
        raise BenchConfigError(f"--links: {exc} -- e.g. --links loopback,lan,wan or --links 'loopback;5mbit,80ms'"
                               ) from None


class NetworkExperiment(Experiment):
    """Every method as ``vflsec party`` processes over loopback gRPC (mutual TLS) against
    the same job in memory, two-party PSI timings, and (``--links``) the link stage."""

    name = "network"
    quick_help = "tiny sizes (a smoke run): the [quick] grid"
    versions = ("numpy", "grpcio", "cryptography", "openmined-psi", "phe", "tenseal", "spu")
    seed_key = None  # --seed sets several keys (with_seed)
    seed_help = ("seed of the data, the party split and every job, in both stages (HDP noise: seed + 1); "
                 "default: the configuration's")
    overrides = (
        Override("--methods", "methods", comma_list(str),
                 f"comma-separated protocols, among {', '.join(METHODS)}", metavar="NAMES"),
        Override("--rows", "rows", int, "rows per party before the ID overlap", metavar="N"),
        Override("--psi-sizes", "psi_sizes", comma_list(int), "comma-separated IDs per party for the PSI timings",
                 metavar="SIZES"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                            help="Adult folder (default: $VFLSEC_DATA)")
        parser.add_argument("--links", default=None, metavar="PROFILES",
                            help="also run the link stage over these profiles: names from loopback,lan,datacenter,"
                                 "wan,internet and/or BANDWIDTH,RTT (separate with ';' when one is custom, e.g. "
                                 "'loopback;wan;5mbit,80ms'); loopback is always run first (it calibrates the model)")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> NetworkGrid:
        grid = load_grid(quick, path)
        if options.get("seed") is not None:
            grid = with_seed(grid, int(options["seed"]))
        return grid

    def seed_of(self, grid: NetworkGrid) -> Optional[int]:
        return grid.data_seed

    def check(self, grid: NetworkGrid, options: Dict[str, Any]) -> None:
        """The links parse, every protocol's library imports and the data loads, before any cell runs."""
        from ....errors import missing_dataset, require_extra

        stages: List[PartiesAndData] = [grid]
        if options.get("links") is not None:
            parse_links_option(options["links"])
            stages.append(grid.links)
        methods = {m for stage in stages for m in stage.methods}
        require_extra("private_set_intersection.python")  # the parties align their rows with PSI
        if "paillier" in methods:
            require_extra("phe", "gmpy2")
        if "ckks" in methods:
            require_extra("tenseal")
        for stage in stages:
            for method in set(stage.methods) & set(MPC_METHODS):
                _check_engine_parties(method, stage)
        if any(stage.dataset == "adult" for stage in stages):
            from ....data import load_dataset

            try:
                load_dataset("adult", data_dir=options.get("data_dir"))
            except FileNotFoundError as exc:
                raise missing_dataset(exc) from None

    def run_cells(self, grid: NetworkGrid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        links = parse_links_option(options["links"]) if options.get("links") is not None else None
        run_cells(grid, result, data_dir=options.get("data_dir"), links=links)

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = NetworkExperiment()
