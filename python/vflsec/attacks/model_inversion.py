"""Feature inference by the active party from a passive party's embeddings.

Threat model: the attacker is the honest-but-curious **active party**. It
receives the embeddings ``h = f(x)`` a passive party sends (after that
party's defense) and wants the passive features ``x``.

* :func:`blackbox_model_inversion` (He et al. 2019, as evaluated by VFL-AFE
  and FedPass): the attacker holds auxiliary samples ``X_aux`` from the
  passive party's feature space and their embeddings as the passive party
  would send them (VFL-AFE: "can query the victim's f"); it trains a decoder
  ``f^-1`` minimizing ``||f^-1(h_aux) - X_aux||^2`` and applies it to the
  target embeddings. Needs: auxiliary inputs + their embeddings; no model.
* :func:`whitebox_model_inversion` (the model-inversion step of CAFE,
  Jin et al. 2021; FedPass Sec. 3.4): the attacker knows the passive bottom
  model's parameters (a released model) and optimizes inputs so that
  ``f(x_hat)`` reproduces the observed embeddings, with a total-variation
  prior for images (FedPass uses weight 0.1). Needs: the released bottom
  model and the observed embeddings; no auxiliary data (an optional start
  point, e.g. the auxiliary mean).

Both return reconstructions shaped like the passive inputs; score them with
:func:`vflsec.attacks.metrics.feature_mse`.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .._arrays import as_float_array, check_positive_int, check_real
from .._torch import require_torch

__all__ = ["blackbox_model_inversion", "query_embeddings", "total_variation", "whitebox_model_inversion"]


def _check_bounds(bounds: Optional[Tuple[float, float]]) -> Optional[Tuple[float, float]]:
    if bounds is None:
        return None
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise TypeError("bounds must be a (low, high) pair or None")
    low = check_real(bounds[0], "bounds[0]")
    high = check_real(bounds[1], "bounds[1]")
    if not low < high:
        raise ValueError(f"bounds must have low < high, got {bounds}")
    return low, high


def query_embeddings(bottom_model: Any, X: Any, *, batch_size: int = 512) -> np.ndarray:
    """``f(X)`` from a bottom model in eval mode, without gradients (float32).
    What an attacker with query access to ``f`` obtains for its own rows."""
    torch = require_torch("this attack")
    if not isinstance(bottom_model, torch.nn.Module):
        raise TypeError(f"bottom_model must be a torch.nn.Module, got {type(bottom_model).__name__}")
    arr, _ = as_float_array(X, "X", dtype=np.float32)
    batch_size = check_positive_int(batch_size, "batch_size")
    was_training = bottom_model.training
    bottom_model.eval()
    try:
        with torch.no_grad():
            out = [bottom_model(torch.from_numpy(arr[i:i + batch_size])).reshape(min(batch_size, arr.shape[0] - i), -1)
                   for i in range(0, arr.shape[0], batch_size)]
    finally:
        bottom_model.train(was_training)
    return np.ascontiguousarray(torch.cat(out).numpy())


def blackbox_model_inversion(
    aux_inputs: Any,
    aux_embeddings: Any,
    target_embeddings: Any,
    *,
    hidden: Sequence[int] = (256, 256),
    epochs: int = 200,
    batch_size: int = 64,
    lr: float = 1e-3,
    bounds: Optional[Tuple[float, float]] = None,
    seed: int = 0,
) -> np.ndarray:
    """Train a decoder embeddings -> inputs on ``(aux_embeddings, aux_inputs)``
    and return its reconstruction of ``target_embeddings`` (float64, rows
    shaped like ``aux_inputs`` rows).

    ``bounds`` (e.g. ``(0, 1)`` for images) squashes the decoder output into
    that box with a sigmoid; None leaves it linear."""
    torch = require_torch("this attack")
    Xa, _ = as_float_array(aux_inputs, "aux_inputs", dtype=np.float32)
    Ha, _ = as_float_array(aux_embeddings, "aux_embeddings", dtype=np.float32)
    Ht, _ = as_float_array(target_embeddings, "target_embeddings", dtype=np.float32)
    if Xa.ndim < 2:
        raise ValueError(f"aux_inputs must have one row per sample (ndim >= 2), got shape {Xa.shape}")
    Ha = Ha.reshape(Ha.shape[0], -1) if Ha.ndim > 1 else Ha[:, None]
    Ht = Ht.reshape(Ht.shape[0], -1) if Ht.ndim > 1 else Ht[:, None]
    if Ha.shape[0] != Xa.shape[0]:
        raise ValueError(f"aux_embeddings has {Ha.shape[0]} rows but aux_inputs has {Xa.shape[0]}")
    if Ha.shape[1] != Ht.shape[1]:
        raise ValueError(f"aux_embeddings have width {Ha.shape[1]} but target_embeddings {Ht.shape[1]}")
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    lr = check_real(lr, "lr", low=0.0, low_inclusive=False)
    box = _check_bounds(bounds)

    torch.manual_seed(seed)
    out_dim = int(np.prod(Xa.shape[1:]))
    layers, prev = [], Ha.shape[1]
    for h in hidden:
        layers += [torch.nn.Linear(prev, int(h)), torch.nn.ReLU()]
        prev = int(h)
    decoder = torch.nn.Sequential(*layers, torch.nn.Linear(prev, out_dim))

    def decode(h):
        z = decoder(h)
        return z if box is None else box[0] + (box[1] - box[0]) * torch.sigmoid(z)

    # Standardize the decoder input with auxiliary statistics (the attacker's own data).
    h_mean = Ha.mean(axis=0)
    h_std = Ha.std(axis=0) + 1e-6
    ha = torch.from_numpy((Ha - h_mean) / h_std)
    xa = torch.from_numpy(Xa.reshape(Xa.shape[0], -1))
    opt = torch.optim.Adam(decoder.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    n = ha.shape[0]
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            opt.zero_grad()
            loss = torch.mean((decode(ha[idx]) - xa[idx]) ** 2)
            loss.backward()
            opt.step()
    decoder.eval()
    with torch.no_grad():
        rec = decode(torch.from_numpy((Ht - h_mean) / h_std)).numpy()
    return np.ascontiguousarray(rec.reshape((Ht.shape[0],) + Xa.shape[1:]), dtype=np.float64)


def total_variation(images: Any) -> Any:
    """Anisotropic total variation per image, ``sum |dx| + |dy|`` over the
    last two axes of a torch tensor (N, ..., H, W); returns shape (N,)."""
    dx = (images[..., :, 1:] - images[..., :, :-1]).abs()
    dy = (images[..., 1:, :] - images[..., :-1, :]).abs()
    return dx.flatten(1).sum(1) + dy.flatten(1).sum(1)


def whitebox_model_inversion(
    bottom_model: Any,
    target_embeddings: Any,
    input_shape: Sequence[int],
    *,
    tv_weight: float = 0.0,
    image_shape: Optional[Sequence[int]] = None,
    steps: int = 500,
    lr: float = 0.05,
    bounds: Optional[Tuple[float, float]] = None,
    init: Any = None,
    optimizer: str = "adam",
    seed: int = 0,
) -> np.ndarray:
    """Optimize ``x_hat`` so that ``bottom_model(x_hat)`` matches the observed
    embeddings (mean squared error per sample) plus ``tv_weight`` times the
    total variation of ``x_hat`` viewed as images of ``image_shape``
    (defaults to ``input_shape``; TV needs at least 2 dimensions).

    ``input_shape`` is the shape of one passive input row. ``init`` (one row,
    e.g. the auxiliary mean, or one row per target) is the start point;
    default small random values. ``optimizer``: "adam" (``steps`` steps of
    size ``lr`` with cosine decay; ``bounds`` clamps ``x_hat`` after every
    step) or "lbfgs" (``steps`` L-BFGS iterations with a strong-Wolfe line
    search; much more precise on smooth, well-posed problems; ``bounds`` is
    applied once at the end). The total-variation term is averaged over
    pixels, so ``tv_weight`` is on the scale of the per-element MSE. The
    bottom model is used in eval mode and never updated. Returns
    float64 reconstructions of shape ``(n_targets, *input_shape)``."""
    torch = require_torch("this attack")
    if not isinstance(bottom_model, torch.nn.Module):
        raise TypeError(f"bottom_model must be a torch.nn.Module, got {type(bottom_model).__name__}")
    Ht, _ = as_float_array(target_embeddings, "target_embeddings", dtype=np.float32)
    shape = tuple(check_positive_int(s, "input_shape entry") for s in input_shape)
    tv_weight = check_real(tv_weight, "tv_weight", low=0.0)
    steps = check_positive_int(steps, "steps")
    lr = check_real(lr, "lr", low=0.0, low_inclusive=False)
    box = _check_bounds(bounds)
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    img = shape if image_shape is None else tuple(check_positive_int(s, "image_shape entry") for s in image_shape)
    if tv_weight > 0:
        if len(img) < 2:
            raise ValueError("tv_weight > 0 needs image_shape with at least 2 dimensions (H, W)")
        if int(np.prod(img)) != int(np.prod(shape)):
            raise ValueError(f"image_shape {img} does not hold input_shape {shape}")
    n = Ht.shape[0]
    if init is None:
        x0 = np.random.default_rng(seed).normal(0.0, 0.01, size=(n,) + shape).astype(np.float32)
        if box is not None:
            x0 = np.clip(x0 + (box[0] + box[1]) / 2.0, box[0], box[1]).astype(np.float32)
    else:
        start, _ = as_float_array(init, "init", dtype=np.float32)
        if start.shape == shape:
            x0 = np.broadcast_to(start, (n,) + shape).copy()
        elif start.shape == (n,) + shape:
            x0 = start.copy()
        else:
            raise ValueError(f"init must have shape {shape} or {(n,) + shape}, got {start.shape}")

    target = torch.from_numpy(Ht.reshape(n, -1))
    x = torch.nn.Parameter(torch.from_numpy(x0))
    was_training = bottom_model.training
    flags = [p.requires_grad for p in bottom_model.parameters()]
    bottom_model.eval()
    for p in bottom_model.parameters():
        p.requires_grad_(False)

    def objective():
        out = bottom_model(x).reshape(n, -1)
        if out.shape != target.shape:
            raise ValueError(
                f"bottom_model gives embeddings of width {out.shape[1]}, the targets have {target.shape[1]}"
            )
        per_sample = torch.mean((out - target) ** 2, dim=1)
        if tv_weight > 0:
            per_sample = per_sample + tv_weight * total_variation(x.reshape((n,) + img)) / int(np.prod(img))
        # Summed, so each sample's problem keeps its own scale whatever n is.
        return per_sample.sum()

    try:
        if optimizer == "lbfgs":
            opt = torch.optim.LBFGS([x], lr=1.0, max_iter=steps, history_size=20, line_search_fn="strong_wolfe",
                                    tolerance_grad=1e-12, tolerance_change=1e-15)

            def closure():
                opt.zero_grad()
                loss = objective()
                loss.backward()
                return loss

            opt.step(closure)
            if box is not None:
                with torch.no_grad():
                    x.clamp_(box[0], box[1])
        else:
            opt = torch.optim.Adam([x], lr=lr)
            # Cosine decay: a fixed Adam step keeps x_hat jittering at the scale of lr.
            schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
            for _ in range(steps):
                opt.zero_grad()
                objective().backward()
                opt.step()
                schedule.step()
                if box is not None:
                    with torch.no_grad():
                        x.clamp_(box[0], box[1])
    finally:
        for p, flag in zip(bottom_model.parameters(), flags):
            p.requires_grad_(flag)
        bottom_model.train(was_training)
    return np.ascontiguousarray(x.detach().numpy(), dtype=np.float64)
