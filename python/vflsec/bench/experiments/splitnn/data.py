"""The data of ``vflsec bench splitnn``: Adult and MNIST split between 2 passive
parties (:class:`SplitData`), the DP-VFL / FedPass datasets, and the built-in
fallbacks used when the files are absent (each under its own name, so a report
never shows a fallback as the real dataset)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np

__all__ = ["SplitData", "join_halves", "load_adult_split", "load_mnist_split", "load_or_fallback", "majority_rate"]


@dataclasses.dataclass
class SplitData:
    """A vertically split train/test set: ``parts`` hold the passive parties' blocks."""

    name: str
    train_parts: List[np.ndarray]
    y_train: np.ndarray
    test_parts: List[np.ndarray]
    y_test: np.ndarray
    kind: str  # "tabular" or "image"
    image_shape: Optional[Tuple[int, int]] = None  # full image (H, W) for "image"
    source: str = ""


def _rows(n: int, limit: Optional[int], seed: int) -> np.ndarray:
    if limit is None or n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:limit])


def _standardize(train: np.ndarray, test: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    mean, std = train.mean(axis=0), train.std(axis=0)
    std[std == 0] = 1.0
    return ((train - mean) / std).astype(np.float32), ((test - mean) / std).astype(np.float32)


def load_adult_split(data_dir: Optional[Path], *, max_train: Optional[int], max_test: Optional[int],
                     seed: int = 0) -> SplitData:
    """Adult (adult.data / adult.test), attributes halved between 2 passive parties
    (age..occupation | relationship..native-country), columns standardised on the
    training rows. Falls back to the synthetic logistic data when the files are absent."""
    from ....data import load_dataset, make_synthetic

    try:
        train, test = load_dataset("adult", data_dir=data_dir), load_dataset("adult", data_dir=data_dir, split="test")
        source = "UCI Adult (adult.data train / adult.test test)"
        half = len(train.attributes) // 2
        cut = train.attributes[half][1][0]
    except FileNotFoundError:
        full = make_synthetic(n_samples=20000, features_per_party=(7, 7), seed=seed)
        idx = np.random.default_rng(seed).permutation(full.n_samples)
        train = dataclasses.replace(full, X=full.X[idx[:15000]], y=full.y[idx[:15000]])
        test = dataclasses.replace(full, X=full.X[idx[15000:]], y=full.y[idx[15000:]])
        source, cut = "synthetic fallback (Adult files not found)", 7
    tr, te = _rows(train.n_samples, max_train, seed), _rows(test.n_samples, max_test, seed + 1)
    Xtr, Xte = _standardize(train.X[tr], test.X[te])
    name = "adult" if source.startswith("UCI") else "synthetic"
    return SplitData(name, [Xtr[:, :cut], Xtr[:, cut:]], train.y[tr], [Xte[:, :cut], Xte[:, cut:]], test.y[te],
                     "tabular", source=source)


def load_mnist_split(data_dir: Optional[Path], *, max_train: Optional[int], max_test: Optional[int],
                     seed: int = 0) -> SplitData:
    """MNIST left / right 28 x 14 halves for 2 passive parties; falls back to
    scikit-learn's 8 x 8 digits (halves 8 x 4) when the files are absent."""
    from ....data.mnist import vertical_halves

    try:
        from ....data import load_dataset

        train, test = load_dataset("mnist", data_dir=data_dir), load_dataset("mnist", data_dir=data_dir, split="test")
        Xtr_all, ytr_all, Xte_all, yte_all = train.X, train.y, test.X, test.y
        shape, name, source = (28, 28), "mnist", "MNIST (60,000 train / 10,000 test IDX files)"
    except FileNotFoundError:
        from sklearn.datasets import load_digits

        digits = load_digits()
        idx = np.random.default_rng(seed).permutation(len(digits.target))
        X, y = digits.data / 16.0, digits.target
        Xtr_all, ytr_all, Xte_all, yte_all = X[idx[:1400]], y[idx[:1400]], X[idx[1400:]], y[idx[1400:]]
        shape, name, source = (8, 8), "digits", "scikit-learn digits fallback (MNIST files not found)"
    tr, te = _rows(len(ytr_all), max_train, seed), _rows(len(yte_all), max_test, seed + 1)
    left_tr, right_tr = vertical_halves(Xtr_all[tr].astype(np.float32), shape)
    left_te, right_te = vertical_halves(Xte_all[te].astype(np.float32), shape)
    return SplitData(name, [left_tr, right_tr], ytr_all[tr], [left_te, right_te], yte_all[te], "image",
                     image_shape=shape, source=source)


def join_halves(parts: List[np.ndarray], shape: Tuple[int, int]) -> np.ndarray:
    """The full images (rows of ``H * W``) of the left / right halves ``parts``."""
    h, w = shape
    left = parts[0].reshape(-1, h, w // 2)
    right = parts[1].reshape(-1, h, w - w // 2)
    return np.ascontiguousarray(np.concatenate([left, right], axis=2).reshape(len(parts[0]), h * w))


def _subsample_dataset(ds: Any, max_rows: Optional[int]) -> Any:
    if max_rows is None or ds.X.shape[0] <= max_rows:
        return ds
    idx = np.sort(np.random.default_rng(0).permutation(ds.X.shape[0])[:max_rows])
    return dataclasses.replace(ds, X=ds.X[idx], y=ds.y[idx])


def load_or_fallback(name: str, fallback: str, data_dir: Optional[Path], max_rows: Optional[int]) -> Tuple[str, Any]:
    """(name actually loaded, dataset): the built-in ``fallback`` when the
    file-backed dataset is not available, under its own name."""
    from ....data import load_dataset

    try:
        ds = load_dataset(name, data_dir=data_dir)
    except FileNotFoundError:
        name, ds = fallback, load_dataset(fallback)
    return name, _subsample_dataset(ds, max_rows)


def majority_rate(y: Any) -> float:
    """Test accuracy of always predicting the most frequent test label."""
    _, counts = np.unique(np.asarray(y), return_counts=True)
    return float(counts.max() / counts.sum())
