"""``vflsec party --job KEY=VALUE`` (issue 37, item 6): one job file serves a sweep.

The overrides are parsed as TOML values (a bare word is a string), applied to the ``[job]`` table
before the job's checks and its digest: a job file with the overridden values written into it is
the reference (the same digest, the same fields); different overrides give a different digest, so
the job agreement refuses parties that pass different ones. Every mistake is one line with a fix.
"""
from __future__ import annotations

import math

import pytest

from vflsec.errors import CommandError
from vflsec.runtime.job_overrides import apply_job_overrides, overrides_text, parse_job_overrides
from vflsec.runtime.job_spec import load_job_spec
from vflsec.runtime.launch import to_toml

JOB = {"protocol": "plain", "loss": "logistic", "lr": 0.5, "epochs": 3, "batch_size": 8, "seed": 1,
       "active": "bank", "passives": ["insurer"], "options": {"a": 1}}


@pytest.mark.parametrize("item, key, value", [
    ("epochs=5", "epochs", 5),
    ("lr=0.05", "lr", 0.05),
    ("lr=1e-3", "lr", 1e-3),
    ("evaluate=true", "evaluate", True),
    ("protocol=hdp", "protocol", "hdp"),            # a bare word: the string as written
    ('protocol="hdp"', "protocol", "hdp"),          # the TOML string
    ("name='true'", "name", "true"),                # quoted: a string, not the boolean
    ('passives=["a", "b"]', "passives", ["a", "b"]),
    ("options.poly_modulus_degree=8192", "options.poly_modulus_degree", 8192),
    (" epochs = 5 ", "epochs", 5),
])
def test_values_are_toml_and_a_bare_word_is_a_string(item, key, value):
    (override,) = parse_job_overrides([item])
    assert (override.key, override.value) == (key, value)
    assert type(override.value) is type(value)


def test_inf_is_the_float():
    (override,) = parse_job_overrides(["k=inf"])
    assert math.isinf(override.value) and override.value > 0


@pytest.mark.parametrize("items, what", [
    (["epochs"], "is not KEY=VALUE"),
    (["=5"], "is not KEY=VALUE"),
    (["ep ochs=5"], "is not KEY=VALUE"),
    (["epochs="], "has no value"),
    (["passives=[a]"], "is not a TOML value"),
    (['protocol="hdp'], "is not a TOML value"),
    (["epochs=5", "epochs=6"], "twice"),
    (["options.a=1", "options=2"], "twice"),
    (["epochs=5\nlr=1"], "line break"),
])
def test_malformed_overrides_are_one_line_with_a_fix(items, what):
    with pytest.raises(CommandError) as info:
        parse_job_overrides(items)
    assert what in info.value.what and info.value.fix and "\n" not in str(info.value)


def test_applied_to_a_copy_with_sub_tables_merged():
    overrides = parse_job_overrides(["epochs=5", "options.b=2", "widths.bank=3"])
    table = apply_job_overrides(JOB, overrides)
    assert table["epochs"] == 5 and table["options"] == {"a": 1, "b": 2} and table["widths"] == {"bank": 3}
    assert JOB["epochs"] == 3 and JOB["options"] == {"a": 1}  # the caller's table is not written
    assert overrides_text(overrides) == "--job epochs=5 --job options.b=2 --job widths.bank=3"


@pytest.mark.parametrize("items, what", [
    (["epoch=5"], "did you mean 'epochs'?"),
    (["n_bins=3"], "is not a [job] key of a glm job"),
    (["max_iter=3"], "is not a [job] key of a glm job"),
    (["epochs.x=1"], "not a table"),
])
def test_a_key_the_job_does_not_take_is_refused_naming_it(items, what):
    with pytest.raises(ValueError) as info:
        apply_job_overrides(JOB, parse_job_overrides(items))
    assert what in str(info.value) and " -- " in str(info.value)


def test_the_key_check_follows_an_overridden_kind():
    trees = {"kind": "trees", "active": "bank", "passives": ["insurer"]}
    assert apply_job_overrides(trees, parse_job_overrides(["max_iter=3"]))["max_iter"] == 3
    with pytest.raises(ValueError, match="is not a \\[job\\] key of a trees job"):
        apply_job_overrides(trees, parse_job_overrides(["epochs=3"]))


def _job_file(path, table):
    path.write_text(to_toml({"job": table}))
    return path


def test_the_digest_is_the_job_file_with_the_values_written(tmp_path):
    base = _job_file(tmp_path / "job.toml", JOB)
    items = ["epochs=7", "protocol=hdp", "k=2.0", "options.b=2"]
    overridden = load_job_spec(base, parse_job_overrides(items))
    written = load_job_spec(_job_file(tmp_path / "written.toml",
                                      {**JOB, "epochs": 7, "protocol": "hdp", "k": 2.0, "options": {"a": 1, "b": 2}}))
    assert overridden.digest == written.digest and dict(overridden.fields) == dict(written.fields)
    plain = load_job_spec(base)
    assert plain.digest != overridden.digest and plain.fields["epochs"] == 3
    # Parties that pass different overrides hold different jobs: the agreement compares these digests.
    assert load_job_spec(base, parse_job_overrides(["epochs=8"])).digest != overridden.digest


def test_a_bad_value_is_refused_by_the_jobs_own_checks(tmp_path):
    base = _job_file(tmp_path / "job.toml", JOB)
    with pytest.raises((TypeError, ValueError), match="epochs"):
        load_job_spec(base, parse_job_overrides(["epochs=five"]))
    with pytest.raises(ValueError, match="n_samples"):  # the job_spec's own refusal, as in a job file
        load_job_spec(base, parse_job_overrides(["kind=glm", "n_samples=3"]))
