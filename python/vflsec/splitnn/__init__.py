"""Split-learning VFL on torch.

* :mod:`.job` / :mod:`.trainer` -- the public job, the party programs and an
  in-process runner (one thread per party over a message channel).
* :mod:`.estimator` -- :class:`SplitNNClassifier`, :class:`SplitNNRegressor`.
* :mod:`.models` -- bottom and head factories (MLP, the DP-VFL split MLP, a 2-layer CNN).
* :mod:`.defenses` -- the defense hook contract, VFL-AFE, DP-SGD VFL, FedPass
  and simple baselines, looked up by name in the defense registry
  (:func:`make_defense`, :func:`get_defense`, :func:`register_defense`).
* :mod:`.persistence` -- the files of ``model.save(path)`` / ``SplitNNClassifier.load(path)``
  (one ``.npz``: weights and a JSON header) and ``defense.save(path)`` / ``Defense.load(path)``
  (one JSON document): no pickle, no noise generator or seed.

torch is imported lazily: importing this package does not import torch.
"""
from .defenses import (
    DPSGD,
    VFLAFE,
    Defense,
    DefenseContext,
    FedPass,
    GaussianEmbeddingNoise,
    GaussianGradientNoise,
    GradientSparsification,
    NoDefense,
    available_defenses,
    get_defense,
    make_defense,
    register_defense,
)
from .estimator import SplitNNClassifier, SplitNNRegressor
from .job import TAG_EMBEDDING, TAG_GRADIENT, SplitJob, SplitPartyData, SplitPartyResult
from .trainer import run_split_job

__all__ = [
    "DPSGD",
    "Defense",
    "FedPass",
    "DefenseContext",
    "GaussianEmbeddingNoise",
    "GaussianGradientNoise",
    "GradientSparsification",
    "NoDefense",
    "SplitJob",
    "SplitNNClassifier",
    "SplitNNRegressor",
    "SplitPartyData",
    "SplitPartyResult",
    "TAG_EMBEDDING",
    "TAG_GRADIENT",
    "VFLAFE",
    "available_defenses",
    "get_defense",
    "make_defense",
    "register_defense",
    "run_split_job",
]
