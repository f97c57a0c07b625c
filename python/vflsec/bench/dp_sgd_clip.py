"""The per-sample clip of the benchmarks' DP-SGD cells (``vflsec bench splitnn``'s
DP-VFL section, ``vflsec bench privacy``) as a grid writes it.

A clip entry is either

* a number ``C > 0``: :class:`~vflsec.splitnn.defenses.dp_sgd.DPSGD`'s fixed
  ``clip_norm``, chosen before the run and not read from the data, so the
  run's composed epsilon is a guarantee; or
* a string ``"pNN"`` with ``0 < NN <= 100``: the DP-VFL paper's rule, the
  ``NN``-th percentile of the per-sample gradient norms over the first
  calibration steps (``clip_norm=None, clip_percentile=NN``). That threshold
  reads the gradients it protects, so such a row reports no guarantee; it is
  kept only as a labelled variant.

A row names its clip as ``variant`` (:func:`clip_variant`): ``"clip=1"``,
``"clip=p80"``; the reports label every ``"clip=p..."`` row "no guarantee".
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, Union

__all__ = ["DEFAULT_CLIP_NORM", "CLIP_RULE", "check_clip", "clip_kwargs", "clip_text", "clip_variant",
           "is_percentile_variant"]

# Abadi et al. (2016) and Opacus' usual max_grad_norm for a per-sample loss gradient, which is what DPSGD
# clips; a fixed number, so the threshold reveals nothing about the data.
DEFAULT_CLIP_NORM = 1.0

CLIP_RULE = ("a clip norm C > 0 (a number, fixed before the run) or 'pNN' with 0 < NN <= 100 "
             "(the paper's percentile rule, no guarantee)")

_PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)")


def check_clip(entry: Any, name: str = "clip") -> Union[float, str]:
    """``entry`` as a float ``C`` or the string ``"pNN"``; ValueError naming
    ``name`` and the rule for anything else (0, -1, ``"q80"``, ``"p0"``, ``"p101"``)."""
    def refuse() -> ValueError:
        return ValueError(f"{name}: expected {CLIP_RULE}, got {entry!r}")

    if isinstance(entry, str):
        match = _PERCENTILE.fullmatch(entry)
        if match is None or not 0.0 < float(match.group(1)) <= 100.0:
            raise refuse()
        return entry
    if isinstance(entry, bool) or not isinstance(entry, (int, float)):
        raise refuse()
    value = float(entry)
    if not (math.isfinite(value) and value > 0.0):
        raise refuse()
    return value


def clip_kwargs(entry: Any) -> Dict[str, Any]:
    """The :class:`~vflsec.splitnn.defenses.dp_sgd.DPSGD` arguments of a clip entry:
    ``{"clip_norm": C}`` or ``{"clip_norm": None, "clip_percentile": NN}``."""
    clip = check_clip(entry)
    if isinstance(clip, str):
        return {"clip_norm": None, "clip_percentile": float(clip[1:])}
    return {"clip_norm": clip}


def clip_variant(clip_norm: Any, clip_percentile: Any) -> str:
    """A DP-SGD row's ``variant``: ``"clip=1"`` for a fixed clip norm, ``"clip=p80"``
    for the percentile rule (``clip_norm`` None), as the DPSGD that trained it holds them."""
    if clip_norm is None:
        return "clip=p{:g}".format(float(clip_percentile))
    return "clip={:g}".format(float(clip_norm))


def is_percentile_variant(variant: Any) -> bool:
    """Whether a row's ``variant`` names the percentile clip (no guarantee)."""
    return str(variant or "").startswith("clip=p")


def _ordinal(value: float) -> str:
    """``"80th"``, ``"1st"``, ``"92nd"``, ``"99.5th"``."""
    if value != int(value) or 10 <= int(value) % 100 <= 20:
        return f"{value:g}th"
    return f"{value:g}" + {1: "st", 2: "nd", 3: "rd"}.get(int(value) % 10, "th")


def clip_text(entry: Any, calibration_steps: int) -> str:
    """How a report states a clip entry, e.g. ``"C = 1, fixed before the run, not read from
    the data"`` or the percentile rule with its caveat."""
    clip = check_clip(entry)
    if isinstance(clip, str):
        return (f"the {_ordinal(float(clip[1:]))} percentile of the per-sample gradient norms over the first "
                f"{calibration_steps} steps (clip={clip}), which reads the gradients the noise protects: no DP "
                "guarantee ('no guarantee')")
    return f"C = {clip:g}, fixed before the run, not read from the data"
