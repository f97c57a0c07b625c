"""``vflsec init OUT_DIR``: a ready-to-run job folder for a set of protocols and parties.

::

    vflsec init sweep --parties bank:data/bank.csv,insurer:data/insurer.csv \\
        --label-column churned --positive-label yes --id-column customer_id \\
        --protocols plain,hdp,paillier [--kind glm|trees] [--test-data bank:...,insurer:...] \\
        [--key-holder keyholder] [--job KEY=VALUE ...] [--force]

writes (:func:`write_job_folder`)::

    sweep/certs/              a development CA and every party's certificate (vflsec certs init's
                              init_certificates), the key holder's included when a protocol needs one
    sweep/<protocol>/job.toml the job of that protocol (kind, protocol or protection, the parties, the
                              kind's defaults for the keys a sweep changes, --job values)
    sweep/<protocol>/<party>.toml   one party file per party of that job: every data party's
                              (data, id_column, the label holder's label_column and positive_label,
                              test_data, output, checkpoint_dir, [preprocess]) and, for a protocol with a
                              key holder (the HE protocols: "paillier", "ckks" and their "_dp" variants),
                              the key holder's: no data, only its address, its peers, its certificate and
                              its output
    sweep/<protocol>/run.sh   starts every party of that job on this machine; its arguments go to every
                              party (``sh sweep/plain/run.sh --job epochs=5``)
    sweep/run-all.sh          every protocol's run.sh in turn

Addresses are 127.0.0.1 with ports free when written, distinct across every job (the jobs may
run at the same time); outputs go to ``<protocol>/out/``. The label holder (the job's active
party) is the party whose table has the label column (``--active`` names it when more than one
has). A table path given relative to the working folder is written relative to the party file's
folder (a party file reads it so), an absolute one as given. Nothing in the tables is read but their header (and, for
the trees "dp" protection, the label holder's row count: its ``delta`` is
:func:`vflsec.dp.default_delta` of it, an upper bound on the aligned rows); ``vflsec party``
checks the rows when it starts. Every job file is checked as ``vflsec party`` checks it
(the kind's fields and the protocol's own checks) before anything is written; a mistake is one
line with the fix (:class:`~vflsec.errors.CommandError`, exit status 2), as is a non-empty
``OUT_DIR`` without ``--force``. ``--job KEY=VALUE`` (:mod:`.job_overrides`) writes a key into every
job file, ``--job PROTOCOL:KEY=VALUE`` into one; the keys the flags write (kind, protocol or
protection, the parties, the key holder, evaluate) are refused there, naming the flag.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import CommandError
from .job_overrides import JobOverride, apply_job_overrides, parse_job_overrides

__all__ = ["JobFolder", "ProtocolFolder", "add_arguments", "run", "write_job_folder"]

KINDS = ("glm", "trees")
PREPROCESS = ("zscore_clip", "none")
DEFAULT_KEY_HOLDER = "keyholder"
#: [job] keys written from the command's flags (a --job value for them is refused, naming the flag)
_SET_BY_FLAGS = {"kind": "--kind", "protocol": "--protocols", "protection": "--protocols", "active": "--active",
                 "passives": "--parties", "coordinator": "--key-holder", "evaluate": "--test-data"}


@dataclass(frozen=True)
class ProtocolFolder:
    """One protocol's job: its folder, job file, party files (by party name) and run script."""

    protocol: str
    directory: Path
    job_file: Path
    configs: Mapping[str, Path]
    run_script: Path
    key_holder: Optional[str] = None


@dataclass(frozen=True)
class JobFolder:
    """What :func:`write_job_folder` wrote."""

    directory: Path
    certs: Path
    active: str
    jobs: Mapping[str, ProtocolFolder]
    run_all: Path
    warnings: Tuple[str, ...] = ()  # what checking the job files warned of (e.g. a weak key size), one line each


