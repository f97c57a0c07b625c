"""``vflsec party`` validates the whole job before it connects (issue 24, item 6).

A catalogue of start-up mistakes in the party file, the job file, the TLS
files, the CSVs and the command line. Each case changes one thing in a
valid layout (the control test runs :func:`prepare_party` on the layout
unchanged, for every party and kind the cases start from) and runs
``vflsec party`` in-process through :func:`vflsec.cli.main`; it must exit
with status 2 and exactly one stderr line ``vflsec party: error: <what> --
<fix>`` naming the mistake, without a traceback, and must not have tried any
connection: every peer address is a TCP socket of this test that listens
(an attempt would land in its backlog, which must stay empty), the party's
own listen port is still free afterwards, and the error comes at once
rather than after ``connect_timeout``.
"""
from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("cryptography")

from vflsec import cli  # noqa: E402
from vflsec.errors import CommandError  # noqa: E402
from vflsec.federation.tls import init_certificates  # noqa: E402
from vflsec.runtime.launch import free_ports, to_toml  # noqa: E402
from vflsec.runtime.startup import prepare_party  # noqa: E402

pytestmark = pytest.mark.network

PARTIES = ("active", "passive1", "coordinator")
ROWS = 24
# connect_timeout: a case that the checks missed fails within seconds instead of a minute
NETWORK = {"connect_timeout": 3.0, "peer_timeout": 2.0, "heartbeat_interval": 0.5}
BASE_JOB: Dict[str, Any] = dict(protocol="plain", loss="logistic", lr=0.5, epochs=2, batch_size=8, seed=1,
                                active="active", passives=["passive1"])
SPLIT_JOB: Dict[str, Any] = dict(kind="splitnn", n_classes=2, epochs=1, batch_size=8, seed=1, active="active",
                                 passives=["passive1"], bottom_hidden=[4], embedding_dim=2)
TREES_JOB: Dict[str, Any] = dict(kind="trees", active="active", passives=["passive1"], max_iter=2, min_samples_leaf=4,
                                 max_bins=8)
DROP = object()  # a value that removes the key


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    return "\n".join([",".join(header)] + [",".join(str(v) for v in row) for row in rows]) + "\n"


def _data(n: int = ROWS, seed: int = 0, prefix: str = "id"):
    rng = np.random.default_rng(seed)
    ids = [f"{prefix}-{i:03d}" for i in range(n)]
    y = (np.arange(n) % 2).astype(int)
    # rows of norm < 1, so that row_norm = "none" passes HDP's unit-row check too
    active = [[ids[i], y[i], *np.round(rng.uniform(-0.5, 0.5, size=2), 6)] for i in range(n)]
    passive = [[ids[i], *np.round(rng.uniform(-0.5, 0.5, size=3), 6)] for i in range(n)]
    return active, passive


ACTIVE_ROWS, PASSIVE_ROWS = _data()
TEST_ACTIVE_ROWS, TEST_PASSIVE_ROWS = _data(8, seed=1, prefix="test")
ACTIVE_HEADER, PASSIVE_HEADER = ("id", "y", "x0", "x1"), ("id", "x0", "x1", "x2")


@dataclass
class Layout:
    """One case's files, as data until :meth:`write`: the [job] table, every
    party's config tables, the CSV texts and raw file texts (written last)."""

    root: Path
    certs: Path
    ports: Dict[str, int]
    sentinels: Dict[str, int]
    job: Dict[str, Any] = field(default_factory=lambda: dict(BASE_JOB))
    configs: Dict[str, Dict[str, Dict[str, Any]]] = field(default_factory=dict)
    files: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict)
    party: str = "active"
    argv: List[str] = field(default_factory=list)

    def config(self, name: str) -> Path:
        return self.root / f"party-{name}.toml"

    def write(self) -> None:
        (self.root / "job.toml").write_text(to_toml({"job": self.job}))
        for name, tables in self.configs.items():
            self.config(name).write_text(to_toml({k: v for k, v in tables.items() if v is not None}))
        for name, text in {**self.files, **self.raw}.items():
            path = self.root / name
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text)


