"""The benchmarks ``vflsec bench`` knows, by name, without importing any of them
(model: Opacus ``accountants/registry.py``). A benchmark's package
(``vflsec.bench.experiments.<name>``) is imported only when its command runs,
so ``import vflsec`` and ``vflsec --version`` never load one.

Adding a benchmark: its folder under ``experiments/`` (see :mod:`.experiment`)
and one line here.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Dict, Tuple

from .experiment import Experiment

__all__ = ["EXPERIMENTS", "ExperimentEntry", "load_experiment"]


@dataclass(frozen=True)
class ExperimentEntry:
    summary: str                   # one line for `vflsec bench --help`
    requires: Tuple[str, ...] = ()  # modules whose absence is named before the benchmark is imported


EXPERIMENTS: Dict[str, ExperimentEntry] = {
    "kernels": ExperimentEntry("C++ kernels against numpy, torch, faiss, scikit-fuzzy and OpenDP, in one run."),
    "glm": ExperimentEntry("Vertical GLM benchmark: HDP-VFL differential privacy against Paillier and CKKS."),
    "network": ExperimentEntry("GLM jobs over loopback gRPC (one process per party, mutual TLS) vs in-memory, "
                               "and PSI.", ("grpc", "google.protobuf", "cryptography")),
    "splitnn": ExperimentEntry("Split-learning benchmark: VFL-AFE accuracy per component and time per training "
                               "step.", ("torch", "dp_accounting")),
    "privacy": ExperimentEntry("Privacy benchmark: every defense scored against the attacks it should stop.",
                               ("torch", "dp_accounting")),
    "scale": ExperimentEntry("How big a job fits: time and peak memory against n (estimator, vflsec party, PSI), "
                             "and a Paillier epoch on the local pool vs Ray.", ("grpc", "cryptography")),
    "he": ExperimentEntry("Paillier and CKKS throughput against phe and HEU, and one HE-VFL epoch, in one run.",
                          ("phe", "gmpy2", "tenseal")),
    "trees": ExperimentEntry("Vertical gradient boosting: plain, SecureBoost, DP and label-DP against centralized "
                             "boosting, with the passive party's label attack."),
}


def load_experiment(name: str) -> Experiment:
    """The :class:`Experiment` of ``vflsec bench <name>`` (imports its package)."""
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown benchmark {name!r}; choose from {', '.join(EXPERIMENTS)}")
    module = importlib.import_module(f"vflsec.bench.experiments.{name}")
    experiment = getattr(module, "EXPERIMENT", None)
    if not isinstance(experiment, Experiment) or experiment.name != name:
        raise TypeError(f"vflsec.bench.experiments.{name} must define EXPERIMENT, an Experiment named {name!r}")
    return experiment
