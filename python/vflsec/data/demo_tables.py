"""Raw tables of two organisations that share customers: a bank and an insurer, for trying vflsec on "your own data".

:func:`make_bank_insurer_tables` gives what the "your own data" guide (``docs/own-data.md``) starts
from, as two organisations would hold it: each its own table keyed by a customer ID it shares with
the other (text, in its own row order), text categories, missing cells, a date column, the
bank's label as text; each organisation holds only part of the customers (the rest are its own).
Six tables:

* ``bank``, ``insurer``: the training customers (the bank's with its label column);
* ``bank-test``, ``insurer-test``: held-out customers, labelled, for a job with ``evaluate = true``;
* ``bank-next``, ``insurer-next``: next month's new customers, no label: what a ``predict`` job scores.

Two sources:

* ``"synthetic"`` (built in, no download): a bank's churn label ``churned`` ("yes"/"no") from a
  logistic model over both organisations' columns (age, income, region, product tier; policy type,
  claims, premium, risk band), so both parties' columns carry signal, plus uninformative dates;
* ``"adult"`` (UCI Adult, ``data_dir`` or ``$VFLSEC_DATA``): the bank holds age, workclass,
  education, marital status, occupation and hours per week with the label ``income`` (">50K" /
  "<=50K"); the insurer relationship, race, sex, capital gain and loss, native country. UCI's
  "?" cells are missing cells; each party also has a date column (account opened / policy start)
  drawn independently of the label. Training customers come from adult.data, held-out and next
  month's from adult.test (halves).

:func:`write_bank_insurer_tables` writes them as CSV or Parquet (``vflsec party-data --raw``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

__all__ = ["DEMO_ID", "DEMO_SOURCES", "make_bank_insurer_tables", "write_bank_insurer_tables"]

DEMO_ID = "customer_id"
DEMO_SOURCES = ("synthetic", "adult")
#: the label column and its positive class, per source
DEMO_LABELS = {"synthetic": ("churned", "yes"), "adult": ("income", ">50K")}
_ADULT_BANK = ("age", "workclass", "education", "marital-status", "occupation", "hours-per-week")
_ADULT_INSURER = ("relationship", "race", "sex", "capital-gain", "capital-loss", "native-country")


def _synthetic_customers(n: int, rng: np.random.Generator) -> Any:
    import pandas as pd

    age = rng.integers(18, 80, n).astype(float)
    income = np.round(rng.lognormal(10.5, 0.5, n), 2)
    region = rng.choice(["north", "south", "east", "west", "central"], n, p=[0.3, 0.25, 0.2, 0.15, 0.1])
    tier = rng.choice(["basic", "plus", "premium"], n, p=[0.5, 0.35, 0.15])
    policy = rng.choice(["car", "home", "life", "travel"], n)
    claims = rng.poisson(0.6, n).astype(float)
    premium = np.round(rng.gamma(4.0, 150.0, n), 2)
    risk = rng.choice(list("ABCDE"), n, p=[0.15, 0.3, 0.3, 0.15, 0.1])
    logit = (-0.4 - 0.035 * (age - 45) - 0.9 * (np.log(income) - 10.5) + 0.7 * (region == "south")
             - 0.8 * (tier == "premium") + 0.4 * (tier == "basic") + 0.6 * claims - 0.6 * (policy == "life")
             + 0.002 * (premium - 600) + 0.5 * np.select([risk == "D", risk == "E"], [1.0, 2.0], 0.0))
    churned = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-logit)), "yes", "no")
    bank = pd.DataFrame({"age": age, "income": income, "region": region, "product_tier": tier, "churned": churned})
    insurer = pd.DataFrame({"policy_type": policy, "claims_last_year": claims, "annual_premium": premium,
                            "risk_band": risk})
    for frame, column, rate in ((bank, "income", 0.08), (bank, "product_tier", 0.05), (insurer, "annual_premium",
                                                                                        0.06)):
        frame.loc[rng.random(n) < rate, column] = None
    return bank, insurer


def _adult_customers(split: str, data_dir: Any) -> Any:
    import pandas as pd

    from .loaders import _ADULT_ATTRIBUTES, _find_file, _parse_adult

    path = _find_file("adult", "adult", "adult.data" if split == "train" else "adult.test", data_dir)
    rows, labels = _parse_adult(path)
    names = [name for name, _ in _ADULT_ATTRIBUTES]
    frame = pd.DataFrame(rows, columns=names).replace("?", None)
    for name, categories in _ADULT_ATTRIBUTES:
        if categories is None:
            frame[name] = frame[name].astype(float)
    bank = frame[list(_ADULT_BANK)].copy()
    bank["income"] = np.where(np.asarray(labels) == 1, ">50K", "<=50K")
    return bank, frame[list(_ADULT_INSURER)].copy()


def _dates(n: int, rng: np.random.Generator, start: str) -> Any:
    import pandas as pd

    return pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, 3650, n), unit="D")


def _share(bank: Any, insurer: Any, ids: np.ndarray, rng: np.random.Generator, *, bank_keeps: float,
           insurer_keeps: float, drop_label: Optional[str]) -> Any:
    """Each organisation keeps its share of the customers, in its own order, with a date column
    (``drop_label``: the label column to leave out, for unlabelled rows)."""
    n = len(ids)
    bank = bank.assign(account_opened=_dates(n, rng, "2012-01-01"))
    insurer = insurer.assign(policy_start=_dates(n, rng, "2014-06-01"))
    bank.insert(0, DEMO_ID, ids)
    insurer.insert(0, DEMO_ID, ids)
    if drop_label is not None:
        bank = bank.drop(columns=[drop_label])
    bank = bank[rng.random(n) < bank_keeps]
    insurer = insurer[rng.random(n) < insurer_keeps]
    return (bank.iloc[rng.permutation(len(bank))].reset_index(drop=True),
            insurer.iloc[rng.permutation(len(insurer))].reset_index(drop=True))


def make_bank_insurer_tables(source: str = "synthetic", *, seed: int = 0, rows: Optional[int] = None,
                             data_dir: Any = None) -> Dict[str, Any]:
    """The six pandas DataFrames of the module docstring. ``rows``: training customers (synthetic:
    default 6000, with a third as many held-out and next-month ones; adult: at most this many of
    adult.data's rows, default all). IDs are opaque text (``C`` and 8 digits), unique across all
    tables."""
    if source not in DEMO_SOURCES:
        raise ValueError(f"source must be one of {DEMO_SOURCES}, got {source!r}")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 100):
        raise ValueError(f"rows must be an int >= 100, got {rows!r}")
    rng = np.random.default_rng(seed)
    label = DEMO_LABELS[source][0]
    if source == "synthetic":
        n = rows or 6000
        parts = [_synthetic_customers(m, rng) for m in (n, max(n // 3, 50), max(n // 3, 50))]
    else:
        bank, insurer = _adult_customers("train", data_dir)
        if rows is not None and rows < len(bank):
            keep = np.sort(rng.choice(len(bank), rows, replace=False))
            bank, insurer = bank.iloc[keep], insurer.iloc[keep]
        test_bank, test_insurer = _adult_customers("test", data_dir)
        order = rng.permutation(len(test_bank))
        half = order[: len(order) // 2], order[len(order) // 2:]
        parts = [(bank, insurer)] + [(test_bank.iloc[h], test_insurer.iloc[h]) for h in half]
    total = sum(len(b) for b, _ in parts)
    tokens = rng.choice(10 ** 8, size=total, replace=False)
    ids = np.array([f"C{t:08d}" for t in tokens])
    out: Dict[str, Any] = {}
    start = 0
    for name, (bank, insurer), keeps in zip(("", "-test", "-next"), parts,
                                            ((0.9, 0.9), (1.0, 1.0), (1.0, 0.8))):
        chunk = ids[start:start + len(bank)]
        start += len(bank)
        b, i = _share(bank.reset_index(drop=True), insurer.reset_index(drop=True), chunk, rng,
                      bank_keeps=keeps[0], insurer_keeps=keeps[1], drop_label=label if name == "-next" else None)
        out[f"bank{name}"], out[f"insurer{name}"] = b, i
    return out


def write_bank_insurer_tables(out: Any, source: str = "synthetic", *, fmt: str = "csv", seed: int = 0,
                              rows: Optional[int] = None, data_dir: Any = None) -> Dict[str, Path]:
    """Write the six tables to folder ``out`` as ``<name>.csv`` (or ``.parquet``); name -> path."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"format must be 'csv' or 'parquet', got {fmt!r}")
    tables = make_bank_insurer_tables(source, seed=seed, rows=rows, data_dir=data_dir)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, frame in tables.items():
        path = folder / f"{name}.{fmt}"
        if fmt == "csv":
            frame.to_csv(path, index=False, date_format="%Y-%m-%d")
        else:
            frame.to_parquet(path, index=False)
        written[name] = path
    return written