def _layout(root: Path, certs: Path) -> Layout:
    ports = dict(zip(PARTIES, free_ports(len(PARTIES))))
    layout = Layout(root, certs, ports, sentinels={})
    layout.files = {"active.csv": _csv(ACTIVE_HEADER, ACTIVE_ROWS), "passive1.csv": _csv(PASSIVE_HEADER, PASSIVE_ROWS),
                    "active-test.csv": _csv(ACTIVE_HEADER, TEST_ACTIVE_ROWS),
                    "passive1-test.csv": _csv(PASSIVE_HEADER, TEST_PASSIVE_ROWS)}
    for name in PARTIES:
        party: Dict[str, Any] = {"name": name, "listen": f"127.0.0.1:{ports[name]}", "job": "job.toml",
                                 "output": f"out/{name}.json", "checkpoint_dir": f"checkpoints/{name}"}
        if name != "coordinator":
            party["data"] = f"{name}.csv"
        if name == "active":
            party["label_column"] = "y"
        layout.configs[name] = {
            "party": party, "peers": {},
            "tls": {"ca": str(certs / "ca.pem"), "cert": str(certs / f"{name}.pem"), "key": str(certs / f"{name}.key")},
            "network": dict(NETWORK)}
    return layout


def _set(table: Dict[str, Any], values: Dict[str, Any]) -> None:
    for key, value in values.items():
        if value is DROP:
            table.pop(key, None)
        else:
            table[key] = value


# -- edits: each returns a function of the Layout -----------------------------------------------------
Edit = Callable[[Layout], None]


def job(**values: Any) -> Edit:
    return lambda f: _set(f.job, values)


def party(who: str = "active", **values: Any) -> Edit:
    return lambda f: _set(f.configs[who]["party"], values)


def table(who: str, section: str, value: Any) -> Edit:
    """Replace (None: remove) a whole table of ``who``'s config."""
    def edit(f: Layout) -> None:
        f.configs[who][section] = value
    return edit


def tls(who: str = "active", **values: Any) -> Edit:
    return lambda f: _set(f.configs[who]["tls"], values)


def peers(who: str = "active", **values: Any) -> Edit:
    return lambda f: _set(f.configs[who]["peers"], values)


def network(who: str = "active", **values: Any) -> Edit:
    return lambda f: _set(f.configs[who]["network"], values)


