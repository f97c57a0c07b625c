"""The grid of ``vflsec bench glm`` and its :class:`~vflsec.bench.experiment.Experiment`.

Everything ``vflsec bench glm`` runs is described by a :class:`GLMBenchConfig`,
read from ``glm.toml`` (``[full]``, ``[quick]``; a user's copy with
``--config``): datasets, split seeds, noise draws, privacy budgets, the
hyperparameter grids, which HE methods get accuracy cells on which datasets
and the runtime grid. The HDP-VFL paper's settings, published numbers and
claims are ``vflsec/bench/papers/hdp_vfl.toml`` (:data:`PAPER`). The cells
(:mod:`.accuracy`, :mod:`.runtime`) are a loop over this description; the
report (:mod:`.report`) reads only the rows they produced.

Hyperparameter families (all for every method that has the parameter):

* **headline** -- one configuration per dataset, fixed before the dataset's
  own rows are looked at: the configuration of :data:`WIDE_GRID` with the
  best 5-fold cross-validated accuracy, averaged over the budgets, on the
  *other* datasets of the run (their training rows); a run with a single
  dataset selects on the built-in synthetic data instead. Epsilon is the
  whole privacy cost of these rows.
* **tuned (paper grid / wide grid)** -- 5-fold cross-validation on the
  evaluated training set, per budget, as HDP-VFL's authors did (e in [5, 15],
  k in [0.1, 1] at b = 3200), and over a wider grid (k up to 10,
  b in {256, 1024, 3200}). Labelled "epsilon excludes hyperparameter search":
  the composed epsilon of the search's training runs is reported beside it.
* **private selection** -- Papernot & Steinke (2022) random stopping over the
  wide grid, with a per-candidate budget chosen so that the accounted total
  is the row's epsilon.

What a run contains is its configuration alone: the HE accuracy cells are the
methods and datasets of ``he_accuracy``, the MPC ones those of ``mpc_accuracy``, the
DP spectrum's MPC+DP ones those of ``mpc_dp_accuracy`` at ``mpc_dp_accuracy_epsilons``,
and an HE (MPC) runtime cell measures at most ``runtime_he_batches[method]``
(``runtime_mpc_batches[method]``) batches (the rest extrapolated, labelled as
such) on every machine, however fast. The MPC and MPC+DP cells (secret sharing on SPU,
:mod:`.mpc_cells`) need the ``mpc`` extra; without it they are labelled "not run"
and the rest of the run goes on.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...config import load_paper, load_variant, optional_field, spec, with_overrides
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = [
    "DELTA",
    "EXPERIMENT",
    "FIGURE2_GRID",
    "GLMBenchConfig",
    "GLMExperiment",
    "HDPVFLPaper",
    "HE_DP_METHODS",
    "HE_METHODS",
    "HyperParams",
    "MPC_DP_METHODS",
    "MPC_METHODS",
    "LAM",
    "LEARNING_RATE",
    "PAPER",
    "PAPER_FIG1",
    "PAPER_FIGURE2_TEXT",
    "PAPER_GRID",
    "PLAIN_GRID",
    "WIDE_GRID",
    "cell_seed",
    "load_config",
]

HE_METHODS = ("paillier", "ckks")
HE_DP_METHODS = ("paillier_dp", "ckks_dp")
# Secret-sharing MPC (protection "mpc" of vflsec.glm): "mpc_<engine protocol>" for the two-party
# protocols of vflsec.mpc.MPC_PROTOCOLS (aby3 needs three parties; these rows have two).
MPC_METHODS = ("mpc_semi2k", "mpc_cheetah")
# DP-SGD on the joined features inside MPC (protection "mpc_dp"): "mpc_dp_<engine protocol>", the same two.
MPC_DP_METHODS = ("mpc_dp_semi2k", "mpc_dp_cheetah")
RUNTIME_METHODS = ("plain", "hdp", "ckks", "paillier", "ckks_dp", "paillier_dp") + MPC_METHODS


#: the full run's MPC accuracy cells (glm.toml's [full] mpc_accuracy)
_MPC_ACCURACY: Dict[str, Tuple[str, ...]] = {"mpc_semi2k": ("breast", "adult"), "mpc_cheetah": ("breast", "adult")}


@dataclass(frozen=True)
class PaperSettings:
    lam: float = field(metadata=spec(low=0))
    delta: float = field(metadata=spec(low=0, low_inclusive=False, high=1))


@dataclass(frozen=True)
class PaperFigure1:
    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    k: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class PaperTuningGrid:
    batch_sizes: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    max_k: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class PaperFigure2:
    epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    epochs: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    k: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    batch_size: int = field(metadata=spec(low=1))


@dataclass(frozen=True)
class HDPVFLPaper:
    """``papers/hdp_vfl.toml``: HDP-VFL's settings and what it reports (its
    ``[[claims]]`` are read by :func:`vflsec.bench.claims.load_claims`)."""

    settings: PaperSettings
    figure1: PaperFigure1
    tuning_grid: PaperTuningGrid
    figure2: PaperFigure2
    figure2_text: Dict[str, float] = field(metadata=spec(keys=("e=5", "e=15", "k=0.1", "k=0.5"), low=0, high=1))


PAPER = load_paper(HDPVFLPaper, "hdp_vfl")
# HDP-VFL Sec. 6.2: lambda = 0.001 and delta = 0.01 for every dataset.
LAM = PAPER.settings.lam
DELTA = PAPER.settings.delta
# The paper gives no learning rate. 2.0 is half the largest rate the DP bound
# accepts for two coupled parties (2 / (2 * 0.25 + lam) = 3.99, see
# vflsec.dp.sensitivity) and is used by every configuration below (the
# ``learning_rate`` of glm.toml; this is its shipped value).
LEARNING_RATE = 2.0


@dataclass(frozen=True)
class HyperParams:
    """One training configuration (lam and delta are fixed: :data:`LAM`, :data:`DELTA`)."""

    lr: float
    epochs: int
    batch_size: int
    k: float

    def for_rows(self, n: int) -> "HyperParams":
        """The batch never exceeds the training rows (Breast has 455)."""
        return replace(self, batch_size=min(self.batch_size, int(n)))

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def label(self) -> str:
        return f"e={self.epochs} k={self.k:g} b={self.batch_size}"


# The paper's Figure 1 settings (b = 3200, e = 10, k = 1).
PAPER_FIG1 = HyperParams(LEARNING_RATE, PAPER.figure1.epochs, PAPER.figure1.batch_size, PAPER.figure1.k)
# What the paper's text says of its Figure 2 (the plot itself has no printed values).
PAPER_FIGURE2_TEXT = dict(PAPER.figure2_text)


def _grid(lr: float, batch_sizes, epochs, ks) -> Tuple[HyperParams, ...]:
    return tuple(HyperParams(lr, e, b, k) for b in batch_sizes for e in epochs for k in ks)


@dataclass(frozen=True)
class GLMBenchConfig:
    """Everything one ``vflsec bench glm`` run does.

    ``seed``: None draws DP noise from the OS-entropy CSPRNG (the only
    setting with a privacy guarantee; numbers then differ run to run); an
    int seeds every cell's noise explicitly (an experiment setting, labelled
    in the report) so the committed numbers reproduce exactly. Splits and
    batch orders are always seeded.
    """

    datasets: Tuple[str, ...] = field(default=("breast", "credit", "adult"), metadata=spec(non_empty=True))
    split_seeds: int = field(default=5, metadata=spec(low=1))
    noise_draws: int = field(default=3, metadata=spec(low=1))
    epsilons: Tuple[float, ...] = field(default=(0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0),
                                        metadata=spec(low=0, low_inclusive=False, non_empty=True))
    cv_folds: int = field(default=5, metadata=spec(low=2))
    test_size: float = field(default=0.2, metadata=spec(low=0, low_inclusive=False, high=0.9))
    max_rows: Optional[int] = field(default=None, metadata=optional_field(low=10))
    seed: Optional[int] = field(default=0, metadata=optional_field(low=0))
    # Private selection (Papernot & Steinke 2022): mean number of candidates.
    selection_mean_candidates: float = field(default=10.0, metadata=spec(low=1))
    # HE accuracy cells (slow): method -> the datasets it is trained on (on the
    # first he_split_seeds splits); a dataset of the run not listed gets none.
    he_accuracy: Dict[str, Tuple[str, ...]] = field(
        default_factory=lambda: {"paillier": ("breast", "adult"), "ckks": ("breast", "adult")},
        metadata=spec(keys=HE_METHODS))
    he_split_seeds: int = field(default=1, metadata=spec(low=0))
    # MPC accuracy cells: method -> the datasets it is trained on (the first he_split_seeds splits, at
    # plain VFL's configuration: the same recursion on secret shares). Left out of a table (a copy of
    # glm.toml from before these rows): none.
    mpc_accuracy: Optional[Dict[str, Tuple[str, ...]]] = field(
        default_factory=lambda: dict(_MPC_ACCURACY),
        metadata=optional_field(keys=MPC_METHODS))
    he_key_bits: int = field(default=2048, metadata=spec(low=2048))
    figure2: bool = True
    # Hyperparameter grids: the wide grid is batch_sizes x epochs x k; the
    # non-private references (plain VFL, centralized GD, HE-VFL) are tuned by CV
    # on the training rows (free: they spend no privacy budget) over the wide
    # grid plus small batches, which a non-private model can afford.
    learning_rate: float = field(default=LEARNING_RATE, metadata=spec(low=0, low_inclusive=False))
    grid_batch_sizes: Tuple[int, ...] = field(default=(256, 1024, 3200), metadata=spec(low=1, non_empty=True))
    grid_epochs: Tuple[int, ...] = field(default=(5, 10, 15), metadata=spec(low=1, non_empty=True))
    grid_k: Tuple[float, ...] = field(default=(0.1, 0.3, 1.0, 3.0, 10.0),
                                      metadata=spec(low=0, low_inclusive=False, non_empty=True))
    plain_extra_batch_sizes: Tuple[int, ...] = field(default=(32, 64), metadata=spec(low=1))
    # Runtime grid (synthetic data of Adult's shape: its one-hot widths of the
    # active / passive blocks under PAPER_SPLITS).
    runtime_methods: Tuple[str, ...] = field(default=RUNTIME_METHODS, metadata=spec(choices=RUNTIME_METHODS))
    runtime_features: Tuple[int, ...] = field(default=(35, 73), metadata=spec(low=1, non_empty=True))
    runtime_sizes: Tuple[int, ...] = field(default=(10000, 20000, 50000, 100000), metadata=spec(low=2))
    runtime_epochs: Tuple[int, ...] = field(default=(1, 2, 5, 10), metadata=spec(low=1))
    runtime_epochs_n: int = field(default=10000, metadata=spec(low=2))
    runtime_batch_size: int = field(default=3200, metadata=spec(low=1))
    # HE runtime cells: method -> the most batches one cell measures (the rest of
    # its run extrapolated linearly in rows); a method not listed is measured in full.
    runtime_he_batches: Dict[str, int] = field(default_factory=lambda: {"paillier": 14, "paillier_dp": 14},
                                               metadata=spec(keys=HE_METHODS + HE_DP_METHODS, low=1))
    # MPC runtime cells: the same rule in engine steps (an MPC epoch's last batch is padded to a full one).
    # Left out of a table: every MPC cell measured in full.
    runtime_mpc_batches: Optional[Dict[str, int]] = field(default_factory=lambda: {"mpc_cheetah": 8},
                                                          metadata=optional_field(keys=MPC_METHODS, low=1))
    runtime_paillier_3072: bool = True
    # The DP spectrum (spectrum.py): every DP method at these budgets, each method's configuration
    # selected per (epsilon, delta) by CV on the other datasets of the run.
    spectrum_epsilons: Tuple[float, ...] = field(default=(0.1, 1.0, 10.0),
                                                 metadata=spec(low=0, low_inclusive=False))
    spectrum_deltas: Tuple[float, ...] = field(default=(1e-5, 0.01),
                                               metadata=spec(low=0, low_inclusive=False, high=0.5, non_empty=True))
    # The central-DP ceiling's candidates (CentralDPLogisticRegression on the joined features).
    # DP-SGD: sampling rates x epochs x learning rates, heavy-ball momentum central_sgd_momentum.
    central_sgd_sampling_rates: Tuple[float, ...] = field(default=(0.01, 0.0625),
                                                          metadata=spec(low=0, low_inclusive=False, high=1))
    central_sgd_epochs: Tuple[int, ...] = field(default=(5, 15), metadata=spec(low=1))
    central_sgd_lr: Tuple[float, ...] = field(default=(0.5, 2.0), metadata=spec(low=0, low_inclusive=False))
    central_sgd_momentum: float = field(default=0.9, metadata=spec(low=0, high=0.99))
    # Output perturbation: lam = scale * 50 / (n epsilon) (the estimator's default is scale 1).
    central_output_lam_scales: Tuple[float, ...] = field(default=(0.3, 1.0, 3.0),
                                                         metadata=spec(low=0, low_inclusive=False))
    # Objective perturbation: lam (a value below the theorem's minimum at a dataset's n is not a candidate there).
    central_objective_lams: Tuple[float, ...] = field(default=(1e-5, 1e-4, 1e-3),
                                                      metadata=spec(low=0, low_inclusive=False))
    # HE-VFL with a DP model: its grid (taylor_dp, the same flow in the clear, is CV'd and run on every
    # split; paillier_dp / ckks_dp for real on he_dp_accuracy's datasets at he_dp_accuracy_epsilons).
    he_dp_batch_sizes: Tuple[int, ...] = field(default=(1024, 3200), metadata=spec(low=1))
    he_dp_epochs: Tuple[int, ...] = field(default=(2, 5, 10), metadata=spec(low=1))
    he_dp_k: Tuple[float, ...] = field(default=(2.0, 3.0, 5.0), metadata=spec(low=0, low_inclusive=False))
    he_dp_accuracy: Dict[str, Tuple[str, ...]] = field(
        default_factory=lambda: {"paillier_dp": ("breast", "adult"), "ckks_dp": ("breast", "adult")},
        metadata=spec(keys=HE_DP_METHODS))
    he_dp_accuracy_epsilons: Dict[str, Tuple[float, ...]] = field(
        default_factory=lambda: {"paillier_dp": (1.0,), "ckks_dp": (0.1, 1.0, 10.0)},
        metadata=spec(keys=HE_DP_METHODS, low=0, low_inclusive=False))
    # MPC+DP (protection "mpc_dp": the ceiling's DP-SGD on secret shares) at the ceiling's best-ranked DP-SGD
    # candidate: method -> datasets, method -> epsilons (every spectrum delta, first he_split_seeds splits, one
    # noise draw). Left out of a table (a copy of glm.toml from before these rows): none.
    mpc_dp_accuracy: Optional[Dict[str, Tuple[str, ...]]] = field(
        default_factory=lambda: {"mpc_dp_semi2k": tuple[str, ...](("breast", "credit", "adult"))},
        metadata=optional_field(keys=MPC_DP_METHODS))
    mpc_dp_accuracy_epsilons: Optional[Dict[str, Tuple[float, ...]]] = field(
        default_factory=lambda: {"mpc_dp_semi2k": tuple[float, ...]((1.0,))},
        metadata=optional_field(keys=MPC_DP_METHODS, low=0, low_inclusive=False))
    # The independent library (Opacus DP-SGD) beside the ceiling at these budgets (first spectrum delta).
    opacus_epsilons: Tuple[float, ...] = field(default=(1.0,), metadata=spec(low=0, low_inclusive=False))
    quick: bool = False

    @property
    def classic_epsilons(self) -> Tuple[float, ...]:
        """The classic calibration (Dwork-Roth Thm A.1) is an (epsilon, delta)
        guarantee only for epsilon < 1; it is not run elsewhere."""
        return tuple(e for e in self.epsilons if e < 1.0)

    @property
    def wide_grid(self) -> Tuple[HyperParams, ...]:
        """The wide grid: k up to 10 and b in {256, 1024, 3200}; e over the paper's range."""
        return _grid(self.learning_rate, self.grid_batch_sizes, self.grid_epochs, self.grid_k)

    @property
    def plain_grid(self) -> Tuple[HyperParams, ...]:
        """The wide grid plus the small batches of the non-private references."""
        return self.wide_grid + _grid(self.learning_rate, self.plain_extra_batch_sizes, self.grid_epochs,
                                      self.grid_k)

    @property
    def paper_grid(self) -> Tuple[HyperParams, ...]:
        """The paper's tuning grid (b = 3200, k <= 1): a subset of the wide grid."""
        grid = PAPER.tuning_grid
        return tuple(h for h in self.wide_grid if h.batch_size in grid.batch_sizes and h.k <= grid.max_k)

    @property
    def figure2_grid(self) -> Tuple[HyperParams, ...]:
        """The paper's Figure 2 (Breast, epsilon = 1): e and k each over three values."""
        fig = PAPER.figure2
        return tuple(HyperParams(self.learning_rate, e, fig.batch_size, k) for e in fig.epochs for k in fig.k)

    def he_accuracy_methods(self, dataset: str) -> Tuple[str, ...]:
        """The HE methods with accuracy cells on ``dataset`` (in ``he_accuracy``'s order)."""
        return tuple(m for m, names in self.he_accuracy.items() if dataset in names)

    def he_methods(self) -> Tuple[str, ...]:
        """Every HE scheme the run trains (accuracy or runtime cells, with or without DP): their
        libraries must import."""
        used = {m for m, names in self.he_accuracy.items() if set(names) & set(self.datasets)}
        used |= {m[:-3] for m, names in self.he_dp_accuracy.items() if set(names) & set(self.datasets)}
        used |= {m.replace("_dp", "") for m in self.runtime_methods} & set(HE_METHODS)
        return tuple(m for m in HE_METHODS if m in used)

    def mpc_accuracy_methods(self, dataset: str) -> Tuple[str, ...]:
        """The MPC methods with accuracy cells on ``dataset`` (in ``mpc_accuracy``'s order)."""
        return tuple(m for m, names in (self.mpc_accuracy or {}).items() if dataset in names)

    def mpc_methods(self) -> Tuple[str, ...]:
        """Every MPC method the run trains (accuracy or runtime cells): they need the ``mpc`` extra."""
        used = {m for m, names in (self.mpc_accuracy or {}).items() if set(names) & set(self.datasets)}
        used |= set(self.runtime_methods) & set(MPC_METHODS)
        return tuple(m for m in MPC_METHODS if m in used)

    def he_dp_accuracy_methods(self, dataset: str) -> Tuple[str, ...]:
        """The HE+DP methods with accuracy cells on ``dataset`` (in ``he_dp_accuracy``'s order)."""
        return tuple(m for m, names in self.he_dp_accuracy.items() if dataset in names)

    def mpc_dp_accuracy_methods(self, dataset: str, epsilon: float) -> Tuple[str, ...]:
        """The MPC+DP methods with a spectrum cell on ``dataset`` at ``epsilon`` (in ``mpc_dp_accuracy``'s
        order)."""
        return tuple(m for m, names in (self.mpc_dp_accuracy or {}).items()
                     if dataset in names and epsilon in (self.mpc_dp_accuracy_epsilons or {}).get(m, ()))

    @property
    def spectrum_budgets(self) -> Tuple[Tuple[float, float], ...]:
        """Every (epsilon, delta) of the DP spectrum, delta-major."""
        return tuple((float(e), float(d)) for d in self.spectrum_deltas for e in self.spectrum_epsilons)

    @classmethod
    def quick_run(cls, **overrides: Any) -> "GLMBenchConfig":
        """The ``[quick]`` variant of the shipped ``glm.toml`` with ``overrides``."""
        return replace(load_config(quick=True), **overrides)

    def as_dict(self) -> Dict[str, Any]:
        out = asdict(self)
        out["classic_epsilons"] = list(self.classic_epsilons)
        out["headline_grid"] = "wide"
        out["lam"], out["delta"], out["lr"] = LAM, DELTA, self.learning_rate
        return out


