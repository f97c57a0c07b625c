"""Scores by ID for new customers across parties, in one process: what a cross-party ``predict`` job does.

A bank (the active party) wants scores for next month's customers. Each party holds its own new rows
under its own IDs; the model is one weight block per party. :func:`score_by_id` aligns the parties'
new rows by ID (:func:`vflsec.data.align`, the in-process mirror of PSI), applies each party's saved
preprocessor, sums the partial scores of every customer every party holds, and applies a stated
policy to the active party's customers that some partner does not hold (``missing=``):

* ``"none"`` (default) -- no score for them; they are listed with ``source = "missing"`` and counted;
* ``"active_only"`` -- scored by ``fallback``, a model trained on the active party's features alone
  (e.g. ``VerticalLogisticRegression(protection="single_party")`` fitted alongside the joint one),
  with ``source = "active_only"``: a weaker, honest score instead of none.

Customers only a passive party holds get no row: the active party never learns of them. Across
processes the same scoring is ``vflsec party`` with a ``predict`` job
(:mod:`vflsec.runtime.predict_kind`), tested equal to this function; here it is the way to score in
experiments.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

__all__ = ["MISSING_POLICIES", "score_by_id"]

MISSING_POLICIES = ("none", "active_only")


def score_by_id(model: Any, frames: Mapping[str, Any], *, id_column: str,
                preprocessors: Optional[Mapping[str, Any]] = None, missing: str = "none",
                fallback: Any = None) -> Any:
    """A pandas DataFrame indexed by ID (the active party's customers, sorted as text) with
    ``score`` (the linear predictor), ``probability`` (of ``classes_[1]``), ``prediction`` and
    ``source`` ("joint", "active_only" or "missing"); its ``attrs["counts"]`` says how many of each.

    ``model``: a fitted :class:`~vflsec.glm.VerticalLogisticRegression` (or any estimator whose
    ``decision_function`` takes a list of party blocks, active first, and has ``classes_``);
    ``frames``: party name -> that party's new rows (DataFrame with ``id_column``), in the
    model's party order (active first); ``preprocessors``: party name -> the fitted
    :class:`vflsec.data.PartyPreprocessor` the party trained with (a party without one passes
    its numeric columns as they are); ``missing`` and ``fallback``: the module docstring.
    """
    import pandas as pd

    from ..data import align

    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    if missing == "active_only" and fallback is None:
        raise ValueError("missing='active_only' needs fallback=, a model fitted on the active party's features "
                         "alone (e.g. VerticalLogisticRegression(protection='single_party'))")
    names = list(frames)
    if len(names) < 2:
        raise ValueError(f"frames must hold every party's new rows (active first), got {names}")
    preprocessors = dict(preprocessors or {})

    def block(name: str, frame: Any) -> np.ndarray:
        features = frame.drop(columns=[id_column])
        prep = preprocessors.get(name)
        values = prep.transform(features) if prep is not None else features.to_numpy(dtype=np.float64)
        return np.ascontiguousarray(values, dtype=np.float64)

    active = names[0]
    active_ids = frames[active][id_column].astype(str)
    order = np.sort(active_ids.to_numpy())
    out = pd.DataFrame(index=pd.Index(order, name=id_column),
                       data={"score": np.nan, "probability": np.nan, "prediction": None, "source": "missing"})
    aligned = align(frames, id_column)
    if aligned.n_common:
        blocks = [block(name, aligned.frames[name]) for name in names]
        _fill(out, aligned.ids, model, blocks, "joint")
    rest = np.setdiff1d(order, aligned.ids, assume_unique=True)
    if missing == "active_only" and rest.size:
        own = frames[active].assign(**{id_column: active_ids.to_numpy()}).set_index(id_column).loc[rest]
        own_block = block(active, own.reset_index())
        _fill(out, rest, fallback, [own_block] + _empty_partners(fallback, own_block.shape[0]), "active_only")
    out.attrs["counts"] = {k: int(v) for k, v in out["source"].value_counts().items()}
    return out


def _fill(out: Any, ids: np.ndarray, model: Any, blocks: list, source: str) -> None:
    score = np.asarray(model.decision_function(blocks), dtype=np.float64).ravel()
    classes = np.asarray(model.classes_)
    out.loc[ids, "score"] = score
    out.loc[ids, "probability"] = 1.0 / (1.0 + np.exp(-score))
    # The model's own decision rule (a VerticalLogisticRegression's threshold), else theta > 0.
    out.loc[ids, "prediction"] = model.predict(blocks) if hasattr(model, "predict") else np.where(
        score > 0, classes[1], classes[0])
    out.loc[ids, "source"] = source


def _empty_partners(fallback: Any, rows: int) -> list:
    """Zero blocks for the partners of a fallback fitted with every party's columns but using only the
    active party's (``protection="single_party"``: its other weight blocks are unused): what it
    expects as input, carrying no partner data. A model fitted on the active block alone gets none."""
    coef = getattr(fallback, "coef_", None)
    if isinstance(coef, list) and len(coef) > 1:
        return [np.zeros((rows, np.asarray(c).shape[0])) for c in coef[1:]]
    return []
