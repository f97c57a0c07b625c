"""``vflsec party-data --input FILE``: one party's own table checked and prepared for ``vflsec party``."""
import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from vflsec import cli  # noqa: E402
from vflsec.data import PartyPreprocessor  # noqa: E402
from vflsec.runtime.party_csv import read_party_csv  # noqa: E402


def _bank(path, n=60):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"customer": [f"c{i}" for i in range(n)],
                          "income": np.where(rng.random(n) < 0.1, np.nan, rng.normal(50, 10, n)),
                          "region": rng.choice(["north", "south"], n),
                          "opened": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D"),
                          "label": rng.choice(["yes", "no"], n)})
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return frame


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_the_table_is_checked_summarised_and_written_for_vflsec_party(tmp_path, capsys, suffix):
    source = tmp_path / f"bank{suffix}"
    frame = _bank(source)
    out = tmp_path / "prepared"
    argv = ["party-data", "--input", str(source), "--id-column", "customer", "--label-column", "label",
            "--positive-label", "yes", "--column-type", "opened=date", "--out", str(out)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "60 rows" in text and "'yes' coded 1" in text and "income: numeric, " in text and "missing" in text
    assert "opened: date" in text and "[preprocess]" in text and 'positive_label = "yes"' in text
    ids, X, y, _ = read_party_csv(out / "bank.csv", "customer", "label")  # what vflsec party reads
    assert ids == frame["customer"].tolist() and np.array_equal(y, (frame["label"] == "yes").to_numpy(float))
    assert np.all(np.linalg.norm(X, axis=1) <= 1 + 1e-9)
    prep = PartyPreprocessor.load(out / "bank.preprocessor.json")
    np.testing.assert_array_equal(prep.transform(frame.drop(columns=["customer", "label"])), X)


@pytest.mark.parametrize("extra, needle", [
    (["--label-column", "label"], "--positive-label"),
    (["--id-column", "nope"], "no ID column 'nope'"),
    (["--column-type", "opened=when"], "is not COLUMN=TYPE"),
    (["--column-type", "ghost=date"], "'ghost'"),
])
def test_mistakes_are_one_line_and_exit_2(tmp_path, capsys, extra, needle):
    source = tmp_path / "bank.parquet"
    _bank(source)
    argv = ["party-data", "--input", str(source)] + (["--id-column", "customer"] if "--id-column" not in extra
                                                     else []) + extra
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and needle in err[0], err
