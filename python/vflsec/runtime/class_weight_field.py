"""``[job] class_weight`` as a job file writes it, for the job kinds that weigh their rows by class (glm, trees).

A TOML table's keys are text, and a job file is every party's, so the labels are named as the active
party's training file codes them: ``{ "0" = 1.0, "1" = 10.0 }`` (or "balanced"). This module reads the
field into ``None``, ``"balanced"`` or ``{label number: weight}``; each kind then checks the weights its
own way (:mod:`vflsec.glm.weights`, :mod:`vflsec.trees.weights`).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Union

__all__ = ["class_weight_field"]


def class_weight_field(fields: Mapping[str, Any], *, codes: str,
                       allow_empty: bool = True) -> Optional[Union[str, Dict[float, Any]]]:
    """``fields["class_weight"]``: None, "balanced", or the table with its keys read as numbers.
    ValueError for anything else (an empty table too, unless ``allow_empty``), and for a key that is no
    number, saying how the labels are coded (``codes``, e.g. ``"0" and "1"``)."""
    given = fields.get("class_weight")
    if given is None or given == "balanced":
        return given
    if not isinstance(given, Mapping) or (not given and not allow_empty):
        raise ValueError(f"class_weight must be \"balanced\" or a table label -> weight such as "
                         f"{{ \"0\" = 1.0, \"1\" = 10.0 }}, got {given!r}")
    weights = {}
    for label, weight in given.items():
        try:
            weights[float(label)] = weight
        except ValueError:
            raise ValueError(f"class_weight names the label {label!r}: key it by the labels as the active party's "
                             f"training file codes them ({codes})") from None
    return weights
