"""Model state as JSON data, for the saved-model files (no pickle): one encoding for every estimator.

:func:`to_json` turns numpy arrays and scalars into lists and Python numbers, tuples into lists and
non-finite floats into ``{"__float__": "inf"}``; :func:`from_json` restores the floats;
:func:`read_saved_model` reads an estimator's saved file with its checks. Used by
:mod:`vflsec.glm.persistence`, :mod:`vflsec.trees.persistence` and :mod:`vflsec.splitnn.persistence`.
"""
from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any, Dict, Mapping, Tuple

import numpy as np

__all__ = ["from_json", "read_json_document", "read_saved_model", "to_json"]


def read_json_document(file: Path, what: str) -> Any:
    """The JSON document in ``file``; ValueError "``file``: not ``what`` (why)" when it is not
    UTF-8 text or not JSON (FileNotFoundError when it does not exist)."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{file}: not {what} (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file}: not {what} (invalid JSON at line {exc.lineno}: {exc.msg})") from None


def read_saved_model(file: Path, what: str, fmt: str, version: int,
                     estimator: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(params, fitted)`` of the saved ``estimator`` in ``file`` (floats decoded), a document of
    format ``fmt`` at ``version``; ValueError naming the file when it is not ``what`` (e.g. "a saved
    vflsec GLM model"), another version, another estimator's model or lacks its sections."""
    document = read_json_document(file, what)
    if not isinstance(document, dict) or document.get("format") != fmt:
        raise ValueError(f"{file}: not {what} (no \"format\": \"{fmt}\")")
    if document.get("version") != version:
        raise ValueError(f"{file}: saved model format version {document.get('version')!r}; this vflsec reads "
                         f"version {version} -- save it again with this version")
    if document.get("estimator") != estimator:
        raise ValueError(f"{file} holds a {document.get('estimator')!r} model -- load it with "
                         f"{document.get('estimator')}.load")
    params, fitted = document.get("params"), document.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValueError(f"{file}: the saved model has no params/fitted sections")
    return from_json(params), from_json(fitted)


def to_json(value: Any, where: str = "value") -> Any:
    """``value`` as JSON data: numpy scalars and arrays as Python numbers and lists, tuples as
    lists, non-finite floats as ``{"__float__": "inf"}``; TypeError naming ``where`` otherwise."""
    if isinstance(value, np.ndarray):
        return [to_json(v, f"{where}[{i}]") for i, v in enumerate(value.tolist())]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}; it cannot be saved")
            out[key] = to_json(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where} is a {type(value).__name__}, which a saved model cannot hold (JSON data only)")


def from_json(value: Any) -> Any:
    """The inverse of :func:`to_json` for floats (lists stay lists)."""
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {key: from_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value
