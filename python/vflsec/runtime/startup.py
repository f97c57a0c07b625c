"""What ``vflsec party`` checks before it opens any socket.

:func:`prepare_party` reads everything one party holds and runs every check
that needs no peer. A mistake is a :class:`~vflsec.errors.CommandError`
(``<what> -- <fix>``: the command line prints it as one line and exits with
status 2) raised before anything is bound or dialled. The rules live where
the run uses them; this module calls them early, in the order a user fixes
things, and says which file to correct:

1. the party file (:func:`.config.load_party_config`: tables, keys, types);
   the party's name (a certificate DNS name,
   :func:`~vflsec.federation.tls.check_party_name`), ``listen`` and every
   peer address (:func:`~vflsec.federation.address.parse_address`),
   ``[network]`` (:class:`~vflsec.federation.grpc_channel.NetworkSettings`);
   ``[compute]``: the executor of the party's HE vector work is made and set
   for the process (:func:`vflsec.he.executor.executor_from_config`; with
   ``engine = "ray"`` this connects to the party's own Ray cluster, so a
   cluster that does not answer fails here, before any peer is contacted);
2. the job file (:func:`.job_spec.load_job_spec`: the kind and its fields);
3. the party's place in the job: one of its parties, ``[peers]`` naming
   exactly the others; the kind's checks of the job
   (:meth:`.kinds.JobKind.check_job`: for a GLM job the protocol lookup, its
   coordinator and the protocol's own checks, such as HDP's learning-rate
   bound and sensitivities, Paillier's key size, the CKKS parameters; for a
   split-learning job the device); ``--resume`` allowed for the job and
   possible for the party;
4. the TLS files unless ``--insecure`` (:func:`~vflsec.federation.tls.load_tls`,
   :func:`~vflsec.federation.tls.check_party_tls`: PEM, issued to this party
   by the CA, valid now, the key the certificate's);
5. a data party's CSVs (:func:`.party_csv.read_party_csv`), the job built
   with the CSV's row count (the aligned rows can only be fewer, so e.g. a
   batch larger than the file is refused now) and the kind's checks of the
   party's own rows as its program takes them (:meth:`.kinds.JobKind.party_rows`:
   the job's ``row_norm``, a GLM's intercept column)
   (:meth:`.kinds.JobKind.check_party`: the labels the loss takes, the
   protocol's row checks such as HDP's unit rows and label bounds, a split
   model's class indices and defense set-up); for a job with ``shard_rows``,
   the folder its Parquet shards go to, made if missing and writable
   (:func:`.party_shards.check_shard_parent`).

What needs the peers (a peer that answers, the same job file everywhere, a
non-empty intersection at least a batch large) can only fail once they are
connected: the mistakes between parties are one line with the fix and exit
status 2 at every party too (:mod:`.peer_mistakes`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

import numpy as np

from ..errors import CommandError
from ..federation.address import parse_address
from ..vfl.job import VFLJob
from .config import PartyConfig, load_party_config
from .job_overrides import JobOverride, overrides_text
from .job_spec import JobSpec, load_job_spec
from .party_csv import read_party_csv
from .party_shards import check_shard_parent
from .party_table import read_party_table, uses_table_reader
from .predict_budget import PredictBudget, budget_from_table

__all__ = ["PartyRows", "PartyStart", "prepare_party"]

logger = logging.getLogger("vflsec.network")

#: seconds of reading a party's tables after which it logs that it is still at it
SLOW_READ_S = 5.0


@dataclass
class PartyRows:
    """One data file as read (``X`` before the job's row_norm)."""

    ids: Sequence[str]  # an IdColumn from the pyarrow reader
    X: np.ndarray
    y: Optional[np.ndarray]
    preprocessor: Any = None  # the fitted vflsec.data.PartyPreprocessor of a raw table (party_table)
    label_names: Any = None  # the label values coded 0 and 1 as the file has them (party_table), else None

    def take_features(self) -> np.ndarray:
        """``X``, handed over: these rows keep an empty table of its width
        in its place, so the caller holds the only reference to the table as
        read (the kind's rows then hold it: a GLM reads it in the aligned
        order through the row positions, other kinds keep an ordered copy
        and drop it)."""
        X = self.X
        self.X = np.empty((0, X.shape[1]), dtype=X.dtype)
        return X

    def take_labels(self) -> Optional[np.ndarray]:
        """``y``, handed over as :meth:`take_features` hands ``X`` over (these rows keep None)."""
        y, self.y = self.y, None
        return y


@dataclass(frozen=True)
class PartyStart:
    """Everything one party checked before it connects: its configuration,
    the job, its role, the transport settings and TLS files (None with
    ``--insecure``) and, for a data party, its rows (``test_rows`` for a
    job with ``evaluate = true``)."""

    config: Path
    cfg: PartyConfig
    spec: JobSpec
    probe: VFLJob
    role: str
    settings: Any
    tls: Any = None
    rows: Optional[PartyRows] = None
    test_rows: Optional[PartyRows] = None
    started: float = 0.0  # time.perf_counter() when the checks began (the run's wall time counts them)
    model: Any = None  # a predict job's saved model of this party (runtime.predict_kind.SavedPartyModel)
    engine_link: Any = None  # [network] engine_link: the LinkProfile an MPC engine's relay emulates, or None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextlib.contextmanager
def _fix(fix: str, subject: str = "") -> Iterator[None]:
    """Turn a ValueError/TypeError/OSError raised inside into a CommandError
    with ``fix`` (kept: a fix the message already carries after " -- ");
    ``subject`` is put in front of a message that does not name it."""
    try:
        yield
    except CommandError:
        raise
    except (ValueError, TypeError, OSError) as exc:
        what, sep, own_fix = _one_line(exc).partition(" -- ")
        if subject and subject not in what:
            what = f"{subject}: {what}"
        raise CommandError(what, own_fix if sep else fix) from exc


def _network_settings(network: Mapping[str, Any], config: Path) -> Any:
    from ..federation.grpc_channel import NetworkSettings

    known = [f.name for f in dataclasses.fields(NetworkSettings)]
    network = {key: value for key, value in network.items() if key != ENGINE_LINK_KEY}  # not the channel's
    unknown = sorted(set(network) - set(known))
    fix = f"correct [network] in {config} (or leave it out for the defaults)"
    if unknown:
        raise CommandError(f"unknown [network] keys {unknown} (known: {', '.join(known + [ENGINE_LINK_KEY])})", fix)
    with _fix(fix, "[network]"):
        return NetworkSettings(**network)


def _set_executor(cfg: PartyConfig, config: Path) -> None:
    from ..he.executor import executor_from_config, set_executor

    with _fix(f"correct [compute] in {config}, or start the Ray cluster it names", "[compute]"):
        set_executor(executor_from_config(cfg.compute))


def _check_addresses(cfg: PartyConfig, config: Path) -> None:
    from ..federation.tls import check_party_name

    with _fix(f"set [party] name in {config} to the party's name in the job file (its certificate name)"):
        check_party_name(cfg.name)
    with _fix(f"correct [party] listen in {config}: the HOST:PORT this party accepts its peers on"):
        listen = parse_address(cfg.listen, "[party] listen")
    peers_fix = f"correct [peers] in {config}: one HOST:PORT for every other party of the job"
    if cfg.name in cfg.peers:
        raise CommandError(f"[peers] lists this party {cfg.name!r} itself", f"remove it from [peers] in {config}")
    for peer, address in cfg.peers.items():
        with _fix(peers_fix):
            check_party_name(peer)
            if parse_address(address, f"[peers] {peer}") == listen:
                raise ValueError(f"[peers] {peer} = {address!r} is this party's own listen address")


#: protocols whose engine opens its own link on the host of [party] listen (vflsec.mpc.links.NetworkLinks)
ENGINE_LINK_PROTOCOLS = ("mpc", "mpc_dp")
_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def _check_engine_host(cfg: PartyConfig, probe: VFLJob, config: Path) -> None:
    """An MPC engine announces its link on the host of ``[party] listen``: a wildcard there is an address
    the peers cannot reach (the channel itself may listen on every interface)."""
    from ..federation.address import parse_address

    protocol = getattr(probe, "protocol", None)  # a GLM job's; other kinds have none
    if protocol not in ENGINE_LINK_PROTOCOLS:
        return
    host = parse_address(cfg.listen, "[party] listen")[0]
    if host in _WILDCARD_HOSTS:
        raise CommandError(f"protocol {protocol!r} opens its engine's link on the host of [party] "
                           f"listen and announces it to the peers, but {host!r} listens everywhere and names no "
                           "address they can reach",
                           f"set [party] listen in {config} to this machine's address as the peers' [peers] write it")


ENGINE_LINK_KEY = "engine_link"


def _engine_link(cfg: PartyConfig, probe: VFLJob, config: Path) -> Any:
    """``[network] engine_link``: the link profile the relay in front of this party's engine port emulates
    (:class:`vflsec.mpc.links.MeteredLinks`; a rehearsal of a slower link for the engine's traffic, which no
    ``vflsec link-relay`` can reach: its port is chosen at run time). None when not set."""
    from ..federation.link_profiles import parse_link

    if ENGINE_LINK_KEY not in cfg.network:
        return None
    protocol = getattr(probe, "protocol", None)
    if protocol not in ENGINE_LINK_PROTOCOLS:
        raise CommandError(f"[network] {ENGINE_LINK_KEY} shapes an MPC engine's own link, but protocol "
                           f"{protocol!r} opens none",
                           f"remove {ENGINE_LINK_KEY} from [network] in {config} (put `vflsec link-relay` in "
                           "front of the [peers] addresses to rehearse a slower link)")
    with _fix(f"correct [network] {ENGINE_LINK_KEY} in {config}: a profile name or BANDWIDTH,RTT such as "
              "100mbit,20ms", f"[network] {ENGINE_LINK_KEY}"):
        return parse_link(cfg.network[ENGINE_LINK_KEY])


def _check_place(cfg: PartyConfig, spec: JobSpec, probe: VFLJob, config: Path) -> str:
    parties = list(probe.parties)
    if cfg.name not in parties:
        raise CommandError(f"party {cfg.name!r} ([party] name in {config}) is not a party of the job {parties} "
                           f"in {cfg.job}", "set [party] name to one of them, or add the party to the job file")
    others = [p for p in parties if p != cfg.name]
    fix = f"give [peers] in {config} exactly the other parties of the job: {', '.join(others)}"
    missing = [p for p in others if p not in cfg.peers]
    if missing:
        raise CommandError(f"[peers] lacks the address of {missing}", fix)
    extra = sorted(set(cfg.peers) - set(others))
    if extra:
        raise CommandError(f"[peers] lists parties that are not in the job {cfg.job}: {extra}", fix)
    return probe.role_of(cfg.name)


def _check_resume(cfg: PartyConfig, spec: JobSpec, probe: VFLJob, config: Path) -> None:
    refusal = spec.kind.resume_refusal(probe, spec.fields)
    if refusal is not None:
        raise CommandError(f"--resume: {refusal}", "start the job without --resume")
    if cfg.name in probe.data_parties and cfg.checkpoint_dir is None:
        raise CommandError("--resume needs [party] checkpoint_dir",
                           f"set [party] checkpoint_dir in {config} to where the interrupted run saved its epochs, "
                           "or start without --resume")


def _load_tls(cfg: PartyConfig, probe: VFLJob, config: Path) -> Any:
    from ..federation.tls import check_party_tls, load_tls

    names = ",".join(probe.parties)
    if cfg.tls is None:
        raise CommandError(f"{config} has no [tls] table; mutual TLS is the default",
                           f"create certificates with `vflsec certs init --parties {names}` and name the CA, this "
                           "party's certificate and key in [tls] (ca, cert, key), or pass --insecure (development "
                           "only)")
    fix = (f"name in [tls] of {config} the CA and {cfg.name!r}'s certificate and key from one "
           f"`vflsec certs init --parties {names}` (ca.pem, {cfg.name}.pem, {cfg.name}.key)")
    with _fix(fix, f"[tls] of {config}"):
        tls = load_tls(cfg.tls["ca"], cfg.tls["cert"], cfg.tls["key"])
        check_party_tls(tls, cfg.name)
    return tls


def _read_rows(path: Path, key: str, cfg: PartyConfig, config: Path, label_column: Optional[str],
               allow_no_features: bool, fitted: Any = None) -> PartyRows:
    where = f"[party] {key} in {config}"
    if not path.is_file():
        problem = "is not a file" if path.exists() else "does not exist"
        raise CommandError(f"the party's {'held-out ' if key == 'test_data' else ''}data file {path} {problem} "
                           f"({where})", f"correct {where} (relative to the party file's folder); "
                                         "`vflsec party-data` writes the per-party CSVs")
    labels = f" and the label column {label_column!r}" if label_column else ""
    if fitted is not None or uses_table_reader(path, cfg.preprocess):
        fix = (f"correct {path} ({where}) or [preprocess] in {config}: an ID column {cfg.id_column!r}{labels}, one "
               "row per unique ID")
        with _fix(fix, str(path)):
            table = read_party_table(path, id_column=cfg.id_column, label_column=label_column,
                                     positive_label=cfg.positive_label if label_column else None,
                                     preprocess=cfg.preprocess, fitted=fitted, allow_no_features=allow_no_features)
        return PartyRows(table.ids, table.X, table.y, table.preprocessor, table.label_names)
    fix = (f"correct {path} ({where}): a header row naming the ID column {cfg.id_column!r}{labels} (or the "
           f"column names in [party]), then one row per unique ID with a number in every other column; a table "
           f"with text, date or missing cells needs a [preprocess] table in {config}")
    with _fix(fix, str(path)):
        ids, X, y, _ = read_party_csv(path, cfg.id_column, label_column, allow_no_features=allow_no_features)
    return PartyRows(ids, X, y)


def _read_data(cfg: PartyConfig, spec: JobSpec, probe: VFLJob, role: str, config: Path, model: Any = None):
    """The data party's rows and held-out rows, checked as CSVs; ``model``: a predict job's
    saved model (its preprocessor is applied to the rows unchanged)."""
    if cfg.data is None:
        raise CommandError(f"data party {cfg.name!r} needs [party] data",
                           f"set [party] data in {config} to its CSV (`vflsec party-data` writes one per party)")
    if not spec.kind.uses_labels:
        if cfg.label_column is not None:
            raise CommandError(f"[party] label_column is set but a {spec.kind.name} job reads no labels",
                               f"remove label_column from {config}")
        rows = _read_rows(cfg.data, "data", cfg, config, None, False,
                          fitted=None if model is None else model.preprocessor)
        return rows, None
    if role == "active" and cfg.label_column is None:
        raise CommandError("the active party needs [party] label_column",
                           f"set [party] label_column in {config} to the label column of its CSV")
    if role != "active" and cfg.label_column is not None:
        raise CommandError(f"[party] label_column is set but {cfg.name!r} is a passive party: only the active "
                           "party holds labels", f"remove label_column from {config} (every column of a passive "
                                                 "party's CSV but the ID is a feature)")
    label_column = cfg.label_column if role == "active" else None
    no_features = spec.kind.features_optional(probe, role)
    rows = _read_rows(cfg.data, "data", cfg, config, label_column, no_features)
    if rows.preprocessor is not None and cfg.output is not None:
        # Saved with the party's model: the same transform for its held-out and future rows.
        target = Path(cfg.output).with_suffix(".preprocessor.json")  # party_table.preprocessor_path
        with _fix(f"make the folder of [party] output in {config} writable", str(target)):
            target.parent.mkdir(parents=True, exist_ok=True)
            rows.preprocessor.save(target)
    test_rows = None
    if spec.evaluate:
        if cfg.test_data is None:
            raise CommandError(f"the job {cfg.job} has evaluate = true: data party {cfg.name!r} needs its held-out "
                               "rows as [party] test_data",
                               f"set [party] test_data in {config} (a CSV with the columns of its data file; "
                               "`vflsec party-data` writes <name>-test.csv), or set evaluate = false in the job")
        test_rows = _read_rows(cfg.test_data, "test_data", cfg, config, label_column, no_features,
                               fitted=rows.preprocessor)
        if test_rows.X.shape[1] != rows.X.shape[1]:
            raise CommandError(f"{cfg.test_data} has {test_rows.X.shape[1]} feature columns, {cfg.data} has "
                               f"{rows.X.shape[1]}", f"give [party] test_data in {config} the columns of the data "
                                                     "file")
    return rows, test_rows


def prepare_party(config: Path, *, resume: bool = False, insecure: bool = False,
                  job_overrides: Sequence[JobOverride] = ()) -> PartyStart:
    """Read and check one party's configuration, job file, TLS files and CSVs
    (module docstring); :class:`~vflsec.errors.CommandError` for any mistake.
    ``job_overrides``: ``--job KEY=VALUE`` (:mod:`.job_overrides`), applied to the job file's keys.
    Opens no socket to a peer (``[compute] engine = "ray"`` connects to the party's Ray cluster)."""
    started = time.perf_counter()
    config = Path(config)
    if not config.is_file():
        problem = "is a folder, not a file" if config.is_dir() else "not found"
        raise CommandError(f"config file {config} {problem}", "check the --config path")
    with _fix(f"correct {config} (the format: `python -m pydoc vflsec.runtime.config`)"):
        cfg = load_party_config(config)
    _check_addresses(cfg, config)
    settings = _network_settings(cfg.network, config)
    _set_executor(cfg, config)

    if not cfg.job.is_file():
        raise CommandError(f"the job file {cfg.job} does not exist ([party] job in {config})",
                           f"correct [party] job in {config} (relative to the party file's folder)")
    job_fix = f"correct the [job] table of {cfg.job} (every party holds the same copy)"
    if job_overrides:
        job_fix += f" or {overrides_text(job_overrides)}"
    with _fix(job_fix, str(cfg.job)):
        spec = load_job_spec(cfg.job, job_overrides)
        probe = spec.probe_job()
    role = _check_place(cfg, spec, probe, config)
    with _fix(job_fix, str(cfg.job)):
        spec.kind.check_job(probe, spec.fields)
        spec.kind.check_evaluation(probe, spec.fields, spec.evaluate)
    _check_engine_host(cfg, probe, config)
    engine_link = _engine_link(cfg, probe, config)
    if resume:
        _check_resume(cfg, spec, probe, config)
    tls = None if insecure else _load_tls(cfg, probe, config)

    if cfg.name not in probe.data_parties:
        for key in ("data", "test_data", "label_column", "model", "shard_dir"):
            if getattr(cfg, key) is not None:
                raise CommandError(f"party {cfg.name!r} is the job's {role} and holds no data, but [party] sets "
                                   f"{key}", f"remove [party] {key} from {config}")
        return PartyStart(config, cfg, spec, probe, role, settings, tls, started=started, engine_link=engine_link)
    model = _load_model(cfg, spec, probe, role, config)
    t = time.perf_counter()
    # A table that takes a while says so (a quick start stays silent: a mistake is then its only line).
    said = threading.Timer(SLOW_READ_S, logger.info, args=("party %r: still reading %s (%s) after %.0f s", cfg.name,
                                                           cfg.data, f"[party] data in {config}",
                                                           SLOW_READ_S))
    said.daemon = True
    said.start()
    try:
        rows, test_rows = _read_data(cfg, spec, probe, role, config, model)
    finally:
        said.cancel()
    if time.perf_counter() - t >= SLOW_READ_S:
        logger.info("party %r: %d rows x %d feature columns read in %.1f s", cfg.name, len(rows.ids),
                    rows.X.shape[1], time.perf_counter() - t)
    if model is not None and cfg.data is not None:
        with _fix(f"correct [party] data or [party] model in {config}", str(cfg.data)):
            spec.kind.check_model(model, rows.X.shape[1], cfg.data)
    pinned = spec.fields.get("widths")
    if isinstance(pinned, dict) and isinstance(pinned.get(cfg.name), int) and pinned[cfg.name] != rows.X.shape[1]:
        # Found here, before any connection, rather than by the leader in the job agreement (exit status 1).
        raise CommandError(f"party {cfg.name!r} holds {rows.X.shape[1]} feature columns ({cfg.data}), the job file "
                           f"{cfg.job} pins widths.{cfg.name} = {pinned[cfg.name]}",
                           f"correct [job.widths] {cfg.name} in {cfg.job} (every party's copy) or the columns of "
                           f"{cfg.data}")
    # The aligned rows are at most this party's rows: a job that does not fit them will not fit fewer.
    with _fix(job_fix, f"{cfg.job} with the {len(rows.ids)} rows of {cfg.data}"):
        job = spec.job(n_samples=len(rows.ids))
        spec.kind.check_job(job, spec.fields)
    X = spec.kind.party_rows(job, spec.fields, spec.row_norm, cfg.name, rows.X)
    with _fix(f"correct the rows of {cfg.data} or the [job] table of {cfg.job}", f"the rows of {cfg.data}"):
        spec.kind.check_party(job, spec.fields, cfg.name, X, rows.y)
    if spec.kind.shard_rows(job):
        check_shard_parent(cfg, config)
    return PartyStart(config, cfg, spec, probe, role, settings, tls, rows, test_rows, started, model,
                      engine_link=engine_link)


def _load_model(cfg: PartyConfig, spec: JobSpec, probe: VFLJob, role: str, config: Path) -> Any:
    """A predict job's saved model of this party (None for a training job, which must not name one)."""
    if not spec.kind.scores_saved_model:
        if cfg.model is not None:
            raise CommandError(f"[party] model is set but a {spec.kind.name} job trains a model, it reads none",
                               f"remove model from {config} (a predict job, [job] kind = \"predict\", reads it)")
        if cfg.predict is not None:
            raise CommandError(f"[predict] sets a passive party's budget for predict jobs, but this is a "
                               f"{spec.kind.name} job", f"remove [predict] from {config}")
        return None
    if cfg.model is None:
        raise CommandError(f"a predict job needs [party] model: party {cfg.name!r}'s output of the training job",
                           f"set [party] model in {config} to the file [party] output named when it trained")
    if cfg.preprocess is not None:
        raise CommandError("[preprocess] is set but a predict job applies the preprocessor saved with the model, "
                           "unchanged", f"remove [preprocess] from {config}")
    if role == "active" and cfg.output is None:
        raise CommandError("the active party of a predict job needs [party] output: the scores are written "
                           "beside it (<output>.scores.csv)", f"set [party] output in {config}")
    with _fix(f"correct [party] model in {config}", str(cfg.model)):
        model = spec.kind.load_model(cfg.model, cfg.name, role, probe)
    if role == "active":
        if cfg.predict is not None:
            raise CommandError("[predict] sets what a passive party answers in predict jobs; the active party "
                               "answers nothing", f"remove [predict] from {config}")
        return model
    # A passive party answers within its budget, the defaults where the file sets none (runtime.predict_budget).
    limits = cfg.predict if cfg.predict is not None else budget_from_table({}, str(config))
    return dataclasses.replace(model, budget=PredictBudget(limits, cfg.model, model.training_run, spec.digest))

