"""Lay out and launch a multi-process job on this machine (loopback).

Used by the network tests, ``vflsec bench network`` and to try the
``vflsec party`` runtime: :func:`write_local_job` writes per-party CSVs,
``job.toml`` (any job kind: the ``[job]`` table is written as given, with
its sub-tables such as ``[job.options]`` or ``[job.defense]``),
``party-<name>.toml`` files with free loopback ports and (unless insecure) a
development CA with party certificates; :func:`start_parties`
starts one ``python -m vflsec party`` process per party and
:func:`wait_parties` collects them (killing any left over).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .party_csv import write_csv

__all__ = ["LocalJob", "PartyProcess", "free_ports", "kill_parties", "start_parties", "to_toml", "wait_parties",
           "write_csv", "write_local_job"]


def free_ports(n: int) -> List[int]:
    """``n`` distinct loopback ports the OS reports free (all held open until
    every one is chosen, then released)."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not np.isfinite(value):
            return {True: "inf", False: "-inf"}[value > 0] if np.isinf(value) else "nan"
        return repr(value)
    if isinstance(value, (str, Path)):
        text = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{text}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def to_toml(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """TOML text for ``{table: {key: value or {subkey: value}}}`` (one level of
    sub-tables, scalars and lists); None values are left out."""
    lines: List[str] = []
    for table, body in tables.items():
        lines.append(f"[{table}]")
        subs = []
        for key, value in body.items():
            if value is None:
                continue
            if isinstance(value, Mapping):
                subs.append((key, value))
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        for key, sub in subs:
            lines.append(f"\n[{table}.{key}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in sub.items() if v is not None)
        lines.append("")
    return "\n".join(lines)


@dataclass
class LocalJob:
    directory: Path
    configs: Dict[str, Path]
    outputs: Dict[str, Path]
    job_file: Path
    insecure: bool


def write_local_job(
    directory: os.PathLike,
    job: Mapping[str, Any],
    party_data: Mapping[str, Tuple[Sequence[str], np.ndarray, Optional[np.ndarray]]],
    *,
    network: Optional[Mapping[str, Any]] = None,
    insecure: bool = False,
    options: Optional[Mapping[str, Any]] = None,
    certs_dir: Optional[os.PathLike] = None,
    test_data: Optional[Mapping[str, Tuple[Sequence[str], np.ndarray, Optional[np.ndarray]]]] = None,
) -> LocalJob:
    """Write everything a loopback job needs under ``directory``.

    ``job``: the ``[job]`` table (party names included); ``party_data``:
    ``name -> (ids, X, y or None)`` for the data parties; ``certs_dir``: an
    existing certificate folder to use instead of creating one; ``test_data``:
    held-out rows in the same form (``<name>-test.csv``, ``[party] test_data``;
    for a job with ``evaluate = true``).
    """
    from ..federation.tls import init_certificates

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    parties = [job.get("active", "active"), *job.get("passives", ("passive",))]
    if job.get("coordinator"):
        parties.append(job["coordinator"])
    ports = dict(zip(parties, free_ports(len(parties))))
    table = dict(job)
    if options:
        table["options"] = dict(options)
    job_file = directory / "job.toml"
    job_file.write_text(to_toml({"job": table}))
    certs = Path(certs_dir) if certs_dir is not None else directory / "certs"
    if not insecure and certs_dir is None:
        init_certificates(certs, parties, overwrite=True)
    configs, outputs = {}, {}
    for name in parties:
        party: Dict[str, Any] = {"name": name, "listen": f"127.0.0.1:{ports[name]}", "job": "job.toml",
                                 "output": f"out/{name}.json", "checkpoint_dir": f"checkpoints/{name}"}
        if name in party_data:
            ids, X, y = party_data[name]
            write_csv(directory / f"{name}.csv", ids, X, y)
            party.update(data=f"{name}.csv", id_column="id", label_column="y" if y is not None else None)
        if test_data and name in test_data:
            ids, X, y = test_data[name]
            write_csv(directory / f"{name}-test.csv", ids, X, y)
            party["test_data"] = f"{name}-test.csv"
        body: Dict[str, Any] = {"party": party,
                                "peers": {p: f"127.0.0.1:{ports[p]}" for p in parties if p != name}}
        if not insecure:
            body["tls"] = {"ca": str(certs / "ca.pem"), "cert": str(certs / f"{name}.pem"),
                           "key": str(certs / f"{name}.key")}
        if network:
            body["network"] = dict(network)
        path = directory / f"party-{name}.toml"
        path.write_text(to_toml(body))
        configs[name] = path
        outputs[name] = directory / "out" / f"{name}.json"
    return LocalJob(directory, configs, outputs, job_file, insecure)


@dataclass
class PartyProcess:
    name: str
    process: subprocess.Popen
    stderr_path: Path
    stdout_path: Path
    started: float


def start_parties(job: LocalJob, names: Optional[Sequence[str]] = None, *, resume: bool = False,
                  env: Optional[Mapping[str, str]] = None) -> Dict[str, PartyProcess]:
    """One ``python -m vflsec party`` process per party (stdout/stderr to files)."""
    out = {}
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    if env:
        full_env.update(env)
    for name in names or list(job.configs):
        args = [sys.executable, "-m", "vflsec", "party", "--config", str(job.configs[name])]
        if resume:
            args.append("--resume")
        if job.insecure:
            args.append("--insecure")
        logs = job.directory / "logs"
        logs.mkdir(exist_ok=True)
        suffix = "-resume" if resume else ""
        err, std = logs / f"{name}{suffix}.err", logs / f"{name}{suffix}.out"
        with open(err, "wb") as fe, open(std, "wb") as fo:
            proc = subprocess.Popen(args, stdout=fo, stderr=fe, env=full_env, cwd=job.directory)
        out[name] = PartyProcess(name, proc, err, std, time.monotonic())
    return out


def wait_parties(procs: Mapping[str, PartyProcess], timeout: float) -> Dict[str, Tuple[Optional[int], str]]:
    """``name -> (exit status or None if it had to be killed, stderr text)``.
    Every process still running at the deadline is killed."""
    deadline = time.monotonic() + timeout
    results = {}
    for name, party in procs.items():
        try:
            rc = party.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
        results[name] = rc
    kill_parties(procs)
    return {name: (rc, procs[name].stderr_path.read_text(errors="replace")) for name, rc in results.items()}


def kill_parties(procs: Mapping[str, PartyProcess]) -> None:
    for party in procs.values():
        if party.process.poll() is None:
            party.process.kill()
            try:
                party.process.wait(5.0)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
