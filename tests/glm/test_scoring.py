"""Scores by ID for new customers across parties (vflsec.glm.scoring), with the missing-partner policy."""
import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from vflsec.data import PartyPreprocessor  # noqa: E402
from vflsec.glm import VerticalLogisticRegression  # noqa: E402
from vflsec.glm.scoring import score_by_id  # noqa: E402


def _tables(n, seed):
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{seed}-{i:04d}" for i in range(n)])
    income = rng.normal(50, 10, n)
    region = rng.choice(["north", "south"], n)
    balance = rng.normal(0, 1, n)
    y = (0.1 * (income - 50) + (region == "north") + balance + rng.normal(0, 0.5, n) > 0.5).astype(int)
    bank = pd.DataFrame({"id": ids, "income": income, "region": region})
    insurer = pd.DataFrame({"id": ids, "balance": balance})
    return bank, insurer, y


def _fit():
    bank, insurer, y = _tables(400, 0)
    preps = {"active": PartyPreprocessor().fit(bank.drop(columns=["id"])),
             "passive": PartyPreprocessor().fit(insurer.drop(columns=["id"]))}
    blocks = [preps["active"].transform(bank.drop(columns=["id"])),
              preps["passive"].transform(insurer.drop(columns=["id"]))]
    joint = VerticalLogisticRegression(protection="plain").fit(blocks, y)
    alone = VerticalLogisticRegression(protection="single_party").fit(blocks, y)
    return joint, alone, preps, blocks


def test_scores_by_id_equal_the_joint_model_and_the_policy_is_counted():
    joint, alone, preps, _ = _fit()
    bank, insurer, y = _tables(200, 1)
    insurer = insurer.iloc[20:].sample(frac=1, random_state=0)  # 20 customers unknown to the insurer
    out = score_by_id(joint, {"active": bank, "passive": insurer}, id_column="id", preprocessors=preps)
    assert out.attrs["counts"] == {"joint": 180, "missing": 20}
    assert list(out.index) == sorted(bank["id"])
    common = bank.iloc[20:]
    blocks = [preps["active"].transform(common.drop(columns=["id"])),
              preps["passive"].transform(insurer.set_index("id").loc[common["id"]].reset_index(drop=True))]
    np.testing.assert_allclose(out.loc[common["id"], "score"].to_numpy(dtype=float), joint.decision_function(blocks))
    assert out.loc[bank["id"].iloc[:20], "score"].isna().all()
    accuracy = np.mean(out.loc[common["id"], "prediction"].to_numpy(dtype=int) == y[20:])
    assert accuracy > 0.75
    # The active-only policy scores the 20 with the fallback model instead.
    filled = score_by_id(joint, {"active": bank, "passive": insurer}, id_column="id", preprocessors=preps,
                         missing="active_only", fallback=alone)
    assert filled.attrs["counts"] == {"joint": 180, "active_only": 20}
    assert filled["score"].notna().all()
    # The fallback uses no partner column: its scores are the active party's alone.
    own = preps["active"].transform(bank.iloc[:20].drop(columns=["id"]))
    for partner in (np.zeros((20, 1)), np.random.default_rng(0).normal(size=(20, 1))):
        np.testing.assert_allclose(filled.loc[bank["id"].iloc[:20], "score"].to_numpy(dtype=float),
                                   alone.decision_function([own, partner]))


def test_bad_policies_are_refused():
    joint, _, preps, _ = _fit()
    bank, insurer, _ = _tables(10, 2)
    with pytest.raises(ValueError, match="missing must be one of"):
        score_by_id(joint, {"active": bank, "passive": insurer}, id_column="id", missing="guess")
    with pytest.raises(ValueError, match="needs fallback="):
        score_by_id(joint, {"active": bank, "passive": insurer}, id_column="id", missing="active_only")
