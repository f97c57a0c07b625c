"""Model factories for split learning: bottom models (one per party) and heads.

Every factory returns a ``torch.nn.Module`` whose parameters are drawn from
torch's global generator, so ``torch.manual_seed`` before building makes the
initialisation reproducible (the estimator does that). Inputs are always 2-D
``(n, features)`` float tensors; image bottoms reshape internally, so every
party's data stays a plain feature matrix.

* :func:`mlp_bottom` -- ReLU MLP, the VFL-AFE bottoms for tabular data.
* :func:`dp_vfl_bottom` / :func:`dp_vfl_head` -- the DP-VFL paper's split MLP
  (hidden 48, 96, 196; the second hidden layer is the cut: each bottom emits
  32 values, so with 3 owners the 96-unit layer is their concatenation; the
  head maps ``32 * owners -> 196 -> outputs``).
* :func:`cnn_bottom` -- two convolution layers for an image slice (the
  vertical halves of MNIST: 28 x 14), flattened and projected.
* :func:`linear_head`, :func:`mlp_head` -- heads on the concatenated embeddings.
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from .._arrays import check_positive_int
from .._torch import require_torch

__all__ = ["cnn_bottom", "dp_vfl_bottom", "dp_vfl_head", "linear_head", "mlp_bottom", "mlp_head"]


def _check_widths(widths: Any, name: str) -> Tuple[int, ...]:
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise TypeError(f"{name} must be a sequence of positive ints")
    return tuple(check_positive_int(w, f"{name}[{i}]") for i, w in enumerate(widths))


def _mlp(in_features: int, hidden: Sequence[int], out_features: int, *, final_activation: bool):
    nn = require_torch("split learning").nn
    layers = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, out_features))
    if final_activation:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def mlp_bottom(in_features: int, hidden: Sequence[int] = (64,), out_features: int = 32, *,
               final_activation: bool = False):
    """``in_features -> hidden... -> out_features`` with ReLU between layers."""
    in_features = check_positive_int(in_features, "in_features")
    out_features = check_positive_int(out_features, "out_features")
    return _mlp(in_features, _check_widths(hidden, "hidden"), out_features, final_activation=final_activation)


def dp_vfl_bottom(in_features: int, out_features: int = 32):
    """DP-VFL bottom: ``in -> 48 -> ReLU -> out_features -> ReLU``. The paper
    (Sec. 5) cuts at the second hidden layer: "the forward output of each
    bottom model will be 32 and the input size of the top model will be 96"
    (3 owners), so the 96-unit layer is the owners' 32-unit outputs side by side."""
    return mlp_bottom(in_features, (48,), out_features, final_activation=True)


def dp_vfl_head(in_features: int, n_outputs: int):
    """DP-VFL top model: ``32 * owners -> 196 -> ReLU -> n_outputs``."""
    return mlp_head(in_features, n_outputs, hidden=(196,))


def linear_head(in_features: int, n_outputs: int):
    """One linear layer (logits for classification, the value for regression)."""
    in_features = check_positive_int(in_features, "in_features")
    n_outputs = check_positive_int(n_outputs, "n_outputs")
    return require_torch("split learning").nn.Linear(in_features, n_outputs)


def mlp_head(in_features: int, n_outputs: int, hidden: Sequence[int] = (64,)):
    """``in -> hidden... -> n_outputs`` with ReLU between layers."""
    in_features = check_positive_int(in_features, "in_features")
    n_outputs = check_positive_int(n_outputs, "n_outputs")
    return _mlp(in_features, _check_widths(hidden, "hidden"), n_outputs, final_activation=False)


def cnn_bottom(image_shape: Tuple[int, int] = (28, 14), out_features: int = 64, *, channels: Tuple[int, int] = (16, 32),
               in_channels: int = 1):
    """Two 5x5 convolutions (padding 2) with ReLU and 2x2 max pooling, flattened
    and projected to ``out_features`` by one linear layer.

    Input: ``(n, in_channels * H * W)`` rows (row-major pixels), reshaped to
    ``(n, in_channels, H, W)`` inside the module.
    """
    nn = require_torch("split learning").nn
    if not (isinstance(image_shape, (tuple, list)) and len(image_shape) == 2):
        raise TypeError(f"image_shape must be a (height, width) pair, got {image_shape!r}")
    h, w = (check_positive_int(v, "image_shape") for v in image_shape)
    if h < 4 or w < 4:
        raise ValueError(f"image_shape must be at least 4 x 4 for two 2x2 poolings, got {image_shape!r}")
    c1, c2 = _check_widths(channels, "channels") if len(channels) == 2 else (None, None)
    if c1 is None:
        raise ValueError(f"channels must hold two ints, got {channels!r}")
    in_channels = check_positive_int(in_channels, "in_channels")
    out_features = check_positive_int(out_features, "out_features")
    flat = c2 * (h // 2 // 2) * (w // 2 // 2)
    return nn.Sequential(
        nn.Unflatten(1, (in_channels, h, w)),
        nn.Conv2d(in_channels, c1, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, out_features),
    )
