"""What the vertical trees tests share: a model scored through the parties' split masks, and the same
model fitted plain and under SecureBoost."""
from __future__ import annotations

import warnings

import pytest


@pytest.fixture(scope="session")
def masks_scores():
    """``masks_scores(model, codes, names, hub=None) -> raw``: the raw scores of rows whose per-party bin
    codes are ``codes`` (job order), each passive party sending its split masks over ``hub`` (a new
    in-memory hub when None) and the active party (``names[0]``) walking the trees."""
    from vflsec.federation.channel import InMemoryHub
    from vflsec.trees.prediction import predict_raw, send_split_masks
    from vflsec.vfl.runner import run_party_threads

    def score(model, codes, names, hub=None):
        def party(name, endpoint):
            i = names.index(name)
            if i:
                send_split_masks(endpoint, names[0], model.lookups_[i], codes[i])
                return None
            return predict_raw(endpoint, names[1:], model.trees_, model.baseline_, model.lookups_[0], codes[0])

        return run_party_threads(hub if hub is not None else InMemoryHub(), names, party)[names[0]]
    return score


@pytest.fixture(scope="session")
def plain_and_secureboost():
    """``plain_and_secureboost(parts, y, **options) -> (plain model, SecureBoost model)``, fitted on the same
    rows with the same hyper-parameters (the 2048-bit key's strength warning silenced)."""
    pytest.importorskip("gmpy2")
    pytest.importorskip("phe")
    from vflsec.trees import VerticalGradientBoostingClassifier

    def fit(parts, y, **options):
        plain = VerticalGradientBoostingClassifier(**options).fit(parts, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            secure = VerticalGradientBoostingClassifier("secureboost", **options).fit(parts, y)
        return plain, secure
    return fit
