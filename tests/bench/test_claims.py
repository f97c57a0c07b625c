"""Claims as data (vflsec.bench.claims): parsed from the papers' TOML, refused when
malformed, judged against measurements, printed by one table."""
import pytest

from vflsec.bench import claims as claims_mod
from vflsec.bench.claims import Claim, judge, verdict_table
from vflsec.bench.errors import BenchConfigError


def _claim(**table):
    return claims_mod._claim({"id": "c", "statement": "s", "quantity": "q", "op": "<=", "threshold": 2.0, **table},
                             "papers/x.toml", 0)


def test_judging_holds_does_not_hold_and_not_measured():
    le = _claim()
    band = _claim(id="b", op="between", low=2.0, high=3.0, threshold=None, quantity="r")
    verdicts = judge([le, band], {"q": 2.0, "r": 3.5})
    assert [v.word for v in verdicts] == ["holds", "does not hold"]
    assert judge([le], {"q": 2.0001})[0].holds is False
    assert judge([le], {})[0].word == "not measured"
    assert judge([le], {"q": float("nan")})[0].holds is None
    table = verdict_table(judge([le, band], {"q": 1.5}, notes={"c": "median of 3"}))
    assert "| s | papers/x.toml | 1.5 (median of 3) | <= 2 | **holds** |" in table
    assert "| 2 to 3 | **not measured** |" in table


@pytest.mark.parametrize("table, message", [
    ({"op": "=="}, "op '=='"),
    ({"threshold": "2"}, "'threshold' must be a finite number"),
    ({"threshold": float("inf")}, "'threshold' must be a finite number"),
    ({"op": "between", "low": 3.0, "high": 2.0}, "low 3 > high 2"),
    ({"statement": ""}, "'statement' must be a non-empty string"),
    ({"colour": "red"}, "unknown key 'colour'"),
])
def test_a_malformed_claim_is_refused_in_one_line(table, message):
    with pytest.raises(BenchConfigError, match=message):
        _claim(**table)


def test_every_shipped_paper_file_parses_and_its_claims_are_unique():
    from importlib import resources

    papers = [p.name[:-5] for p in (resources.files("vflsec.bench") / "papers").iterdir() if p.name.endswith(".toml")]
    assert "hdp_vfl" in papers
    total = 0
    for paper in papers:
        loaded = claims_mod.load_claims(paper)
        assert all(isinstance(c, Claim) for c in loaded)
        total += len(loaded)
    assert total >= 1  # at least one claim is data, not code
