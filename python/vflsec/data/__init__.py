"""Datasets for the vertical-GLM experiments and their vertical partition.

* :mod:`.loaders` -- Breast (scikit-learn), Adult, Credit (files), synthetic.
* :mod:`.partition` -- train/test and party split with per-party scaling to
  ``||x_i^P|| <= 1``.
"""
from .loaders import (
    DATASETS,
    Dataset,
    load_adult,
    load_breast,
    load_credit,
    load_dataset,
    make_synthetic,
)
from .partition import PAPER_SPLITS, PAPER_SPLITS_AS_PUBLISHED, SCALINGS, VerticalSplit, vertical_split

__all__ = [
    "DATASETS",
    "Dataset",
    "PAPER_SPLITS",
    "PAPER_SPLITS_AS_PUBLISHED",
    "SCALINGS",
    "VerticalSplit",
    "load_adult",
    "load_breast",
    "load_credit",
    "load_dataset",
    "make_synthetic",
    "vertical_split",
]
