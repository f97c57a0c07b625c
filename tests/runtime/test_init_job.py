"""``vflsec init`` (issue 37, item 6): a ready-to-run job folder for a set of protocols and parties.

Every party file it writes, the HE key holder's included, passes ``vflsec party``'s own start-up
checks (:func:`vflsec.runtime.startup.prepare_party`, TLS files and the rows included); the
addresses are distinct loopback ports across every job, the outputs stay inside the folder, a
trees "dp" job's delta is ``default_delta`` of the label holder's rows; every mistake is one line
with a fix and exit status 2, before anything is written. End to end (slow): a generated job's
``run.sh`` runs its parties as processes, with ``--job`` overrides every party applies.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cryptography")
pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from vflsec import cli  # noqa: E402
from vflsec.errors import CommandError  # noqa: E402
from vflsec.runtime.config import load_party_config  # noqa: E402
from vflsec.runtime.init_job import write_job_folder  # noqa: E402
from vflsec.runtime.job_overrides import parse_job_overrides  # noqa: E402
from vflsec.runtime.job_spec import load_job_spec  # noqa: E402
from vflsec.runtime.startup import prepare_party  # noqa: E402

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "own-data.md"


def _tables(folder: Path, n: int = 160, seed: int = 0, suffix: str = "") -> None:
    """A bank's table (text IDs, a text category, the text label "churned") and an insurer's (a
    missing cell), 80% of the IDs shared, each in its own row order."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"C{seed}{i:04d}" for i in range(n)])
    x = rng.normal(size=(n, 3))
    churned = np.where(x[:, 0] + x[:, 2] > 0, "yes", "no")
    bank = rng.permutation(n)[: int(0.9 * n)]
    insurer = rng.permutation(n)[: int(0.9 * n)]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"bank{suffix}.csv", "w") as fh:
        fh.write("customer_id,age,region,churned\n")
        for i in bank:
            fh.write(f"{ids[i]},{40 + 10 * x[i, 0]:.2f},{'north' if x[i, 1] > 0 else 'south'},{churned[i]}\n")
    with open(folder / f"insurer{suffix}.csv", "w") as fh:
        fh.write("customer_id,premium,claims\n")
        for k, i in enumerate(insurer):
            premium = "" if k == 3 else f"{100 + 30 * x[i, 2]:.2f}"
            fh.write(f"{ids[i]},{premium},{int(abs(x[i, 1]) * 2)}\n")


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """The working folder (``tmp_path``, the tables in ``data/``)."""
    _tables(tmp_path / "data")
    _tables(tmp_path / "data", n=60, seed=1, suffix="-test")
    monkeypatch.chdir(tmp_path)
    return tmp_path


PARTIES = {"bank": "data/bank.csv", "insurer": "data/insurer.csv"}
TEST_DATA = {"bank": "data/bank-test.csv", "insurer": "data/insurer-test.csv"}
COMMON = dict(label_column="churned", positive_label="yes", id_column="customer_id")


def _ports(folder) -> list:
    return [int(re.search(r":(\d+)$", load_party_config(path).listen).group(1))
            for job in folder.jobs.values() for path in job.configs.values()]


@pytest.mark.filterwarnings("ignore::vflsec.he.WeakKeyWarning")
def test_every_file_of_a_glm_sweep_passes_the_start_up_checks(tables):
    folder = write_job_folder("sweep", PARTIES, protocols=["plain", "hdp", "paillier"], test_data=TEST_DATA,
                              job=["epochs=2", "paillier:key_bits=2048"], **COMMON)
    assert folder.active == "bank" and list(folder.jobs) == ["plain", "hdp", "paillier"]
    for protocol, job in folder.jobs.items():
        expected = ["bank", "insurer"] + (["keyholder"] if protocol == "paillier" else [])
        assert list(job.configs) == expected and job.key_holder == ("keyholder" if protocol == "paillier" else None)
        for name, path in job.configs.items():
            start = prepare_party(path)  # everything vflsec party checks alone: files, job, TLS, rows
            assert start.cfg.name == name and start.spec.fields["protocol"] == protocol
            assert start.spec.fields["epochs"] == 2 and start.spec.evaluate
            assert (tables / "sweep" / protocol / "out") in Path(start.cfg.output).resolve().parents
            if name == "bank":
                assert start.role == "active" and sorted(set(start.rows.y.tolist())) == [0.0, 1.0]
            if name == "keyholder":
                assert start.role == "coordinator" and start.rows is None
                assert start.cfg.data is None and start.cfg.label_column is None and start.cfg.test_data is None
                assert sorted(start.cfg.peers) == ["bank", "insurer"]
    ports = _ports(folder)
    assert len(ports) == len(set(ports)) == 7  # distinct across every job: they may run at once
    assert load_job_spec(folder.jobs["paillier"].job_file).fields["key_bits"] == 2048
    assert "key_bits" not in load_job_spec(folder.jobs["plain"].job_file).fields
    assert load_job_spec(folder.jobs["hdp"].job_file).fields["epsilon"] > 0  # a DP protocol says its budget
    assert "epsilon" not in load_job_spec(folder.jobs["plain"].job_file).fields
    assert sorted(p.name for p in (tables / "sweep" / "certs").iterdir()) == sorted(
        f"{n}.{ext}" for n in ("ca", "bank", "insurer", "keyholder") for ext in ("pem", "key"))


