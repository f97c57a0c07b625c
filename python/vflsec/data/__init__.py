"""Datasets for the vertical-GLM experiments and their vertical partition.

* :mod:`.loaders` -- Breast (scikit-learn), Adult, Credit (files), synthetic;
  ``load_dataset`` by name, ``register_dataset`` for more names.
* :mod:`.tables` -- a party's own CSV/Parquet file (``read_table``) and the
  in-process alignment of several parties' tables by ID (``align``).
* :mod:`.table_dataset` -- a table file as a dataset: ``"csv:PATH"`` names.
* :mod:`.partition` -- train/test and party split with per-party scaling to
  ``||x_i^P|| <= 1`` (the scaling itself in :mod:`.scaling`).
* :mod:`.preprocess` -- ``PartyPreprocessor``: one party's own table (types,
  missing values, categories, dates) to scaled rows, saved as JSON; a
  categorical column of too many distinct values is refused with a
  ``HighCardinalityError`` unless declared (:mod:`._cardinality`).
"""
from typing import TYPE_CHECKING

from ._cardinality import HighCardinalityError
from .loaders import (
    DATASETS,
    Dataset,
    dataset_names,
    is_dataset_name,
    load_adult,
    load_breast,
    load_credit,
    load_dataset,
    make_synthetic,
    register_dataset,
)
from .partition import PAPER_SPLITS, PAPER_SPLITS_AS_PUBLISHED, SCALINGS, VerticalSplit, vertical_split
from .tables import Alignment, PartyTable, TableError, align, read_table, table_columns

if TYPE_CHECKING:  # imported on first use (__getattr__ below); seen here by type checkers and the API reference
    from .preprocess import PartyPreprocessor

__all__ = [
    "DATASETS",
    "Alignment",
    "Dataset",
    "HighCardinalityError",
    "PAPER_SPLITS",
    "PAPER_SPLITS_AS_PUBLISHED",
    "PartyPreprocessor",
    "PartyTable",
    "SCALINGS",
    "TableError",
    "VerticalSplit",
    "align",
    "dataset_names",
    "is_dataset_name",
    "load_adult",
    "load_breast",
    "load_credit",
    "load_dataset",
    "make_synthetic",
    "read_table",
    "register_dataset",
    "table_columns",
    "vertical_split",
]


def __getattr__(name: str):
    # PartyPreprocessor is a scikit-learn estimator (about a second to import);
    # reading tables or splitting datasets should not pay for it.
    if name == "PartyPreprocessor":
        from .preprocess import PartyPreprocessor

        return PartyPreprocessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
