"""Tables keep their meaning on the command line (issue 37, item 3): ``vflsec party-data --input``
warns about a categorical column of too many distinct values and ``vflsec party`` refuses it
unless ``[preprocess]`` declares it; the numeric CSVs ``party-data`` writes keep the column names;
the messages speak the command's options and the party file's keys, with normalised paths."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from vflsec import cli  # noqa: E402
from vflsec.data import PartyPreprocessor, load_dataset, read_table, vertical_split  # noqa: E402
from vflsec.runtime.party_csv import read_party_csv  # noqa: E402
from vflsec.runtime.party_table import read_party_table  # noqa: E402

N_DATES = 2888


def _bank(n=3000, seed=0):
    """A bank's table with a day/month/year text column of 2,888 values (no reader takes it for dates)."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.permutation(np.arange(n) % N_DATES), unit="D")
    return pd.DataFrame({"customer": [f"C{i:06d}" for i in rng.permutation(n)],
                         "signup": days.strftime("%d/%m/%Y"),
                         "opened": (days - pd.Timedelta(days=400)).strftime("%Y-%m-%d"),
                         "income": rng.normal(50, 10, n),
                         "region": rng.choice(["north", "south", "east"], n),
                         "label": rng.choice(["yes", "no"], n)})


def _header(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return next(csv.reader(fh))


def _party_data(capsys, *argv):
    code = cli.main(["party-data", *argv])
    captured = capsys.readouterr()
    return code, captured.out, [line for line in captured.err.splitlines() if line.strip()]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_party_data_warns_about_a_2888_value_column_and_writes_named_columns(tmp_path, capsys, fmt):
    source = tmp_path / f"bank.{fmt}"
    frame = _bank()
    frame.to_csv(source, index=False) if fmt == "csv" else frame.to_parquet(source, index=False)
    code, out, err = _party_data(capsys, "--input", str(source), "--id-column", "customer", "--label-column",
                                 "label", "--positive-label", "yes", "--out", str(tmp_path / "prepared"))
    assert code == 0
    assert len(err) == 1 and err[0].startswith("vflsec party-data: warning: "), err
    assert f"column 'signup' has {frame['signup'].nunique()} distinct values in 3000" in err[0]
    assert "vflsec party refuses it -- " in err[0]
    assert "--column-type signup=drop" in err[0] and "--high-cardinality signup" in err[0]
    assert "signup: categorical, 2888 distinct values: refused" in out
    assert "opened: date" in out  # ISO text dates are dates in CSV and Parquet alike
    # The written CSV: the preprocessor's column names, without the refused column.
    prepared = tmp_path / "prepared" / "bank.csv"
    prep = PartyPreprocessor.load(tmp_path / "prepared" / "bank.preprocessor.json")
    names = prep.get_feature_names_out().tolist()
    assert _header(prepared) == ["customer", "label", *names]
    assert names == ["opened_days", "income", "region_east", "region_north", "region_south"]
    ids, X, y, features = read_party_csv(prepared, "customer", "label")
    assert features == names and X.shape == (3000, len(names))


def test_party_data_with_the_column_declared_gives_no_warning(tmp_path, capsys):
    source = tmp_path / "bank.csv"
    _bank(n=400).to_csv(source, index=False)
    for extra, line in ((["--column-type", "signup=drop"], 'column_types = { "signup" = "drop" }'),
                        (["--high-cardinality", "signup"], 'high_cardinality = ["signup"]')):
        code, out, err = _party_data(capsys, "--input", str(source), "--id-column", "customer", "--label-column",
                                     "label", "--positive-label", "yes", *extra)
        assert code == 0 and err == [] and line in out


def test_party_data_keeps_the_folder_and_normalises_paths(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "cfg" / "x").mkdir(parents=True)
    _bank(n=200).drop(columns=["signup"]).to_csv(tmp_path / "raw" / "bank.csv", index=False)
    code, out, err = _party_data(capsys, "--input", os.path.join("cfg", "x", "..", "..", "raw", "bank.csv"),
                                 "--id-column", "customer", "--label-column", "label", "--positive-label", "yes",
                                 "--out", os.path.join("cfg", "x", "..", "..", "out"))
    assert code == 0 and err == []
    shown = os.path.join("raw", "bank.csv")
    assert out.startswith(f"{shown}: 200 rows") and f'data = "{shown}"' in out
    assert f"wrote {os.path.join('out', 'bank.csv')} " in out and ".." not in out


@pytest.mark.parametrize("extra, needle, python", [
    (["--id-column", "nope"], "pass --id-column one of them", "id_column="),
    (["--id-column", "customer", "--label-column", "label"], "e.g. --positive-label ", "positive_label="),
])
def test_party_data_errors_name_the_options(tmp_path, capsys, extra, needle, python):
    source = tmp_path / "bank.parquet"
    _bank(n=50).to_parquet(source, index=False)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["party-data", "--input", str(source), *extra])
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and needle in err[0] and python not in err[0], err