def test_every_file_of_a_trees_sweep_passes_the_start_up_checks(tables):
    from vflsec.dp.delta_rule import default_delta

    folder = write_job_folder("trees", {"insurer": "data/insurer.csv", "bank": "data/bank.csv"}, kind="trees",
                              protocols=["plain", "dp", "label_dp"], job=["max_iter=2", "min_samples_leaf=4"],
                              preprocess="zscore_clip", **COMMON)
    assert folder.active == "bank"  # the party whose table has the label column, wherever it is listed
    for job in folder.jobs.values():
        assert list(job.configs) == ["bank", "insurer"]
        for path in job.configs.values():
            assert prepare_party(path).spec.kind.name == "trees"
    bank_rows = sum(1 for _ in open(tables / "data" / "bank.csv")) - 1
    dp = load_job_spec(folder.jobs["dp"].job_file).fields
    assert dp["delta"] == default_delta(bank_rows) and dp["epsilon"] > 0
    assert "delta" not in load_job_spec(folder.jobs["label_dp"].job_file).fields


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as info:
        cli.main(["init", *args])
    err = capsys.readouterr().err.strip()
    return info.value.code, err


BASE = ["--parties", "bank:data/bank.csv,insurer:data/insurer.csv", "--label-column", "churned",
        "--id-column", "customer_id"]


@pytest.mark.parametrize("args, what", [
    (["--parties", "bank:data/bank.csv", "--label-column", "churned"], "at least two data parties"),
    (["--parties", "bank=data/bank.csv,insurer:data/insurer.csv", "--label-column", "churned"], "NAME:TABLE"),
    (["--parties", "bank:data/bank.csv,insurer:data/nope.csv", "--label-column", "churned",
      "--id-column", "customer_id"], "does not exist"),
    (["--parties", "bank:data/bank.csv,insurer:data/insurer.csv", "--label-column", "churned"], "no ID column 'id'"),
    ([*BASE[:3], "churn", *BASE[4:]], "no party's table has the label column"),
    ([*BASE, "--active", "insurer"], "has no label column"),
    ([*BASE, "--protocols", "plain,pailier"], "did you mean 'paillier'?"),
    ([*BASE, "--kind", "trees", "--protocols", "hdp"], "unknown protection 'hdp'"),
    ([*BASE, "--protocols", "paillier", "--key-holder", "bank"], "also a data party"),
    ([*BASE, "--protocols", "hdp", "--job", "k=inf"], "the hdp job (with --job)"),
    ([*BASE, "--job", "epoch=3"], "did you mean 'epochs'?"),
    ([*BASE, "--job", "hdp:epsilon=3"], "not one of --protocols"),
    ([*BASE, "--job", "protocol=hdp"], "from --protocols -- use --protocols instead"),
    ([*BASE, "--test-data", "bank:data/bank-test.csv"], "--test-data names bank"),
    (["--parties", "bank_1:data/bank.csv,insurer:data/insurer.csv", "--label-column", "churned"], "party name"),
])
def test_every_mistake_is_one_line_with_a_fix_and_nothing_is_written(tables, capsys, args, what):
    status, err = _cli(capsys, "out", *args)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("vflsec init: error: ") and what in err and " -- " in err, err
    assert not (tables / "out").exists()


def test_a_non_empty_folder_needs_force(tables, capsys):
    (tables / "out").mkdir()
    (tables / "out" / "notes.txt").write_text("mine")
    status, err = _cli(capsys, "out", *BASE)
    assert status == 2 and err == ("vflsec init: error: out is not empty -- pass --force to write into it (files of "
                                   "the same names are replaced), or choose another folder")
    assert sorted(p.name for p in (tables / "out").iterdir()) == ["notes.txt"]
    assert cli.main(["init", "out", *BASE, "--force"]) == 0
    out = capsys.readouterr().out
    assert "sh out/plain/run.sh" in out and (tables / "out" / "plain" / "bank.toml").is_file()
    assert (tables / "out" / "notes.txt").read_text() == "mine"


def test_the_python_api_raises_the_same_one_line_errors(tables):
    with pytest.raises(CommandError, match="names no protocol"):
        write_job_folder("out", PARTIES, protocols=[], **COMMON)
    with pytest.raises(CommandError, match="unknown job kind 'splitnn'"):
        write_job_folder("out", PARTIES, kind="splitnn", **COMMON)
    assert not (tables / "out").exists()