# ----------------------------------------------------------------------------------- command line

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write (created; must be empty "
                                                           "unless --force)")
    parser.add_argument("--parties", required=True, metavar="NAME:TABLE,...",
                        help="every data party and its table (CSV or Parquet), e.g. "
                             "bank:data/bank.csv,insurer:data/insurer.csv")
    parser.add_argument("--label-column", required=True, help="the label column (in one party's table)")
    parser.add_argument("--id-column", default="id", help="the ID column every table has (default: id)")
    parser.add_argument("--protocols", default="plain", metavar="NAME,...",
                        help="one job per protocol: for --kind glm a GLM protocol (plain, hdp, paillier, ckks, "
                             "paillier_dp, ckks_dp), for --kind trees a protection (plain, secureboost, dp, "
                             "label_dp); default: plain")
    parser.add_argument("--kind", default="glm", choices=KINDS, help="the job kind (default: glm)")
    parser.add_argument("--active", default=None, metavar="NAME",
                        help="the label holder (default: the party whose table has the label column)")
    parser.add_argument("--positive-label", default=None, help="the label value coded 1 (text labels)")
    parser.add_argument("--test-data", default=None, metavar="NAME:TABLE,...",
                        help="every data party's held-out rows: the jobs then score the model on them "
                             "(evaluate = true)")
    parser.add_argument("--key-holder", default=DEFAULT_KEY_HOLDER, metavar="NAME",
                        help="the name of the HE protocols' key holder, a party without data (default: "
                             "keyholder); written only for protocols that have one")
    parser.add_argument("--preprocess", default="zscore_clip", choices=PREPROCESS,
                        help="zscore_clip: a [preprocess] table in every data party file (raw tables: text, "
                             "dates, missing cells); none: no [preprocess] (numeric CSVs as `vflsec party-data` "
                             "writes them) (default: zscore_clip)")
    parser.add_argument("--job", action="append", default=None, metavar="KEY=VALUE",
                        help="a [job] key for every job file, or PROTOCOL:KEY=VALUE for one (repeatable; VALUE is "
                             "TOML, a bare word a string), e.g. --job epochs=5 --job paillier:key_bits=2048")
    parser.add_argument("--force", action="store_true", help="write into a non-empty OUT_DIR (files of the same "
                                                             "names are replaced, the CA too)")


def _named_files(text: str, flag: str) -> Dict[str, Path]:
    out: Dict[str, Path] = {}
    for item in (part.strip() for part in text.split(",")):
        name, sep, path = item.partition(":")
        if not sep or not name.strip() or not path.strip():
            raise CommandError(f"{flag} {item!r} is not NAME:TABLE",
                               f"give each party as its name and table, e.g. {flag} "
                               "bank:data/bank.csv,insurer:data/insurer.csv")
        if name.strip() in out:
            raise CommandError(f"{flag} names party {name.strip()!r} twice", "give each party once")
        out[name.strip()] = Path(path.strip())
    return out


def run(args: argparse.Namespace) -> int:
    from ..errors import require_extra
    from .party_input import _positive

    require_extra("cryptography", "pyarrow")
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    folder = write_job_folder(
        args.out_dir, _named_files(args.parties, "--parties"), label_column=args.label_column,
        protocols=protocols, kind=args.kind, id_column=args.id_column, active=args.active,
        key_holder=args.key_holder, positive_label=_positive(args.positive_label),
        test_data=None if args.test_data is None else _named_files(args.test_data, "--test-data"),
        preprocess=None if args.preprocess == "none" else args.preprocess,
        job=args.job or (), force=args.force)
    shown = _shown(folder.directory)
    print(f"vflsec init: wrote {len(folder.jobs)} {args.kind} job{'s' if len(folder.jobs) > 1 else ''} to {shown} "
          f"(label holder {folder.active!r}; certificates in {_shown(folder.certs)})")
    scripts = {protocol: f"sh {_shown(job.run_script)}" for protocol, job in folder.jobs.items()}
    width = max(len(text) for text in scripts.values())
    for protocol, job in folder.jobs.items():
        roles = ", ".join(name + (" (key holder)" if name == job.key_holder else "") for name in job.configs)
        print(f"  {scripts[protocol]:<{width}}  {protocol}: {roles}")
    first = next(iter(folder.jobs.values()))
    example = "max_iter=50" if args.kind == "trees" else "epochs=5"
    print(f"every job in turn: sh {_shown(folder.run_all)}; other [job] values without editing: "
          f"sh {_shown(first.run_script)} --job {example} (every party gets the same)")
    for line in folder.warnings:
        print(f"vflsec init: warning: {line}", file=sys.stderr)
    return 0


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it, normalised."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else os.path.normpath(path)