def csv_file(filename: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Edit:
    return lambda f: f.files.__setitem__(filename, _csv(header, rows))


def raw(filename: str, text: Any) -> Edit:
    return lambda f: f.raw.__setitem__(filename, text)


def run_as(name: str) -> Edit:
    def edit(f: Layout) -> None:
        f.party = name
    return edit


def args(*argv: str) -> Edit:
    return lambda f: f.argv.extend(argv)


def cell(filename: str, row: int, column: int, value: Any) -> Edit:
    """One cell of the base CSV ``filename`` changed."""
    base = {"active.csv": (ACTIVE_HEADER, ACTIVE_ROWS), "passive1.csv": (PASSIVE_HEADER, PASSIVE_ROWS)}[filename]
    rows = [list(r) for r in base[1]]
    rows[row][column] = value
    return csv_file(filename, base[0], rows)


def he(protocol: str = "paillier", **values: Any) -> Edit:
    """An HE job with its coordinator (2048-bit keys: never generated here)."""
    return job(**{"protocol": protocol, "coordinator": "coordinator", "key_bits": 2048, **values})


def splitnn(**values: Any) -> Edit:
    def edit(f: Layout) -> None:
        f.job = dict(SPLIT_JOB)
        _set(f.job, values)
    return edit


def trees(**values: Any) -> Edit:
    """A vertical boosting job (kind "trees") with ``values`` set."""
    def edit(f: Layout) -> None:
        f.job = dict(TREES_JOB)
        _set(f.job, values)
    return edit


def both(*edits: Edit) -> Edit:
    def edit(f: Layout) -> None:
        for e in edits:
            e(f)
    return edit


def cert_file(key: str, filename: str) -> Edit:
    """[tls] ``key`` of the active party set to another file of the test's certificates."""
    return lambda f: _set(f.configs["active"]["tls"], {key: str(f.certs / filename)})


def other_ca(kind: str) -> Edit:
    def edit(f: Layout) -> None:
        other = f.root / "other-certs"
        init_certificates(other, ["active"])
        _set(f.configs["active"]["tls"], {kind: str(other / ("ca.pem" if kind == "ca" else "active.pem"))})
    return edit


TEST_DATA = both(job(evaluate=True), party(test_data="active-test.csv"),
                 party("passive1", test_data="passive1-test.csv"))
HDP = dict(protocol="hdp", epsilon=1.0, delta=1e-5)


def hdp(**values: Any) -> Edit:
    return job(**{**HDP, **values})


@dataclass(frozen=True)
class Case:
    id: str
    edit: Edit
    needle: str  # must appear in the error line (so the case fails for its own reason)


CASES = [
    # --- the command line and the party file ----------------------------------------------------
    Case("config-missing", args("--config", "nowhere/party.toml"), "not found"),
    Case("config-is-a-folder", args("--config", "."), "is a folder"),
    Case("config-invalid-toml", raw("party-active.toml", "[party\nname = 'active'\n"), "invalid TOML"),
    Case("config-unknown-table", table("active", "peer", {"passive1": "127.0.0.1:1"}), "unknown tables ['peer']"),
    Case("config-party-not-a-table", raw("party-active.toml", "party = 3\n"), "[party] must be a table"),
    Case("party-name-missing", party(name=DROP), "[party] needs 'name'"),
    Case("party-listen-missing", party(listen=DROP), "[party] needs 'listen'"),
    Case("party-job-missing", party(job=DROP), "[party] needs 'job'"),
    Case("party-key-misspelt", party(lable_column="y"), "unknown [party] keys ['lable_column']"),
    Case("party-name-not-a-string", party(name=7), "[party] name must be a non-empty string"),
    Case("party-name-empty", party(name=""), "[party] name must be a non-empty string"),
    Case("party-name-not-a-dns-name", party(name="active party"), "must be 1-63 letters"),
    Case("party-data-not-a-string", party(data=5), "[party] data must be a non-empty string"),
    Case("listen-not-a-string", party(listen=50051), "[party] listen must be a non-empty string"),
    Case("listen-without-port", party(listen="127.0.0.1"), "is not HOST:PORT"),
    Case("listen-port-0", party(listen="127.0.0.1:0"), "port 0 is out of range 1-65535"),
    Case("listen-port-99999", party(listen="127.0.0.1:99999"), "port 99999 is out of range 1-65535"),
    Case("listen-port-not-a-number", party(listen="127.0.0.1:http"), "port 'http' is not a number"),
    Case("listen-bad-host", party(listen="bad host!:5000"), "host 'bad host!' is not a host name"),
    Case("listen-bad-ipv4", party(listen="300.1.1.1:5000"), "host '300.1.1.1' is not an IPv4 address"),
    Case("listen-ipv6-without-brackets", party(listen="::1:5000"), "IPv6 address in brackets"),
    Case("peer-port-out-of-range", peers(passive1="127.0.0.1:70000"), "port 70000 is out of range"),
    Case("peer-address-not-a-string", peers(passive1=5), "[peers] maps party names to 'host:port' strings"),
    Case("peer-address-no-port", peers(passive1="localhost"), "[peers] passive1 'localhost' is not HOST:PORT"),
    Case("peer-is-own-listen-address", lambda f: f.configs["active"]["peers"].__setitem__(
        "passive1", f.configs["active"]["party"]["listen"]), "this party's own listen address"),
    Case("peers-missing-a-party", peers(passive1=DROP), "[peers] lacks the address of ['passive1']"),
    Case("peers-party-not-in-job", peers(passive9="127.0.0.1:5009"), "not in the job"),
    Case("peers-lists-itself", peers(active="127.0.0.1:5009"), "lists this party 'active' itself"),
    Case("party-not-in-job", party(name="passive7"), "'passive7' ([party] name in"),
    Case("network-unknown-key", network(peer_timout=3.0), "unknown [network] keys ['peer_timout']"),
    Case("network-negative-timeout", network(peer_timeout=-1.0), "peer_timeout must be a number > 0"),
    Case("network-heartbeat-not-below-timeout", network(heartbeat_interval=5.0), "heartbeat_interval must be smaller"),
    Case("network-string-timeout", network(connect_timeout="60"), "connect_timeout must be a number > 0"),
    # --- TLS ----------------------------------------------------------------------------------------
    Case("tls-table-missing", table("active", "tls", None), "has no [tls] table"),
    Case("tls-key-entry-missing", tls(key=DROP), "[tls] needs ['key']"),
    Case("tls-path-not-a-string", tls(ca=5), "[tls] ca must be a non-empty string"),
    Case("tls-ca-file-missing", tls(ca="nowhere/ca.pem"), "TLS ca file not found"),
    Case("tls-cert-not-pem", both(raw("junk.pem", "not a certificate\n"), tls(cert="junk.pem")), "is not PEM"),
    Case("tls-key-unreadable", tls(key="."), "cannot be read"),
    Case("tls-cert-of-another-party", cert_file("cert", "passive1.pem"),
         "issued to 'passive1', not to this party 'active'"),
    Case("tls-key-of-another-party", cert_file("key", "passive1.key"), "key file does not match the certificate"),
    Case("tls-ca-of-another-federation", other_ca("ca"), "not issued by the CA"),
    Case("tls-cert-of-another-federation", other_ca("cert"), "not issued by the CA"),
    Case("tls-cert-file-is-a-key", cert_file("cert", "active.key"), "does not hold a PEM cert"),
    # --- the job file --------------------------------------------------------------------------------
    Case("job-file-missing", party(job="nowhere.toml"), "the job file"),
    Case("job-file-invalid-toml", raw("job.toml", "[job]\nprotocol = plain\n"), "invalid TOML"),
    Case("job-table-missing", raw("job.toml", "[jobs]\nprotocol = 'plain'\n"), "exactly one [job] table"),
    Case("job-not-a-table", raw("job.toml", "job = 3\n"), "exactly one [job] table"),
    Case("job-field-misspelt", job(epoch=3), "unknown [job] fields ['epoch']"),
    Case("job-sets-n_samples", job(n_samples=24), "must not set 'n_samples'"),
    Case("job-unknown-kind", job(kind="gbdt"), "unknown job kind 'gbdt'"),
    Case("unknown-protocol", job(protocol="hdpp"), "unknown protocol 'hdpp'"),
    Case("fit-intercept-not-bool", job(fit_intercept="yes"), "fit_intercept must be a bool"),
    Case("intercept-scaling-out-of-range", job(intercept_scaling=1.0), "intercept_scaling"),
    Case("protocol-not-a-string", job(protocol=3), "protocol must be a non-empty str"),
    Case("unknown-loss", job(loss="hinge"), "loss must be one of"),
    Case("unknown-penalty", job(penalty="l3"), "penalty must be one of"),
    Case("unknown-calibration", job(calibration="exact"), "calibration must be one of"),
    Case("lr-string", job(lr="0.1"), "lr must be a real number, got str"),
    Case("lr-negative", job(lr=-0.5), "lr must be > 0.0"),
    Case("lr-zero", job(lr=0.0), "lr must be > 0.0"),
    Case("lr-nan", job(lr=float("nan")), "lr must be finite"),
    Case("lr-inf", job(lr=float("inf")), "lr must be finite"),
    Case("lr-list", job(lr=[0.1]), "lr must be a real number, got list"),
    Case("epochs-zero", job(epochs=0), "epochs must be >= 1"),
    Case("epochs-negative", job(epochs=-3), "epochs must be >= 1"),
    Case("epochs-1e30", job(epochs=1e30), "epochs must be an integer, got float"),
    Case("epochs-float", job(epochs=10.0), "epochs must be an integer, got float"),
    Case("epochs-huge-int", job(epochs=10 ** 15), "epochs must be <= 1000000"),
    Case("batch-size-zero", job(batch_size=0), "batch_size must be >= 1"),
    Case("batch-size-bool", job(batch_size=True), "batch_size must be an integer, got bool"),
    Case("batch-size-string", job(batch_size="eight"), "batch_size must be an integer, got str"),
    Case("batch-size-above-the-rows", job(batch_size=100), "batch_size (100) must not exceed n_samples (24)"),
    Case("k-zero", job(k=0.0), "k must be > 0"),
    Case("k-list", job(k=[1.0]), "k must be a real number or None"),
    Case("seed-negative", job(seed=-1), "seed must be a non-negative int"),
    Case("lam-negative", job(lam=-0.1), "lam must be >= 0.0"),
    Case("noise-not-a-bool", job(noise=1), "noise must be a bool"),
    Case("epsilon-zero", hdp(epsilon=0.0), "epsilon must be > 0.0"),
    Case("epsilon-negative", hdp(epsilon=-1.0), "epsilon must be > 0.0"),
    Case("delta-one", hdp(delta=1.0), "delta must be < 1.0"),
    Case("delta-zero", hdp(delta=0.0), "delta must be > 0.0"),
    Case("delta-string", hdp(delta="1e-5"), "delta must be a real number"),
    Case("passives-a-string", job(passives="passive1"), "passives must be a sequence of party names"),
    Case("passives-a-number", job(passives=2), "passives must be a sequence of party names, got int"),
    Case("passives-empty", job(passives=[]), "at least one passive party"),
    Case("active-listed-as-passive", job(passives=["passive1", "active"]), "party names must be distinct"),
    Case("active-empty", job(active=""), "active must be a non-empty str"),
    Case("row-norm-unknown", job(row_norm="l2"), "row_norm must be 'clip' or 'none'"),
    Case("evaluate-not-a-bool", job(evaluate="yes"), "evaluate must be true or false"),
    Case("options-nested-table", raw("job.toml", to_toml({"job": BASE_JOB}) + "\n[job.options.ckks]\nx = 1\n"),
         "options['ckks'] must be"),
    # --- the protocol's own checks --------------------------------------------------------------------
    Case("hdp-lr-above-the-bound", hdp(lr=7.0), "lr=7.0 exceeds 2 / (n_parties * beta_theta"),
    Case("hdp-without-a-finite-k", hdp(k=float("inf")), "needs a finite weight clip k"),
    Case("hdp-poisson-without-y_max", hdp(loss="poisson", lr=0.1), "needs the public label bound y_max"),
    Case("paillier-without-coordinator", job(protocol="paillier", key_bits=2048), "needs a coordinator party"),
    Case("plain-with-coordinator", job(coordinator="coordinator"), "has no coordinator role"),
    Case("pinned-widths-differ-from-the-csv", job(widths={"active": 7, "passive1": 1}),
         "pins widths.active = 7"),
    Case("mpc-protocol-of-a-plain-job", job(mpc_protocol="aby3"), "mpc_protocol is a key of protocol 'mpc' jobs"),
    Case("mpc-on-a-wildcard-listen-host", both(job(protocol="mpc"), party(listen="0.0.0.0:1")),
         "protocol 'mpc' opens its engine's link on the host of [party] listen"),
    Case("engine-link-of-a-plain-job", network(engine_link="wan"),
         "[network] engine_link shapes an MPC engine's own link, but protocol 'plain' opens none"),
    Case("engine-link-unknown-profile", both(job(protocol="mpc"), network(engine_link="moon")),
         "unknown link 'moon'"),
    Case("engine-link-bad-bandwidth", both(job(protocol="mpc"), network(engine_link="fast,20ms")),
         "bandwidth 'fast' not understood"),
    Case("mpc-aby3-between-two", job(protocol="mpc", mpc_protocol="aby3"),
         "mpc_protocol 'aby3' runs between exactly 3 parties, the job has 2"),
    Case("paillier-key-bits-512", he(key_bits=512), "key_bits=512 is insecure"),
    Case("paillier-key-bits-float", he(key_bits=2048.0), "key_bits must be an integer, got float"),
    Case("paillier-poisson", he(loss="poisson"), "supports losses"),
    Case("ckks-bad-poly-degree", both(he("ckks"), job(options={"ckks_poly_modulus_degree": 1000})),
         "poly_modulus_degree"),
    Case("ckks-negative-flooding-bits", both(he("ckks"), job(options={"flooding_bits": -1})), "flooding_bits"),
    Case("coordinator-key-bits-512", both(he(key_bits=512), run_as("coordinator")), "key_bits=512 is insecure"),
    # --- Parquet shards of the aligned rows (shard_rows, [party] shard_dir / keep_shards) -------------------
    Case("shard-rows-negative", job(shard_rows=-1), "shard_rows must be >= 0"),
    Case("shard-rows-string", job(shard_rows="100k"), "shard_rows must be an integer, got str"),
    Case("shard-rows-bool", job(shard_rows=True), "shard_rows must be an integer, got bool"),
    Case("shard-rows-float", job(shard_rows=16.0), "shard_rows must be an integer, got float"),
    Case("shard-rows-below-the-batch", job(shard_rows=4), "shard_rows must be 0 (no shards) or at least batch_size"),
    Case("shard-rows-for-paillier", he(shard_rows=16), "protocol 'paillier' does not take shard_rows"),
    Case("shard-rows-for-splitnn", splitnn(shard_rows=16), "unknown [job] fields ['shard_rows']"),
    Case("keep-shards-not-a-bool", party(keep_shards="yes"), "[party] keep_shards must be true or false"),
    Case("shard-dir-not-a-string", party(shard_dir=3), "[party] shard_dir must be a non-empty string"),
    Case("shard-dir-is-a-file", both(job(shard_rows=16), party(shard_dir="active.csv")),
         "the shards' folder"),
    Case("coordinator-with-shard-dir", both(he(), party("coordinator", shard_dir="shards"), run_as("coordinator")),
         "holds no data, but [party] sets shard_dir"),
    Case("resume-refused-by-the-defense", both(splitnn(defense={"name": "noise_embedding", "scale": 0.1}),
                                               args("--resume")), "defense 'noise_embedding' cannot resume"),
    Case("resume-without-checkpoint-dir", both(party(checkpoint_dir=DROP), args("--resume")),
         "--resume needs [party] checkpoint_dir"),
    # --- split learning -------------------------------------------------------------------------------
    Case("splitnn-unknown-defense", splitnn(defense={"name": "nothing"}), "unknown defense 'nothing'"),
    Case("splitnn-defense-bad-parameter", splitnn(defense={"name": "noise_embedding", "scale": -1.0}),
         "[job.defense] noise_embedding"),
    Case("splitnn-bottom-hidden-scalar", splitnn(bottom_hidden=64), "bottom_hidden must be a list of positive ints"),
    Case("splitnn-embedding-dim-zero", splitnn(embedding_dim=0), "embedding_dim must be >= 1"),
    Case("splitnn-unknown-task", splitnn(task="ranking"), "task must be one of"),
    Case("splitnn-protocol-field", splitnn(protocol="plain"), "unknown [job] fields ['protocol']"),
    Case("splitnn-device-not-here", splitnn(device="cuda:99"), "'cuda:99' requested but"),
    Case("splitnn-labels-not-class-indices", both(splitnn(), cell("active.csv", 3, 1, 5)),
         "must be the class indices 0..1"),
    # --- vertical boosting (kind "trees") ----------------------------------------------------------------
    Case("trees-noise-seed", trees(protection="dp", epsilon=1.0, delta=1e-3, noise_seed=3),
         "noise_seed is not a [job] key"),
    Case("trees-n-bins", trees(n_bins=[[4, 4], [4, 4, 4]]), "n_bins is not a [job] key"),
    Case("trees-max-bins-above-a-byte", trees(max_bins=300), "max_bins must be <= 255"),
    Case("trees-max-bins-one", trees(max_bins=1), "max_bins must be >= 2"),
    Case("trees-unknown-protection", trees(protection="he"), "protection must be one of"),
    Case("trees-dp-without-delta", trees(protection="dp", epsilon=1.0), "protection 'dp' needs delta"),
    Case("trees-label-dp-with-delta", trees(protection="label_dp", epsilon=1.0, delta=1e-3),
         "'label_dp' is pure epsilon-label-DP"),
    Case("trees-epsilon-without-dp", trees(epsilon=1.0), "epsilon is a parameter of the DP protections"),
    Case("trees-secureboost-key-bits-512", trees(protection="secureboost", key_bits=512), "key_bits=512 is insecure"),
    Case("trees-learning-rate-zero", trees(learning_rate=0.0), "learning_rate must be > 0.0"),
    Case("trees-max-leaf-nodes-one", trees(max_leaf_nodes=1), "max_leaf_nodes must be >= 2"),
    Case("trees-glm-field", trees(lr=0.1), "unknown [job] fields ['lr']"),
    Case("trees-labels-not-binary", both(trees(), cell("active.csv", 3, 1, 2)), "exactly 2 classes"),
    Case("trees-resume", both(trees(), args("--resume")), "trees jobs cannot resume"),
    # --- the party's data -------------------------------------------------------------------------------
    Case("data-not-set", party(data=DROP), "data party 'active' needs [party] data"),
    Case("label-column-not-set", party(label_column=DROP), "the active party needs [party] label_column"),
    Case("label-column-on-a-passive", both(party("passive1", label_column="x0"), run_as("passive1")),
         "'passive1' is a passive party"),
    Case("coordinator-with-data", both(he(), party("coordinator", data="active.csv"), run_as("coordinator")),
         "holds no data, but [party] sets data"),
    Case("data-file-missing", party(data="nowhere.csv"), "does not exist"),
    Case("data-file-is-a-folder", party(data="."), "is not a file"),
    Case("data-file-empty", raw("active.csv", ""), "is empty"),
    Case("data-header-only", csv_file("active.csv", ACTIVE_HEADER, []), "has a header but no data rows"),
    Case("data-non-numeric-cell", cell("active.csv", 4, 2, "abc"), "could not convert string to float: 'abc'"),
    Case("data-nan", cell("active.csv", 4, 2, "nan"), "active.csv:6: features contain NaN or inf"),
    Case("data-inf", both(cell("passive1.csv", 2, 3, "inf"), run_as("passive1")),
         "passive1.csv:4: features contain NaN or inf"),
    Case("data-ragged-row", raw("active.csv", _csv(ACTIVE_HEADER, ACTIVE_ROWS) + "id-999,1,0.5\n"),
         "3 fields, header has 4"),
    Case("data-duplicate-id", cell("active.csv", 5, 0, "id-001"), "duplicate ID 'id-001'"),
    Case("data-empty-id", cell("active.csv", 5, 0, ""), "empty ID in column 'id'"),
    Case("data-no-id-column", party(id_column="customer"), "no ID column 'customer'"),
    Case("data-no-label-column", party(label_column="label"), "no label column 'label'"),
    Case("data-no-feature-columns", csv_file("active.csv", ("id", "y"), [r[:2] for r in ACTIVE_ROWS]),
         "has no feature columns"),
    Case("data-not-utf8", raw("active.csv", b"\xff\xfeid,y\n"), "utf-8"),
    Case("labels-not-binary", cell("active.csv", 3, 1, 2), "needs exactly 2 classes in y, got 3"),
    Case("labels-nan", cell("active.csv", 3, 1, "nan"), "the label column 'y' holds NaN or inf"),
    Case("labels-poisson-negative", both(job(loss="poisson", lr=0.1), cell("active.csv", 3, 1, -1)),
         "non-negative integer counts"),
    # (Least-squares labels beyond HDP's |y| <= k_y are no mistake: the model standardises and clips them,
    # vflsec.glm.model.LabelEncoding; the protocol's own check is tested in tests/glm/test_vertical_glm.py.)
    Case("hdp-rows-above-unit-norm", both(hdp(row_norm="none"), cell("active.csv", 3, 2, 5.0)), "norm"),
    Case("evaluate-without-test-data", job(evaluate=True), "needs its held-out rows as [party] test_data"),
    Case("test-data-file-missing", both(TEST_DATA, party(test_data="nowhere-test.csv")), "does not exist"),
    Case("test-data-other-columns", both(TEST_DATA, csv_file("active-test.csv", ACTIVE_HEADER[:3],
                                                             [r[:3] for r in TEST_ACTIVE_ROWS])),
         "has 1 feature columns, "),
    Case("test-data-duplicate-id", both(TEST_DATA, csv_file("active-test.csv", ACTIVE_HEADER,
                                                            TEST_ACTIVE_ROWS + TEST_ACTIVE_ROWS[:1])),
         "duplicate ID"),
]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("certs")
    init_certificates(directory, PARTIES)
    return directory


class Sentinels:
    """A listening TCP socket per peer: a connection attempt to a peer lands
    in that socket's backlog, which :meth:`attempts` drains."""

    def __init__(self, names: Sequence[str]):
        self.sockets = {}
        for name in names:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            s.setblocking(False)
            self.sockets[name] = s

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.sockets[name].getsockname()[1]}"

    def attempts(self) -> List[str]:
        seen = []
        for name, s in self.sockets.items():
            try:
                conn, _ = s.accept()
            except BlockingIOError:
                continue
            conn.close()
            seen.append(name)
        return seen

    def close(self) -> None:
        for s in self.sockets.values():
            s.close()