def load_config(quick: bool, path: Optional[Path] = None) -> GLMBenchConfig:
    """``[quick]`` or ``[full]`` of the shipped ``glm.toml`` or of the user's copy ``path``."""
    return load_variant(GLMBenchConfig, "glm", "quick" if quick else "full", path)


# The shipped full run's grids (the tests and other modules read them as constants).
WIDE_GRID: Tuple[HyperParams, ...] = GLMBenchConfig().wide_grid
PLAIN_GRID: Tuple[HyperParams, ...] = GLMBenchConfig().plain_grid
PAPER_GRID: Tuple[HyperParams, ...] = GLMBenchConfig().paper_grid
FIGURE2_GRID: Tuple[HyperParams, ...] = GLMBenchConfig().figure2_grid


def cell_seed(base: Optional[int], *parts: Any) -> Optional[int]:
    """A reproducible 63-bit seed for one cell from the run's base seed and
    the cell's coordinates (strings are hashed stably); None stays None
    (OS-entropy noise)."""
    if base is None:
        return None
    words = [int(base)]
    for part in parts:
        if isinstance(part, str):
            words.extend(part.encode())
        elif isinstance(part, float):
            words.append(int(round(part * 1e6)))
        else:
            words.append(int(part))
    state = np.random.SeedSequence(words).generate_state(1, np.uint64)
    return int(state[0]) & ((1 << 63) - 1)


