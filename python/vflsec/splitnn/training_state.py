"""A split-learning party's training state as named arrays (for checkpoints).

:func:`training_state` flattens a party's torch modules and its optimizer's
per-parameter slots (Adam's step count and moments; plain SGD has none) into
``{"bottom.<param>", "head.<param>", "optimizer.<index>.<slot>": array}``,
which :class:`vflsec.federation.checkpoint.EpochCheckpoint` stores without
pickle; :func:`restore_training_state` loads them back into freshly built
modules and optimizer. A defense with state of its own is not covered: it
declares a ``resume_refusal`` instead.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from .._torch import require_torch

__all__ = ["restore_training_state", "training_state"]

_OPTIMIZER = "optimizer"


def training_state(modules: Mapping[str, Any], optimizer: Optional[Any] = None) -> Dict[str, np.ndarray]:
    """``{prefix.param: array}`` for each non-None module (prefix = its key
    in ``modules``), plus the optimizer's per-parameter state."""
    torch = require_torch("split learning")
    out: Dict[str, np.ndarray] = {}
    for prefix, module in modules.items():
        if module is not None:
            for key, value in module.state_dict().items():
                out[f"{prefix}.{key}"] = value.detach().cpu().numpy()
    if optimizer is not None:
        for index, slots in optimizer.state_dict()["state"].items():
            for slot, value in slots.items():
                out[f"{_OPTIMIZER}.{index}.{slot}"] = torch.as_tensor(value).detach().cpu().numpy()
    return out


def restore_training_state(state: Mapping[str, np.ndarray], modules: Mapping[str, Any],
                           optimizer: Optional[Any] = None) -> None:
    """Load ``state`` (from :func:`training_state`) into ``modules`` (strict:
    every parameter and no other) and ``optimizer``."""
    torch = require_torch("split learning")
    for prefix, module in modules.items():
        if module is None:
            continue
        start = len(prefix) + 1
        own = {key[start:]: torch.from_numpy(np.array(value)) for key, value in state.items()
               if key.startswith(prefix + ".")}
        try:
            module.load_state_dict(own)
        except RuntimeError as exc:
            raise ValueError(f"checkpointed {prefix} does not fit this party's model: {exc}") from None
    if optimizer is not None:
        slots: Dict[int, Dict[str, Any]] = {}
        for key, value in state.items():
            if key.startswith(_OPTIMIZER + "."):
                _, index, slot = key.split(".", 2)
                slots.setdefault(int(index), {})[slot] = torch.from_numpy(np.array(value))
        saved = optimizer.state_dict()
        saved["state"] = slots
        optimizer.load_state_dict(saved)