def test_numeric_tables_without_preprocess(tables):
    """``--preprocess none``: the numeric CSVs ``vflsec party-data`` writes, read without [preprocess]."""
    from vflsec.runtime.launch import write_csv

    rng = np.random.default_rng(3)
    write_csv(tables / "a.csv", [f"i{k}" for k in range(40)], rng.normal(size=(40, 2)) / 4, (np.arange(40) % 2) * 1.0)
    write_csv(tables / "b.csv", [f"i{k}" for k in range(5, 45)], rng.normal(size=(40, 3)) / 4)
    folder = write_job_folder("num", {"a": "a.csv", "b": "b.csv"}, label_column="y", preprocess=None,
                              job=["batch_size=8"])
    for path in folder.jobs["plain"].configs.values():
        start = prepare_party(path)
        assert start.cfg.preprocess is None and start.rows.preprocessor is None


def _run_script(script: Path, child_env, *args, timeout=240):
    env = {**os.environ, **child_env, "VFLSEC": f"{sys.executable} -m vflsec"}
    return subprocess.run(["sh", str(script), "--quiet", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.filterwarnings("ignore::vflsec.he.WeakKeyWarning")
def test_a_generated_he_job_runs_end_to_end_with_its_key_holder_and_overrides(tables, child_env):
    folder = write_job_folder("sweep", PARTIES, protocols=["plain", "paillier"], test_data=TEST_DATA,
                              job=["batch_size=32", "lr=0.5", "paillier:key_bits=2048"], **COMMON)
    job = folder.jobs["paillier"]
    done = _run_script(job.run_script, child_env, "--job", "epochs=2")
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = {name: json.loads((job.directory / "out" / f"{name}.json").read_text()) for name in job.configs}
    # Every party ran the job with the override: the digest of the job file with epochs=2, 2 epochs trained.
    expected = load_job_spec(job.job_file, parse_job_overrides(["epochs=2"])).digest
    assert {o["job_sha256"] for o in outputs.values()} == {expected}
    assert expected != load_job_spec(job.job_file).digest
    bank = outputs["bank"]
    assert len(bank["history"]["loss"]) == 2 and bank["evaluation"]["n"] > 0
    assert outputs["keyholder"]["role"] == "coordinator" and outputs["keyholder"]["coef"] is None
    assert len(outputs["insurer"]["coef"]) == 3  # premium, claims and premium's missing-indicator column


@pytest.mark.slow
def test_run_sh_stops_with_the_parties_one_line_mistake(tables, child_env):
    folder = write_job_folder("sweep", PARTIES, protocols=["paillier"], **COMMON)
    done = _run_script(folder.jobs["paillier"].run_script, child_env, "--job", "epochs=five")
    lines = done.stderr.strip().splitlines()
    # The label holder's line at least (it stops the others, which may have said theirs), nothing else.
    assert done.returncode == 2 and 1 <= len(lines) <= 3, done.stderr
    assert all(line.startswith("vflsec party: error: ") and line.endswith("or --job epochs=five") for line in lines)


@pytest.mark.slow
@pytest.mark.network
def test_parties_that_pass_different_overrides_are_refused_by_the_job_agreement(tables, child_env):
    folder = write_job_folder("sweep", PARTIES, job=["batch_size=32"], **COMMON)
    job = folder.jobs["plain"]
    env = {**os.environ, **child_env}
    procs = {name: subprocess.Popen([sys.executable, "-m", "vflsec", "party", "--quiet", "--config", str(path),
                                     "--job", f"epochs={2 if name == 'bank' else 3}"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for name, path in job.configs.items()}
    try:
        status = {name: (proc.wait(120), proc.communicate()[1]) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for name, (rc, err) in status.items():
        assert rc != 0 and "epochs" in err, (name, err)


def _guide_block(marker: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)```", text, re.S)
    assert match, f"no block marked {marker} in {GUIDE}"
    return match.group(1)


def test_the_guides_init_command_writes_the_key_holder_file_it_shows(tables):
    """docs/own-data.md shows ``vflsec init`` and the key holder's party file in full: that command,
    run on tables with the guide's columns, writes that file (the ports aside)."""
    command = _guide_block("init: command").strip()
    assert command.startswith("vflsec init ")
    argv = command.replace("\\\n", " ").split()[1:]
    assert cli.main(argv) == 0
    shown = _guide_block("init: sweep/paillier/keyholder.toml")
    written = (tables / "sweep" / "paillier" / "keyholder.toml").read_text()
    port = re.compile(r"127\.0\.0\.1:\d+")
    assert port.sub("127.0.0.1:PORT", written) == port.sub("127.0.0.1:PORT", shown)