# ----------------------------------------------------------------------------------- checks

def _check_names(parties: Sequence[str], key_holder: str) -> None:
    from ..federation.tls import check_party_name

    for name in [*parties, key_holder]:
        flag = "--key-holder" if name == key_holder else "--parties"
        try:
            check_party_name(name)
        except ValueError as exc:
            raise CommandError(str(exc), f"rename it in {flag}") from None
    if len(parties) < 2:
        raise CommandError(f"--parties names {len(parties)} party; a vertical job has at least two data parties",
                           "name the label holder and every party that adds columns, e.g. "
                           "--parties bank:bank.csv,insurer:insurer.csv")
    if key_holder in parties:
        raise CommandError(f"the key holder {key_holder!r} is also a data party",
                           "give the key holder a name of its own with --key-holder (it holds no data)")


def _columns(name: str, path: Path, flag: str) -> List[str]:
    from ..data import table_columns

    if not path.is_file():
        problem = "is a folder" if path.is_dir() else "does not exist"
        raise CommandError(f"{name}'s table {path} {problem} ({flag})",
                           f"give {name}'s CSV or Parquet file, relative to this folder")
    try:
        return [str(c) for c in table_columns(path)]
    except ValueError as exc:  # TableError: the format, the header
        what, _, fix = " ".join(str(exc).split()).partition(" -- ")
        raise CommandError(what, fix or f"correct {path}") from None


def _label_holder(tables: Mapping[str, Path], label_column: str, id_column: str, active: Optional[str],
                  test_data: Optional[Mapping[str, Path]]) -> str:
    """The active party: ``active`` or the one party whose table has the label column; every table
    must have the ID column (and every held-out table its training table's label column)."""
    holders = []
    for name, path in tables.items():
        columns = _columns(name, path, "--parties")
        if id_column not in columns:
            raise CommandError(f"{name}'s table {path} has no ID column {id_column!r} (its columns: "
                               f"{', '.join(columns[:8])}{' ...' if len(columns) > 8 else ''})",
                               "name the column that holds the IDs with --id-column (every table needs it)")
        if label_column in columns:
            holders.append(name)
    if active is not None:
        if active not in tables:
            raise CommandError(f"--active {active!r} is not one of --parties ({', '.join(tables)})",
                               "name the party that holds the labels")
        if active not in holders:
            raise CommandError(f"--active {active!r}: its table {tables[active]} has no label column "
                               f"{label_column!r}", "correct --label-column or --active")
    elif not holders:
        raise CommandError(f"no party's table has the label column {label_column!r}",
                           "correct --label-column (the column of the label holder's table that holds the labels)")
    elif len(holders) > 1:
        raise CommandError(f"the tables of {', '.join(holders)} all have a column {label_column!r}",
                           "name the label holder with --active (the others' columns of that name are features)")
    active = active or holders[0]
    if test_data is not None:
        if set(test_data) != set(tables):
            raise CommandError(f"--test-data names {', '.join(test_data)}, --parties {', '.join(tables)}",
                               "give every data party's held-out table in --test-data, or leave it out")
        for name, path in test_data.items():
            columns = _columns(name, path, "--test-data")
            if id_column not in columns or (name == active and label_column not in columns):
                raise CommandError(f"{name}'s held-out table {path} lacks the column "
                                   f"{id_column if id_column not in columns else label_column!r}",
                                   f"give it the columns of {tables[name]}")
    return active


