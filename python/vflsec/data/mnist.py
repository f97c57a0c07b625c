"""MNIST from the original IDX files (``mnist/<name>-idx?-ubyte[.gz]``).

Pixels are scaled to [0, 1] (float64, ``(n, 784)`` row-major 28 x 28); every
pixel is its own attribute, so ``vertical_halves`` (not ``vertical_split``)
is the natural party split: the left and right 28 x 14 halves of each image,
as in the VFL-AFE experiments.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any, Tuple

import numpy as np

from .dataset import Dataset, _find_file

__all__ = ["load_mnist", "vertical_halves"]

_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_idx(path: Path, magic: int) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 8 or int.from_bytes(raw[:4], "big") != magic:
        raise ValueError(f"{path}: not an IDX file with magic {magic:#010x}")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    expected = offset + int(np.prod(dims))
    if len(raw) != expected:
        raise ValueError(f"{path}: expected {expected} bytes for shape {dims}, got {len(raw)}")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def load_mnist(*, data_dir: Any = None, split: str = "train") -> Dataset:
    """MNIST ``split`` "train" (60,000 rows) or "test" (10,000); ``y`` the digit 0-9."""
    if split not in _FILES:
        raise ValueError(f"split must be one of {tuple(_FILES)}, got {split!r}")
    images_name, labels_name = _FILES[split]
    images = _read_idx(_find_file("mnist", "mnist", images_name, data_dir), 0x00000803)
    labels = _read_idx(_find_file("mnist", "mnist", labels_name, data_dir), 0x00000801)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"mnist {split}: {images.shape[0]} images but {labels.shape[0]} labels")
    n, h, w = images.shape
    names = tuple(f"px_{r}_{c}" for r in range(h) for c in range(w))
    return Dataset(
        X=np.ascontiguousarray(images.reshape(n, h * w), dtype=np.float64) / 255.0,
        y=labels.astype(np.int64),
        feature_names=names,
        attributes=tuple((name, (j,)) for j, name in enumerate(names)),
        name="mnist",
        task="multiclass",
    )


def vertical_halves(X: np.ndarray, image_shape: Tuple[int, int] = (28, 28)) -> Tuple[np.ndarray, np.ndarray]:
    """Left and right halves ``(n, H * W/2)`` of row-major images ``(n, H * W)``."""
    h, w = image_shape
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] != h * w:
        raise ValueError(f"X must have shape (n, {h * w}), got {X.shape}")
    images = X.reshape(-1, h, w)
    half = w // 2
    return (np.ascontiguousarray(images[:, :, :half].reshape(len(X), -1)),
            np.ascontiguousarray(images[:, :, half:].reshape(len(X), -1)))
