"""The bank and insurer raw tables the "your own data" guide starts from (vflsec.data.demo_tables)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from vflsec.data.demo_tables import make_bank_insurer_tables, write_bank_insurer_tables  # noqa: E402


def test_the_synthetic_tables_look_like_two_organisations_tables():
    tables = make_bank_insurer_tables("synthetic", seed=1, rows=600)
    assert set(tables) == {"bank", "insurer", "bank-test", "insurer-test", "bank-next", "insurer-next"}
    ids = [set(t["customer_id"]) for t in tables.values()]
    for name, table in tables.items():
        assert table["customer_id"].is_unique, name
    # Training, held-out and next month's customers are different people.
    assert not (ids[0] | ids[1]) & (ids[2] | ids[3]) and not (ids[0] | ids[1]) & (ids[4] | ids[5])
    bank, insurer = tables["bank"], tables["insurer"]
    shared = set(bank["customer_id"]) & set(insurer["customer_id"])
    assert 0.7 < len(shared) / 600 < 0.9 and len(bank) < 600 and len(insurer) < 600
    assert set(bank["churned"]) == {"yes", "no"} and "churned" not in tables["bank-next"]
    assert bank["income"].isna().any() and insurer["annual_premium"].isna().any()
    assert pd.api.types.is_string_dtype(bank["region"]) and pd.api.types.is_datetime64_any_dtype(bank["account_opened"])
    # Each party's rows in its own order, not the ID order and not the other party's.
    assert list(bank["customer_id"]) != sorted(bank["customer_id"])
    assert len(tables["insurer-next"]) < len(tables["bank-next"])


def test_the_same_seed_gives_the_same_tables_and_another_seed_others():
    a, b = make_bank_insurer_tables(seed=3, rows=200), make_bank_insurer_tables(seed=3, rows=200)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name])
    assert not a["bank"].equals(make_bank_insurer_tables(seed=4, rows=200)["bank"])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_written_tables_read_back_with_the_partys_reader(tmp_path, fmt):
    pytest.importorskip("pyarrow")
    from vflsec.data import read_table

    written = write_bank_insurer_tables(tmp_path, fmt=fmt, seed=0, rows=300)
    table = read_table(written["bank"], id_column="customer_id", label_column="churned", positive_label="yes")
    assert table.n_rows == len(make_bank_insurer_tables(seed=0, rows=300)["bank"])
    assert set(np.unique(table.labels)) == {0, 1}
    assert "account_opened" in table.feature_names


@pytest.mark.parametrize("kwargs, needle", [({"source": "breast"}, "source must be"), ({"rows": 10}, "rows must be"),
                                            ({"rows": 1.5}, "rows must be")])
def test_bad_arguments_are_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        make_bank_insurer_tables(**kwargs)


def test_the_cli_refuses_a_dataset_it_cannot_build_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vflsec", "party-data", "--raw", "--dataset", "breast", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--dataset synthetic" in proc.stderr


def test_the_adult_tables_keep_ucis_rows_and_missing_cells(shared_datasets):
    tables = make_bank_insurer_tables("adult", data_dir=shared_datasets)
    assert set(tables["bank"]["income"]) == {">50K", "<=50K"}
    assert tables["bank"]["workclass"].isna().any() and tables["insurer"]["native-country"].isna().any()
    assert len(tables["bank-test"]) + len(tables["bank-next"]) == 16281