def test_party_data_from_a_dataset_writes_its_column_names(tmp_path, capsys):
    code, out, _ = _party_data(capsys, "--dataset", "breast", "--parties", "10,20", "--out", str(tmp_path))
    assert code == 0
    split = vertical_split(load_dataset("breast"), [10, 20], seed=0)
    assert _header(tmp_path / "active.csv") == ["id", "y", *split.feature_names[0]]
    assert _header(tmp_path / "passive1-test.csv") == ["id", *split.feature_names[1]]
    assert "mean radius" in _header(tmp_path / "active.csv")


# ------------------------------------------------------------------ vflsec party's reading

def test_vflsec_party_refuses_the_column_in_the_party_files_words(tmp_path):
    source = tmp_path / "bank.parquet"
    _bank().to_parquet(source, index=False)
    kw = dict(id_column="customer", label_column="label", positive_label="yes")
    with pytest.raises(ValueError) as err:
        read_party_table(source, preprocess=None, **kw)
    text = str(err.value)
    assert text.startswith(f"{source}: column 'signup' has 2888 distinct values in 3000 training rows")
    assert "-- in [preprocess] " in text and 'column_types = { "signup" = "drop" }' in text
    assert 'high_cardinality = ["signup"]' in text
    assert "high_cardinality=" not in text and "column_types=" not in text
    for preprocess in ({"high_cardinality": ["signup"], "max_categories": 20}, {"column_types": {"signup": "drop"}}):
        table = read_party_table(source, preprocess=preprocess, **kw)
        expected = PartyPreprocessor(**preprocess).fit(read_table(source, id_column="customer",
                                                                  label_column="label", positive_label="yes").features)
        assert table.feature_names == tuple(expected.get_feature_names_out())


def test_vflsec_party_read_errors_name_the_party_file_keys(tmp_path):
    source = tmp_path / "bank.csv"
    _bank(n=50).drop(columns=["signup"]).to_csv(source, index=False)
    with pytest.raises(ValueError, match=r"set \[party\] id_column to one of them"):
        read_party_table(source, id_column="nope", label_column=None, positive_label=None, preprocess={})
    with pytest.raises(ValueError, match=r'set \[party\] positive_label to the class coded 1, e\.g\. \[party\] '
                                         r'positive_label = "(yes|no)"'):
        read_party_table(source, id_column="customer", label_column="label", positive_label=None, preprocess={})


@pytest.mark.slow
@pytest.mark.network
def test_vflsec_party_exits_2_with_one_line_before_training(tmp_path, fast_network, child_env):
    pytest.importorskip("grpc")
    from vflsec.runtime.config import read_toml
    from vflsec.runtime.launch import to_toml, write_local_job

    ids = ["a", "b"]
    frames = {"active": (ids, np.zeros((2, 1)), np.array([0.0, 1.0])), "passive1": (ids, np.zeros((2, 1)), None)}
    job = dict(protocol="plain", loss="logistic", lr=1.0, epochs=1, batch_size=32, seed=3, active="active",
               passives=["passive1"])
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    _bank().to_parquet(local.directory / "bank.parquet", index=False)
    body = read_toml(local.configs["active"])
    body["party"].update(data="bank.parquet", id_column="customer", label_column="label", positive_label="yes")
    local.configs["active"].write_text(to_toml(body))
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(local.configs["active"])],
                          capture_output=True, text=True, env={**os.environ, **child_env}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    # (progress log lines may come before it)
    lines = [line for line in proc.stderr.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("vflsec party: error: ") and "'signup' has 2888 distinct values" in lines[0]
    assert 'high_cardinality = ["signup"]' in lines[0] and proc.stderr.splitlines()[-1] == lines[0]