def _row_count(path: Path) -> int:
    """Rows of a table file: Parquet's metadata, or a CSV's lines but the header (a quoted cell across
    lines counts more rows: the default delta then comes out smaller, never larger)."""
    if path.name.lower().endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    import gzip

    with (gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")) as fh:
        return max(1, sum(1 for _ in fh) - 1)


# ----------------------------------------------------------------------------------- the files

def _glm_table(protocol: str, active: str, passives: Sequence[str], key_holder: Optional[str],
               rows: Optional[int]) -> Dict[str, Any]:
    """The keys a sweep changes. The training settings are the estimator's measured defaults
    (``VerticalLogisticRegression``: lr 2.5, 10 epochs, batches of 1/16 of the rows, clip k = 5;
    GLMJob's own defaults, lr 0.1 and batches of 64, leave a rare label's model near its
    intercept after 10 epochs), with the learning rate kept under HDP-VFL's bound for this
    many parties and the batch taken from the label holder's ``rows`` (the aligned rows are at
    most those); the protocol's own keys (its key holder, a DP protocol's epsilon).
    ``key_bits`` is left to the protocol's default (3072 for Paillier; CKKS takes none):
    ``--job key_bits=2048`` or ``--job paillier:key_bits=2048`` sets it."""
    from ..dp import hdp_max_lr, loss_constants
    from ..glm.job import GLMJob
    from ..glm.model import privacy_spent

    defaults: Dict[str, Any] = {f.name: f.default for f in dataclasses.fields(GLMJob)}
    table: Dict[str, Any] = {"protocol": protocol, "active": active, "passives": list(passives)}
    if key_holder is not None:
        table["coordinator"] = key_holder
    bound = hdp_max_lr(loss_constants("logistic"), n_parties=1 + len(passives), lam=defaults["lam"])
    table.update(loss=defaults["loss"], lr=min(ESTIMATOR_LR, round(0.95 * bound, 2)), epochs=defaults["epochs"],
                 batch_size=max(defaults["batch_size"], math.ceil((rows or 0) / 16)), lam=defaults["lam"],
                 k=ESTIMATOR_K, seed=defaults["seed"])
    try:
        job = GLMJob(protocol=protocol, n_samples=1000, active=active, passives=tuple(passives),
                     coordinator=key_holder, widths={name: 1 for name in (active, *passives)})
        private = privacy_spent(job, "active") is not None
    except (TypeError, ValueError):  # refused again, with its reason, when the job file is checked
        private = False
    if private:
        table["epsilon"] = defaults["epsilon"]
    return table


#: ``VerticalLogisticRegression``'s defaults (its docstring says where they were measured)
ESTIMATOR_LR = 2.5
ESTIMATOR_K = 5.0


def _trees_table(protection: str, active: str, passives: Sequence[str], rows: Optional[int]) -> Dict[str, Any]:
    """The keys a sweep changes, with TreeJob's defaults; a DP protection's epsilon (the trees have no
    default: the GLM jobs' 1.0) and the "dp" protection's delta (default_delta of ``rows``)."""
    from ..glm.job import GLMJob
    from ..trees.job import DP_PROTECTIONS, TreeJob

    defaults = {f.name: f.default for f in dataclasses.fields(TreeJob)}
    table: Dict[str, Any] = {"kind": "trees", "protection": protection, "active": active,
                             "passives": list(passives)}
    for key in ("max_iter", "learning_rate", "max_leaf_nodes", "min_samples_leaf", "seed"):
        table[key] = defaults[key]
    if protection == "secureboost":
        table["key_bits"] = defaults["key_bits"]
    if protection in DP_PROTECTIONS:
        table["epsilon"] = next(f.default for f in dataclasses.fields(GLMJob) if f.name == "epsilon")
    if protection == "dp" and rows is not None:
        from ..dp.delta_rule import default_delta

        table["delta"] = default_delta(rows)
    return table


def _overrides(items: Sequence[str], protocols: Sequence[str]) -> Dict[str, Tuple[JobOverride, ...]]:
    """Each protocol's overrides: every ``KEY=VALUE`` and its own ``PROTOCOL:KEY=VALUE``."""
    common: List[str] = []
    own: Dict[str, List[str]] = {protocol: [] for protocol in protocols}
    for item in items:
        key = item.partition("=")[0]
        protocol, sep, rest = item.partition(":")
        if ":" not in key:
            common.append(item)
        elif protocol.strip() in own:
            own[protocol.strip()].append(rest)
        else:
            raise CommandError(f"--job {item!r} names {protocol!r}, not one of --protocols ({', '.join(protocols)})",
                               "give PROTOCOL:KEY=VALUE for one of them, or KEY=VALUE for every job")
    parsed = {protocol: parse_job_overrides([*common, *own[protocol]]) for protocol in protocols}
    for overrides in parsed.values():
        for override in overrides:
            flag = _SET_BY_FLAGS.get(override.path[0])
            if flag is not None:
                raise CommandError(f"--job {override.text}: vflsec init writes [job] {override.path[0]} from {flag}",
                                   f"use {flag} instead")
    return parsed


def _known_protocols(kind: str) -> Tuple[str, ...]:
    if kind == "trees":
        from ..trees.job import PROTECTIONS

        return tuple(PROTECTIONS)
    from ..glm.registry import available_protocols

    return tuple(available_protocols())


def _key_holder_of(kind: str, protocol: str, key_holder: str) -> Optional[str]:
    if kind != "glm":
        return None
    from ..glm.registry import get_protocol

    return key_holder if get_protocol(protocol).needs_coordinator else None


def _checked_job_text(table: Mapping[str, Any], protocol: str, overrides: Sequence[JobOverride],
                      header: str, warned: List[str]) -> str:
    """The job file's text, checked as ``vflsec party`` checks it (without the rows); what the
    checks warn of is appended to ``warned``."""
    import warnings

    from .job_spec import load_job_spec
    from .launch import to_toml

    text = header + to_toml({"job": apply_job_overrides(table, overrides)})
    with tempfile.TemporaryDirectory() as scratch, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = Path(scratch) / "job.toml"
        path.write_text(text)
        try:
            spec = load_job_spec(path)
            probe = spec.probe_job()
            spec.kind.check_job(probe, spec.fields)
        except (TypeError, ValueError) as exc:
            what, _, fix = " ".join(str(exc).replace(str(path) + ": ", "").split()).partition(" -- ")
            given = " (with --job)" if overrides else ""
            raise CommandError(f"the {protocol} job{given}: {what}",
                               fix or ("correct or remove that --job value" if overrides
                                       else "choose another protocol")) from None
    for line in dict.fromkeys(f"the {protocol} job: {' '.join(str(w.message).split())}" for w in caught):
        warned.append(line)  # once each (the job is built more than once)
    return text


def _relative(path: Path, folder: Path) -> str:
    """``path`` as a party file in ``folder`` names it: a relative path relative to the file's folder."""
    if path.is_absolute():
        return str(path)
    return os.path.relpath(Path.cwd() / path, folder)


def _party_file(name: str, job_folder: Path, ports: Mapping[str, int], certs: Path, header: str,
                data: Optional[Dict[str, Any]] = None, preprocess: Optional[str] = None) -> str:
    from .launch import to_toml

    party: Dict[str, Any] = {"name": name, "listen": f"127.0.0.1:{ports[name]}", "job": "job.toml"}
    party.update(data or {})
    party["output"] = f"out/{name}.json"
    ca = os.path.relpath(certs, job_folder)
    body: Dict[str, Any] = {
        "party": party,
        "peers": {peer: f"127.0.0.1:{port}" for peer, port in ports.items() if peer != name},
        "tls": {"ca": f"{ca}/ca.pem", "cert": f"{ca}/{name}.pem", "key": f"{ca}/{name}.key"},
    }
    if data is not None and preprocess is not None:
        body["preprocess"] = {"scaling": preprocess}
    return header + to_toml(body)


_RUN = """#!/bin/sh
# Runs every party of the {protocol!r} job on this machine, each as its own process (on separate machines
# each organisation runs its own line). Arguments go to every party, e.g. other [job] values:
#   sh run.sh --job epochs=5
# VFLSEC names the command (default: vflsec; e.g. VFLSEC="python -m vflsec").
cd "$(dirname "$0")" || exit 2
VFLSEC=${{VFLSEC:-vflsec}}
{background}
$VFLSEC party --config {active}.toml "$@"; status=$?
# A party that failed leaves its peers waiting for it: stop them (the first failure's status is kept).
[ "$status" -eq 0 ] || kill {pids} 2>/dev/null
{waits}
exit "$status"
"""

_RUN_ALL = """#!/bin/sh
# Every job `vflsec init` wrote, one after another; arguments go to every party of each (e.g. --job epochs=5).
cd "$(dirname "$0")" || exit 2
for protocol in {protocols}; do
  echo "== $protocol" >&2
  sh "$protocol/run.sh" "$@" || exit "$?"
done
"""


def _run_script(protocol: str, active: str, others: Sequence[str]) -> str:
    variables = {name: f"pid{i}" for i, name in enumerate(others)}
    background = "\n".join(f'$VFLSEC party --config {name}.toml "$@" & {variables[name]}=$!' for name in others)
    pids = " ".join(f'"${v}"' for v in variables.values())
    waits = "\n".join(f'wait "${v}" 2>/dev/null; code=$?; [ "$status" -ne 0 ] || status=$code'
                      for v in variables.values())
    return _RUN.format(protocol=protocol, background=background, active=active, pids=pids, waits=waits)


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(0o755)


def _check_out_dir(directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise CommandError(f"{directory} is a file", "give a folder to write the jobs to")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise CommandError(f"{os.path.normpath(directory)} is not empty",
                           "pass --force to write into it (files of the same names are replaced), or choose "
                           "another folder")


def write_job_folder(directory: Any, parties: Mapping[str, Any], *, label_column: str,
                     protocols: Sequence[str] = ("plain",), kind: str = "glm", id_column: str = "id",
                     active: Optional[str] = None, key_holder: str = DEFAULT_KEY_HOLDER, positive_label: Any = None,
                     test_data: Optional[Mapping[str, Any]] = None, preprocess: Optional[str] = "zscore_clip",
                     job: Sequence[str] = (), force: bool = False) -> JobFolder:
    """Write the job folder of the module docstring to ``directory``: one job per protocol of
    ``protocols`` for the data parties ``parties`` (name -> table file; a relative path is taken
    from the working folder) and, for protocols with one, the key holder ``key_holder``.
    ``preprocess``: the ``[preprocess]`` scaling of every data party (None: no ``[preprocess]``);
    ``job``: ``KEY=VALUE`` items (:mod:`.job_overrides`) written into every job file, or
    ``PROTOCOL:KEY=VALUE`` into that protocol's only.
    :class:`~vflsec.errors.CommandError` for any mistake, before anything is written."""
    from ..federation.tls import init_certificates
    from .launch import free_ports

    directory = Path(directory)
    _check_out_dir(directory, force)
    if kind not in KINDS:
        raise CommandError(f"unknown job kind {kind!r}", f"choose one of {', '.join(KINDS)}")
    if preprocess is not None and preprocess not in PREPROCESS:
        raise CommandError(f"unknown preprocess {preprocess!r}", "choose zscore_clip, or none")
    tables = {name: Path(path) for name, path in parties.items()}
    held_out = None if test_data is None else {name: Path(path) for name, path in test_data.items()}
    _check_names(list(tables), key_holder)
    known = _known_protocols(kind)
    if not protocols:
        raise CommandError("--protocols names no protocol", f"choose from {', '.join(known)}")
    for protocol in protocols:
        if protocol not in known:
            import difflib

            close = difflib.get_close_matches(protocol, known, n=1)
            raise CommandError(f"unknown {'protection' if kind == 'trees' else 'protocol'} {protocol!r} for a "
                               f"{kind} job" + (f" (did you mean {close[0]!r}?)" if close else ""),
                               f"choose from {', '.join(known)}")
    if len(set(protocols)) != len(protocols):
        raise CommandError(f"--protocols names a protocol twice ({', '.join(protocols)})", "give each once")
    overrides = _overrides(job, protocols)
    active = _label_holder(tables, label_column, id_column, active, held_out)
    passives = [name for name in tables if name != active]
    rows = _row_count(tables[active]) if kind == "glm" or "dp" in protocols else None

    # Every file's text first (the job files checked): a mistake leaves nothing behind.
    n_ports = sum(len(tables) + (_key_holder_of(kind, p, key_holder) is not None) for p in protocols)
    free = iter(free_ports(n_ports))
    files: Dict[Path, str] = {}
    jobs: Dict[str, ProtocolFolder] = {}
    warned: List[str] = []
    certs = directory / "certs"
    for protocol in protocols:
        holder = _key_holder_of(kind, protocol, key_holder)
        folder = directory / protocol
        table = (_glm_table(protocol, active, passives, holder, rows) if kind == "glm"
                 else _trees_table(protocol, active, passives, rows))
        if held_out is not None:
            table["evaluate"] = True
        header = (f"# The {protocol!r} job, written by `vflsec init`. Every party holds this same file (the parties\n"
                  f"# compare its SHA-256 first). Any other [job] key of a {kind} job may be added (python -m pydoc\n"
                  f"# vflsec.runtime.{kind}_kind); a run with other values: vflsec party ... --job KEY=VALUE.\n\n")
        if "delta" in table and kind == "trees":
            header += (f"# delta: vflsec.dp.default_delta of the {rows} rows of {active}'s table (the aligned rows are "
                       "at most those).\n\n")
        files[folder / "job.toml"] = _checked_job_text(table, protocol, overrides[protocol], header, warned)
        names = [active, *passives] + ([holder] if holder else [])
        ports = {name: next(free) for name in names}
        configs: Dict[str, Path] = {}
        for name in names:
            if name == holder:
                data = None
                header = (f"# The key holder of the {protocol!r} job: it makes the HE key pair and decrypts what the\n"
                          "# protocol sends it. It holds no data (no data, label_column or test_data), trains no\n"
                          "# weights, and talks to every data party.\n\n")
            else:
                data = {"data": _relative(tables[name], folder), "id_column": id_column}
                if name == active:
                    data["label_column"] = label_column
                    if positive_label is not None:
                        data["positive_label"] = positive_label
                if held_out is not None:
                    data["test_data"] = _relative(held_out[name], folder)
                if kind == "glm":
                    data["checkpoint_dir"] = f"checkpoints/{name}"
                role = "the label holder (active party)" if name == active else "a passive party (features only)"
                header = f"# {name}: {role} of the {protocol!r} job, written by `vflsec init`.\n\n"
            configs[name] = folder / f"{name}.toml"
            files[configs[name]] = _party_file(name, folder, ports, certs, header, data, preprocess)
        files[folder / "run.sh"] = _run_script(protocol, active, [n for n in names if n != active])
        jobs[protocol] = ProtocolFolder(protocol, folder, folder / "job.toml", configs, folder / "run.sh", holder)
    files[directory / "run-all.sh"] = _RUN_ALL.format(protocols=" ".join(protocols))

    everyone = [*tables] + ([key_holder] if any(j.key_holder for j in jobs.values()) else [])
    try:
        init_certificates(certs, everyone, overwrite=force)
    except FileExistsError as exc:  # only with force=False, in a folder that was empty: a race
        raise CommandError(str(exc).split(" (")[0], "pass --force to replace them") from exc
    for path, text in files.items():
        _write(path, text, executable=path.name.endswith(".sh"))
    return JobFolder(directory, certs, active, jobs, directory / "run-all.sh", tuple(warned))