@pytest.fixture
def layout(tmp_path, certs):
    sentinels = Sentinels(PARTIES)
    f = _layout(tmp_path, certs)
    for name in PARTIES:  # every party's peers are sentinels (all of them; the job decides who is needed)
        f.configs[name]["peers"] = {p: sentinels.address(p) for p in ("active", "passive1") if p != name}
    f.sentinels = {n: s.getsockname()[1] for n, s in sentinels.sockets.items()}
    yield f, sentinels
    sentinels.close()


def _with_coordinator_peers(f: Layout, sentinels: Sentinels) -> None:
    """An HE job's parties list the coordinator; the coordinator lists both data parties."""
    if f.job.get("coordinator"):
        for name in ("active", "passive1"):
            f.configs[name]["peers"].setdefault("coordinator", sentinels.address("coordinator"))
        f.configs["coordinator"]["peers"] = {p: sentinels.address(p) for p in ("active", "passive1")}


def _port_is_free(port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError as exc:
        assert exc.errno == errno.EADDRINUSE, exc
        return False
    finally:
        s.close()


def _party(capsys, argv: List[str]):
    started = time.monotonic()
    with pytest.raises(SystemExit) as info:
        cli.main(["party", *argv])
    return info.value.code, capsys.readouterr().err, time.monotonic() - started


def _argv(f: Layout) -> List[str]:
    if "--config" in f.argv:
        at = f.argv.index("--config")
        return ["--config", str(f.root / f.argv[at + 1]), *f.argv[:at], *f.argv[at + 2:]]
    return ["--config", str(f.config(f.party)), *f.argv]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_startup_mistake_is_one_line_with_a_fix_and_exit_2_before_any_connection(capsys, layout, case):
    f, sentinels = layout
    case.edit(f)
    _with_coordinator_peers(f, sentinels)
    f.write()
    code, err, elapsed = _party(capsys, _argv(f))
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    line = lines[0]
    assert line.startswith("vflsec party: error: "), line
    what, sep, fix = line[len("vflsec party: error: "):].partition(" -- ")
    assert sep and what.strip() and fix.strip(), line
    assert case.needle.lower() in what.lower(), line
    # No connection was attempted, the listen port was never kept, and nothing waited for a peer.
    assert sentinels.attempts() == [], line
    assert _port_is_free(f.ports[f.party])
    assert elapsed < NETWORK["connect_timeout"], f"{elapsed:.1f} s: it waited for the peers"


def test_the_catalogue_is_large_and_each_case_is_distinct():
    assert len(CASES) >= 59
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("job_edit, name", [
    (job(), "active"), (job(), "passive1"), (hdp(), "active"), (hdp(row_norm="none"), "passive1"),
    (he(), "active"), (he(), "coordinator"), (he("ckks"), "passive1"), (splitnn(), "active"), (splitnn(), "passive1"),
    (TEST_DATA, "active"), (TEST_DATA, "passive1"), (job(shard_rows=16), "active"),
    (both(hdp(shard_rows=8), party("passive1", shard_dir="shards", keep_shards=True)), "passive1"),
    (trees(), "active"), (trees(protection="dp", epsilon=1.0, delta=1e-3), "passive1"),
])
def test_the_unchanged_layouts_pass_every_check(layout, job_edit, name):
    """The control: each case above changes one thing in a layout that passes."""
    f, sentinels = layout
    job_edit(f)
    _with_coordinator_peers(f, sentinels)
    f.write()
    start = prepare_party(f.config(name))
    assert start.cfg.name == name
    assert (start.rows is None) == (name == "coordinator")
    assert (start.test_rows is not None) == bool(f.job.get("evaluate"))
    resumes = start.spec.kind.writes_checkpoints  # a trees job refuses --resume (its case above)
    assert prepare_party(f.config(name), resume=resumes, insecure=True).tls is None
    assert sentinels.attempts() == []


def test_a_taken_listen_port_is_one_line_and_exit_2(capsys, layout):
    """Binding is the one check that needs a socket: it fails before any peer is dialled."""
    f, sentinels = layout
    f.write()
    taken = socket.create_server(("127.0.0.1", f.ports["active"]))
    try:
        code, err, _ = _party(capsys, ["--config", str(f.config("active"))])
    finally:
        taken.close()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("vflsec party: error: ") and " -- free the port" in lines[0], err
    assert sentinels.attempts() == []


def test_a_real_process_exits_2_with_one_line(layout):
    """The same through ``python -m vflsec party`` (logging set up, no pytest capture)."""
    f, sentinels = layout
    hdp(lr=7.0)(f)
    f.write()
    done = subprocess.run([sys.executable, "-m", "vflsec", "party", "--config", str(f.config("active"))],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("vflsec party: error: ") and "lr=7.0 exceeds" in lines[0] and " -- " in lines[0]
    assert sentinels.attempts() == [] and _port_is_free(f.ports["active"])


def test_insecure_warning_comes_after_the_checks(capsys, layout):
    f, _ = layout
    party(listen="127.0.0.1:0")(f)
    f.write()
    code, err, _ = _party(capsys, ["--config", str(f.config("active")), "--insecure"])
    assert code == 2 and err.count("\n") == 1 and "WARNING" not in err, err


def test_debug_shows_the_traceback_of_a_startup_mistake(layout):
    f, _ = layout
    job(protocol="hdpp")(f)
    f.write()
    with pytest.raises(CommandError) as info:
        cli.main(["--debug", "party", "--config", str(f.config("active"))])
    assert isinstance(info.value.__cause__, ValueError) and "unknown protocol 'hdpp'" in str(info.value)
