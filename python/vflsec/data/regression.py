"""Regression datasets of the DP-VFL experiments: Energy efficiency and
California housing, read from files (the shared datasets folder layout, or a
flat folder, found in ``data_dir`` or ``$VFLSEC_DATA`` as for
:mod:`.loaders`), plus scikit-learn's bundled diabetes data as an offline
fallback that needs no files.

``y`` is float64 (``Dataset.task == "regression"``); features are raw
(scale them per party, with training statistics only).
"""
from __future__ import annotations

import csv
import io
from typing import Any, List

import numpy as np

from .dataset import Dataset, _find_file, _one_column_attributes, _read_text

__all__ = ["ENERGY_TARGETS", "REGRESSION_DATASETS", "load_california_housing", "load_diabetes", "load_energy",
           "load_regression_dataset"]

ENERGY_TARGETS = ("heating", "cooling")
REGRESSION_DATASETS = ("energy", "california_housing", "diabetes")
_ENERGY_FEATURES = ("relacomp", "surf", "wall", "roof", "height", "orient", "glazarea", "glazdist")
_ENERGY_COLUMNS = {"heating": "heatload", "cooling": "coolload"}
_CAL_FEATURES = ("MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude", "Longitude")


def _numeric_rows(path: Any, text: str, n_fields: int, *, skip_header: bool) -> np.ndarray:
    reader = csv.reader(io.StringIO(text))
    rows: List[List[float]] = []
    for lineno, row in enumerate(reader, start=1):
        if skip_header and lineno == 1:
            continue
        if not row or all(not v.strip() for v in row):
            continue
        if len(row) != n_fields:
            raise ValueError(f"{path}:{lineno}: expected {n_fields} fields, got {len(row)}")
        try:
            rows.append([float(v) for v in row])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: non-numeric value") from None
    table = np.asarray(rows, dtype=np.float64).reshape(-1, n_fields)
    if not np.all(np.isfinite(table)):
        raise ValueError(f"{path}: non-finite values")
    return table


def load_energy(*, data_dir: Any = None, target: str = "heating") -> Dataset:
    """UCI Energy efficiency (Tsanas & Xifara 2012): 768 buildings, 8 features.

    ``target``: ``"heating"`` (Y1, heating load, default) or ``"cooling"``
    (Y2). The DP-VFL paper treats the two as a multi-output problem; vflsec's
    split-learning regressor has one output, so each target is its own task.
    """
    if target not in ENERGY_TARGETS:
        raise ValueError(f"target must be one of {ENERGY_TARGETS}, got {target!r}")
    path = _find_file("energy", "energy_efficiency", "ENB2012_data.csv", data_dir)
    text = _read_text(path)
    header = [h.strip() for h in next(csv.reader(io.StringIO(text)), [])]
    expected = list(_ENERGY_FEATURES) + ["heatload", "coolload"]
    if header != expected:
        raise ValueError(f"{path}: header must be {','.join(expected)}, got {','.join(header)}")
    table = _numeric_rows(path, text, len(expected), skip_header=True)
    y = table[:, expected.index(_ENERGY_COLUMNS[target])]
    return Dataset(X=np.ascontiguousarray(table[:, :8]), y=np.ascontiguousarray(y), feature_names=_ENERGY_FEATURES,
                   attributes=_one_column_attributes(_ENERGY_FEATURES), name=f"energy_{target}", task="regression")


def load_california_housing(*, data_dir: Any = None) -> Dataset:
    """California housing (Pace & Barry 1997), 20,640 block groups, in
    scikit-learn's 8-feature form derived from StatLib's ``cal_housing.data``
    (MedInc, HouseAge, AveRooms = rooms/households, AveBedrms,
    Population, AveOccup = population/households, Latitude, Longitude);
    ``y`` = median house value / 100,000."""
    path = _find_file("california_housing", "california_housing", "cal_housing.data", data_dir)
    t = _numeric_rows(path, _read_text(path), 9, skip_header=False)
    lon, lat, age, rooms, bedrooms, population, households, income, value = t.T
    if np.any(households <= 0):
        raise ValueError(f"{path}: households must be positive")
    X = np.column_stack([income, age, rooms / households, bedrooms / households, population,
                         population / households, lat, lon])
    return Dataset(X=np.ascontiguousarray(X), y=value / 100_000.0, feature_names=_CAL_FEATURES,
                   attributes=_one_column_attributes(_CAL_FEATURES), name="california_housing", task="regression")


def load_diabetes() -> Dataset:
    """scikit-learn's bundled diabetes data (442 x 10), the offline fallback."""
    from sklearn.datasets import load_diabetes as _sk

    d = _sk()
    names = tuple(d.feature_names)
    return Dataset(X=np.ascontiguousarray(d.data, dtype=np.float64), y=np.asarray(d.target, dtype=np.float64),
                   feature_names=names, attributes=_one_column_attributes(names), name="diabetes",
                   task="regression")


def load_regression_dataset(name: str, *, data_dir: Any = None, **kw: Any) -> Dataset:
    """``"energy"`` (``target=``), ``"california_housing"`` or ``"diabetes"``."""
    if name == "energy":
        return load_energy(data_dir=data_dir, **kw)
    if name == "california_housing":
        return load_california_housing(data_dir=data_dir, **kw)
    if name == "diabetes":
        return load_diabetes(**kw)
    raise ValueError(f"unknown regression dataset {name!r}; valid names: {', '.join(REGRESSION_DATASETS)}")