class GLMExperiment(Experiment):
    """Vertical logistic regression with every protection on the same splits: accuracy
    against epsilon beside every reference, the paper's Figure 2, runtime and bytes."""

    name = "glm"
    quick_help = ("the [quick] grid: built-in Breast data, 2 splits x 2 noise draws, Paillier, CKKS and MPC (semi2k, "
                  "with the mpc extra) on one split, a small runtime grid, the DP spectrum at one delta with MPC+DP "
                  "(semi2k) at epsilon 1 (about two minutes on 2 cores)")
    versions = ("numpy", "scikit-learn", "phe", "gmpy2", "tenseal", "dp-accounting", "spu")
    seed_key = "seed"
    overrides = (
        Override("--datasets", "datasets", comma_list(str),
                 "comma-separated dataset names (shipped: breast,credit,adult; --quick: breast), a registered name "
                 "(vflsec.data.register_dataset) or csv:PATH / parquet:PATH[#label=COLUMN]", metavar="NAMES"),
        Override("--split-seeds", "split_seeds", int, "train/test splits per dataset", metavar="K"),
        Override("--noise-draws", "noise_draws", int, "noise draws per DP cell", metavar="K"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                            help="folder with the real datasets (default: $VFLSEC_DATA)")
        parser.add_argument("--os-entropy", action="store_true",
                            help="draw DP noise from the OS-entropy CSPRNG instead of seeded generators (the "
                                 "configuration's seed becomes none; numbers then vary run to run)")
        parser.add_argument("--network-results", type=Path, default=None, metavar="FILE",
                            help="results.json of a `vflsec bench network --links` run: the runtime verdicts cite "
                                 "its ratios over emulated links (also with --rerender)")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> GLMBenchConfig:
        grid = load_config(quick, path)
        if options.get("os_entropy"):
            if options.get("seed") is not None:
                raise BenchConfigError("--seed and --os-entropy exclude each other -- give one of them")
            grid = with_overrides(grid, "--os-entropy", seed=None)
        return grid

    def check(self, grid: GLMBenchConfig, options: Dict[str, Any]) -> None:
        """Every dataset (of the run and of ``he_accuracy``, ``he_dp_accuracy``, ``mpc_accuracy``,
        ``mpc_dp_accuracy``) is
        known, the run's load, the libraries of every HE method it trains import and every MPC runtime
        method runs between the runtime grid's parties: before any cell runs."""
        from ....data import dataset_names, is_dataset_name, load_dataset
        from ....errors import missing_dataset, require_extra

        tables = (("he_accuracy", grid.he_accuracy), ("he_dp_accuracy", grid.he_dp_accuracy),
                  ("mpc_accuracy", grid.mpc_accuracy or {}), ("mpc_dp_accuracy", grid.mpc_dp_accuracy or {}))
        for key, table in (("datasets", {"": grid.datasets}),) + tables:
            for method, names in table.items():
                for name in names:
                    if not is_dataset_name(name):
                        where = f" (named in {key}.{method})" if method else ""
                        raise BenchConfigError(f"unknown dataset {name!r} -- choose from {', '.join(dataset_names())}, "
                                               f"csv:PATH or parquet:PATH (a table with a label column){where}")
        self._check_mpc_parties(grid)
        for name in grid.datasets:
            try:
                load_dataset(name, data_dir=options.get("data_dir"))
            except (FileNotFoundError, ValueError) as exc:
                if ":" in name:  # the user's own table: its error names the file, row, column and the fix
                    raise BenchConfigError(str(exc)) from None
                if isinstance(exc, FileNotFoundError):
                    raise missing_dataset(exc) from None
                raise
        methods = grid.he_methods()
        if "paillier" in methods:
            require_extra("phe", "gmpy2")
        if "ckks" in methods:
            require_extra("tenseal")

    @staticmethod
    def _check_mpc_parties(grid: GLMBenchConfig) -> None:
        """An MPC runtime method's engine protocol runs between as many parties as the runtime grid has
        blocks (cheetah: exactly two). SPU itself is not needed here: without it the MPC cells are
        labelled "not run" (:mod:`.mpc_cells`)."""
        from ....mpc.engine import MPC_PROTOCOLS
        from .mpc_cells import engine_protocol

        parties = len(grid.runtime_features)
        for method in sorted(set(grid.runtime_methods) & set(MPC_METHODS)):
            protocol = MPC_PROTOCOLS[engine_protocol(method)]
            if not protocol.fits(parties):
                count = (f"exactly {protocol.min_parties}" if protocol.max_parties == protocol.min_parties
                         else f"at least {protocol.min_parties}")
                raise BenchConfigError(f"runtime_methods: {method} runs between {count} parties, runtime_features "
                                       f"has {parties} blocks -- give {count} blocks or leave {method} out")

    def annotate(self, result: Dict[str, Any], options: Dict[str, Any]) -> None:
        """``--network-results``: the link stage the runtime verdicts cite. With ``--rerender`` the
        citation is also written into the folder's results file, so later rerenders keep it."""
        path = options.get("network_results")
        if path is None:
            return
        from .verdicts import network_citation

        result["network_links"] = network_citation(read_network_results(Path(path)), str(path))
        if options.get("rerender") is not None:
            from ...runner import write_results

            write_results(Path(options["rerender"]) / self.results_file, result)

    def run_cells(self, grid: GLMBenchConfig, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        run_cells(grid, result, data_dir=options.get("data_dir"))

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


def read_network_results(path: Path) -> Dict[str, Any]:
    """The results of a ``vflsec bench network --links`` run; a one-line error when it is not one."""
    import json

    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BenchConfigError(f"--network-results {path}: cannot read it ({exc}) -- give the results.json of a "
                               "vflsec bench network --links run") from None
    if not isinstance(payload, dict) or not payload.get("links"):
        raise BenchConfigError(f"--network-results {path} has no link stage -- run vflsec bench network --links "
                               "... first")
    return payload


EXPERIMENT = GLMExperiment()
