"""``vflsec party --config party.toml``: run one party of a VFL job in its
own process, over :class:`~vflsec.federation.grpc_channel.GrpcChannel`.

The party configuration is described in :mod:`.config`, the job description
(``job.toml``; ``kind = "glm"`` by default, ``"splitnn"``, ``"trees"``, or ``"predict"``,
which scores new rows with the parties' saved GLM instead of training:
:mod:`.predict_kind`) in :mod:`.job_spec`; what differs between kinds is in
:mod:`.kinds`.

Start-up, in order: check everything the party holds before any socket is
opened (:func:`.startup.prepare_party`: the party file and its addresses,
the job file with the protocol's own parameter checks, the TLS files, the
CSVs; a mistake is one line ``vflsec party: error: <what> -- <fix>`` and exit
status 2, as is a listen address that cannot be bound); connect to every
peer (``connect_timeout``); agree on
the job (:func:`.handshake.agree_on_job`: SHA-256 of the job description
and every data party's number of feature columns, then a fresh random session); entity
alignment by PSI (:mod:`vflsec.federation.psi`), rows ordered by the sorted
common IDs; agree on the start epoch (``--resume``: one past the last epoch
every data party has checkpointed; refused where the job kind says so, e.g. a
split-learning defense with state of its own; an "hdp" job resumes with the
repeated releases counted by each party's privacy accountant, and reports the
larger epsilon); build the rows the program takes (the kind's
:meth:`~.kinds.JobKind.party_rows`: for a GLM job the design of
:mod:`vflsec.glm.model`, the model the estimator trains, intercept included);
train; with ``evaluate = true`` in the job file,
align the held-out rows (``[party] test_data``) by PSI and score the model
on them; write the output; tell the peers this party is done.

The active party ends with one summary line: the held-out metric beside its
reference (e.g. the majority rate; for a classification also the ROC AUC, the
PR AUC where positives are below 20%, and a decision threshold other than 0.5)
when the job evaluates, else the training
metric labelled as such and how to get a held-out one; bytes sent and
received; the wall time split into connecting, PSI, training (compute /
crypto / messaging) and evaluation; the privacy spent (epsilon, delta).

Mistakes found between the parties are one line with the fix and exit status 2
(``vflsec party: error: <what> -- <fix>``), at every party: a peer that never
answers within ``connect_timeout`` (naming it, its address and what to check);
job files that differ (every party names the keys that differ,
:func:`.handshake.agree_on_job`); no ID held by every party (each data party
shows its own first IDs, the peers' ID formats and what to change,
:func:`vflsec.federation.psi.exchange_id_formats`); a predict job's model
from another training run. A party that stops on such a mistake tells its
peers, which stop with ``peer party '<name>' stopped the job: ... -- <fix>``
and exit status 2 too.

Progress while a person waits: lines while connecting and agreeing on the job
(every :data:`WAIT_LOG_INTERVAL` s, with the time after which the party gives
up), and PSI's buckets done with an estimate of the time left (at most every
:data:`PSI_LOG_INTERVAL` s).

Failures of the run: any other error stops the party with exit status 1 and one line on
stderr, ``vflsec party <name>: error: ...``; its peers are told and stop
with ``peer party '<name>' failed: it aborted the job: ...``. A peer that
dies or hangs is detected by the heartbeat within ``peer_timeout`` seconds:
``peer party '<name>' failed: no answer for ... s``. A peer that is alive but
sends nothing fails the job at the step's deadline (:mod:`.deadlines`):
``peer party '<name>' sent nothing for ... s during <phase>: ... tagged '<tag>'``.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence

from .._process_memory import current_rss_bytes, peak_rss_bytes
from .._progress import EpochProgress, time_left
from ..errors import CommandError
from ..federation.ids import ids_sha256
from . import deadlines
from .handshake import agree_on_job, agree_on_plan, checkpoint_fingerprint
from .job_overrides import parse_job_overrides
from .job_spec import JobSpec
from .party_shards import ShardFolder, shard_parent
from .peer_mistakes import abort_reason, aligned_job, connect, no_common_ids, peer_mistake
from .startup import PartyRows, PartyStart, prepare_party

__all__ = ["main", "run_party"]

logger = logging.getLogger("vflsec.network")

# Seconds between the "still waiting" lines while a party waits for its peers.
WAIT_LOG_INTERVAL = 10.0
# Fewest seconds between two lines of PSI's progress.
PSI_LOG_INTERVAL = 5.0


@contextlib.contextmanager
def _waiting(name: str, what: str, interval: Optional[float] = None, gives_up: str = "") -> Iterator[None]:
    """Log ``what`` (e.g. "connecting to 'p1' at host:port") once on entry
    and then every ``interval`` seconds with the time spent so far (and
    ``gives_up``: when the party stops waiting), until the block ends."""
    interval = WAIT_LOG_INTERVAL if interval is None else interval
    start = time.perf_counter()
    done = threading.Event()
    logger.info("party %r: %s", name, what)
    limit = f"; {gives_up}" if gives_up else ""

    def tick() -> None:
        while not done.wait(interval):
            logger.info("party %r: still %s (%.0f s so far%s)", name, what, time.perf_counter() - start, limit)

    thread = threading.Thread(target=tick, daemon=True, name=f"vflsec-{name}-waiting")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


class _PsiProgress:
    """``progress(peer, buckets_done, buckets)`` of :func:`~vflsec.federation.psi.align_ids`: a line
    ``PSI with 'p1': 12/40 buckets, 8 s, about 19 s left`` at most every :data:`PSI_LOG_INTERVAL`
    seconds (none for a run with that peer that ends sooner). The seconds count from the run's
    start; the time left from the pace after its first bucket (the first one also waits for the
    pipeline to fill)."""

    def __init__(self, name: str, every: Optional[float] = None):
        self.name = name
        self.every = PSI_LOG_INTERVAL if every is None else every
        self.peer: Optional[str] = None
        self.start = self.seen = time.perf_counter()
        self.first = self.last = self.start

    def __call__(self, peer: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if peer != self.peer:  # a new two-party run, which began when the last one ended
            self.peer, self.start = peer, (self.seen if self.peer is not None else self.start)
            self.first = self.last = now
        self.seen = now
        if now - self.last < self.every or done >= total or done < 2:
            return
        self.last = now
        logger.info("party %r: PSI with %r: %d/%d buckets, %.0f s, %s", self.name, peer, done, total,
                    now - self.start, time_left(now - self.first, done - 1, total - 1))


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2f} MB"


def _epsilon_text(spent: Optional[str]) -> str:
    """The output's ``privacy_spent`` text (``str`` of a PrivacySpent: "epsilon 5
    (delta 1e-05, replace-one)" or "no DP guarantee (why)"), an older
    ``epsilon=..., delta=...`` text shortened, or "no DP" when there is none."""
    if not spent:
        return "no DP"
    if spent.startswith(("epsilon ", "no DP guarantee")):
        return spent
    found = re.search(r"epsilon=([0-9.eE+-]+), delta=([0-9.eE+-]+)", spent)
    if found is None:
        return f"privacy spent {spent}"
    return f"epsilon {float(found.group(1)):.2f} (delta {float(found.group(2)):.3g})"


HELD_OUT_HINT = ("training rows only: for a held-out score set evaluate = true in the job file and [party] "
                 "test_data in every data party's config (vflsec party-data writes <name>-test.csv)")


def _metric_text(summary: Mapping[str, Any]) -> str:
    """The held-out metric beside its reference, then the training metrics
    (labelled as training, with how to get a held-out score when there is none)."""
    parts = []
    evaluation = summary.get("evaluation")
    if evaluation:
        value = evaluation.get("value")
        shown = "n/a" if value is None else f"{value:.4f}"
        text = f"held-out {evaluation['metric']} {shown} on {evaluation['n']} test rows"
        if evaluation.get("baseline") is not None:
            text += f" ({evaluation.get('baseline_name', 'baseline')} {evaluation['baseline']:.4f})"
        parts.append(text + _ranking_text(evaluation))
    history = summary.get("history") or {}
    # A trees job's history has the log loss per tree as "train_loss".
    training = [f"training {shown} {history[key][-1]:.4f}" for key, shown in
                (("accuracy", "accuracy"), ("loss", "loss"), ("train_loss", "log loss")) if history.get(key)]
    if training:
        parts.append(", ".join(training) + ("" if evaluation else f" ({HELD_OUT_HINT})"))
    # No metric at all: a protocol that reveals nothing during training (e.g. "mpc": no loss per step).
    how = HELD_OUT_HINT.split(": ", 1)[1]
    return ", ".join(parts) or f"no metric (the protocol reveals none during training: {how})"


def _ranking_text(evaluation: Mapping[str, Any]) -> str:
    """A classification's ranking metrics beside its accuracy (ROC AUC; PR AUC where positives
    are rare, with their share) and a decision threshold other than 0.5, with how it was chosen."""
    text = ""
    if "auc" in evaluation:
        auc = evaluation["auc"]
        text += ", AUC " + ("n/a (one class)" if auc is None else f"{auc:.4f}")
    if "pr_auc" in evaluation:
        pr_auc = evaluation["pr_auc"]
        text += ", PR-AUC " + ("n/a" if pr_auc is None else f"{pr_auc:.4f}")
        if evaluation.get("positive_rate") is not None:
            text += f" ({evaluation['positive_rate']:.1%} positives)"
    choice = evaluation.get("threshold_choice")
    if choice:
        reached = "" if choice.get("reached", True) else ", target not reached"
        text += (f", threshold {choice['threshold']:.4g} chosen on these rows for {choice['rule']} (precision "
                 f"{choice['precision']:.3f}, recall {choice['recall']:.3f}{reached})")
    elif evaluation.get("threshold") not in (None, 0.5):
        text += f", threshold {evaluation['threshold']:.4g}"
    return text


def _wall_time_text(summary: Mapping[str, Any]) -> str:
    timings = summary.get("timings", {})
    program = summary.get("program_timings") or {}
    train = f"train {timings.get('train_s', 0.0):.1f} s"
    if {"compute", "crypto", "messaging"} <= set(program):
        train += (f": compute {program['compute']:.1f} s, crypto {program['crypto']:.1f} s, "
                  f"messaging {program['messaging']:.1f} s")
    parts = [f"connect+agree {timings.get('connect_and_agree_s', 0.0):.1f} s", f"PSI {timings.get('psi_s', 0.0):.1f} s",
             train]
    if "shards_s" in timings:
        parts.insert(2, f"writing shards {timings['shards_s']:.1f} s")
    if "evaluate_s" in timings:
        parts.append(f"held-out evaluation {timings['evaluate_s']:.1f} s")
    return "wall time {:.1f} s ({})".format(timings.get("total_s", 0.0), ", ".join(parts))


def _prediction_text(summary: Mapping[str, Any]) -> str:
    counts = summary.get("counts", {})
    text = (f"scored {counts.get('joint', 0) + counts.get('active_only', 0)} of {summary.get('n_customers', 0)} "
            f"customers ({counts.get('joint', 0)} with every party, {counts.get('active_only', 0)} by the "
            f"active-only model, {counts.get('missing', 0)} not scored: missing = {summary.get('missing_policy')!r})")
    if summary.get("threshold") not in (None, 0.5):
        text += f", decision threshold {summary['threshold']:.4g}"
    if summary.get("scores"):
        text += f", scores in {summary['scores']}"
    return text


def _final_line(name: str, summary: Mapping[str, Any]) -> str:
    """The active party's one-line summary: held-out (else training) metric, bytes,
    wall time split, epsilon (a predict job: what it scored, bytes, wall time)."""
    traffic = f"sent {_mb(summary.get('wire_bytes_sent', 0))}, received {_mb(summary.get('wire_bytes_received', 0))}"
    if "counts" in summary:
        timings = summary.get("timings", {})
        wall = (f"wall time {timings.get('total_s', 0.0):.1f} s (connect+agree "
                f"{timings.get('connect_and_agree_s', 0.0):.1f} s, PSI {timings.get('psi_s', 0.0):.1f} s, scoring "
                f"{timings.get('predict_s', 0.0):.1f} s)")
        return f"party {name!r} done: " + "; ".join([_prediction_text(summary), traffic, wall])
    info = summary.get("info") or {}
    if "engine_bytes_in" in info:  # an MPC engine's own link (vflsec.mpc.links.MeteredLinks), beside the channel's
        traffic += (f" (the MPC engine's link besides: {_mb(info['engine_bytes_in'])} in, "
                    f"{_mb(info.get('engine_bytes_out', 0))} out)")
    parts = [
        _metric_text(summary),
        traffic,
        _wall_time_text(summary),
        _epsilon_text(summary.get("privacy_spent")),
    ]
    return f"party {name!r} done: " + "; ".join(parts)


def _json_label(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _make_channel(start: PartyStart, insecure: bool):
    """The party's channel (addresses, peers and TLS files checked by :func:`.startup.prepare_party`)."""
    from ..federation.grpc_channel import GrpcChannel

    cfg = start.cfg
    others = [p for p in start.probe.parties if p != cfg.name]
    return GrpcChannel(cfg.name, cfg.listen, {p: cfg.peers[p] for p in others}, tls=start.tls, insecure=insecure,
                       settings=start.settings, session="handshake")


def _write_json(path: Path, summary: Dict[str, Any]) -> None:
    # The summary holds this party's model weights: 0600, atomic, never through a symlink.
    from ..federation.private_files import write_private_bytes

    path.parent.mkdir(parents=True, exist_ok=True)
    write_private_bytes(path, json.dumps(summary, indent=1).encode("utf-8"))


def run_party(config: Path, *, resume: bool = False, insecure: bool = False) -> Dict[str, Any]:
    """Run this party's side of the job; returns the summary it writes to
    ``output`` (raises on failure, after telling the peers; a mistake in the
    party's own files is a :class:`~vflsec.errors.CommandError` before any
    socket is opened)."""
    return _run(prepare_party(config, resume=resume, insecure=insecure), resume=resume, insecure=insecure)


def _run(start: PartyStart, *, resume: bool, insecure: bool) -> Dict[str, Any]:
    from ..federation.address import parse_address
    from ..federation.checkpoint import EpochCheckpoint
    from ..federation.psi import align_ids, row_order
    from ..he.executor import get_executor
    from ..mpc.links import MeteredLinks, use_links

    started = start.started or time.perf_counter()
    cfg, spec, probe, role = start.cfg, start.spec, start.probe, start.role
    kind = spec.kind
    leader = probe.active
    followers = [p for p in probe.parties if p != leader]
    holds_data = cfg.name in probe.data_parties
    ids: Sequence[str] = [] if start.rows is None else start.rows.ids
    X = None if start.rows is None else start.rows.X
    y = None if start.rows is None else start.rows.y

    channel = _make_channel(start, insecure)
    try:
        channel.start()
    except (OSError, RuntimeError) as exc:  # grpc: "Failed to bind"; before any peer is dialled
        raise CommandError(" ".join(str(exc).split()) + " (the port is taken, or the host is not this machine's)",
                           f"free the port or choose another [party] listen in {start.config} (and the "
                           f"address of {cfg.name!r} in its peers' [peers])") from exc
    # Every protocol wait has a deadline naming the peer, the tag and the phase (runtime.deadlines).
    channel.set_recv_timeout(channel.settings.handshake_timeout, deadlines.PHASE_HANDSHAKE)
    step_timeout = deadlines.step_timeout(channel.settings, kind, probe)
    timings: Dict[str, float] = {}
    shards: Optional[ShardFolder] = None  # a job with shard_rows: the folder of the aligned rows' shards
    try:
        t = time.perf_counter()
        peers = ", ".join(f"{p!r} at {cfg.peers[p]}" for p in probe.parties if p != cfg.name)
        settings = channel.settings
        with _waiting(cfg.name, f"waiting for {peers} to answer",
                      gives_up=f"gives up after {settings.connect_timeout:g} s: [network] connect_timeout"):
            connect(channel, start)
        waited_for = ", ".join(repr(p) for p in (followers if cfg.name == leader else [leader]))
        with _waiting(cfg.name, f"waiting for {waited_for} to agree on the job",
                      gives_up=f"gives up after {settings.handshake_timeout:g} s without a message: [network] "
                               "handshake_timeout"):
            widths = agree_on_job(channel, spec, leader, followers, None if X is None else int(X.shape[1]))
        timings["connect_and_agree_s"] = time.perf_counter() - t
        tags = deadlines.expected_tags(kind, probe, evaluate=spec.evaluate)
        if tags is not None:  # any other tag is now a protocol error naming its sender
            channel.expect_tags(tags)
        channel.set_recv_timeout(step_timeout, deadlines.PHASE_PSI)
        if kind.scores_saved_model:  # a predict job: every model from the same training run, before any PSI
            kind.agree_on_model(channel, probe, start.model)
        t = time.perf_counter()
        common: Sequence[str] = []
        if holds_data:
            # Its PSI buckets run where its HE work runs: its threads, or its Ray cluster's workers.
            members = probe.passives if role == "active" else ()
            logger.info("party %r: aligning its %d IDs by PSI with %s", cfg.name, len(ids),
                        ", ".join(repr(p) for p in (members or [leader])))
            common = align_ids(channel, ids, leader=leader, members=members, executor=get_executor(),
                               progress=_PsiProgress(cfg.name))
            if not common and not kind.scores_saved_model:
                raise no_common_ids(channel, ids, leader, members)
        timings["psi_s"] = time.perf_counter() - t
        if kind.scores_saved_model:
            assert X is not None  # every party of a predict job holds data (its job has no coordinator)
            t = time.perf_counter()
            scored = kind.score(channel, probe, start.model, ids, X, common, cfg.output)
            timings["predict_s"] = time.perf_counter() - t
            timings["total_s"] = time.perf_counter() - started
            summary = {"party": cfg.name, "role": role, "kind": kind.name, "n_samples": len(common), **scored,
                       **_traffic(channel), "timings": timings, "peak_rss_bytes": peak_rss_bytes(),
                       "job_sha256": spec.digest,
                       "ids_sha256": ids_sha256(common)}
            return _finish(channel, cfg, role, summary)
        checkpoint = None
        last_epoch = -1
        if holds_data and kind.writes_checkpoints and cfg.checkpoint_dir is not None:
            checkpoint = EpochCheckpoint(cfg.checkpoint_dir, cfg.name, checkpoint_fingerprint(spec, common))
            last_epoch = checkpoint.latest_epoch() if resume else -1
        # The leader announces the plan after its PSI, which a party without data does not wait through.
        channel.set_recv_timeout(step_timeout, deadlines.PHASE_PLAN)
        n_samples, start_epoch = agree_on_plan(channel, spec, leader, followers, probe.data_parties,
                                               len(common) or None, last_epoch, resume)
        if holds_data and n_samples != len(common):
            raise ValueError(f"the leader announced {n_samples} aligned rows, this party aligned {len(common)}")
        job = aligned_job(spec, n_samples, start_epoch, widths)
        ids_digest = ids_sha256(common)
        if X is not None and kind.shard_rows(job):
            assert start.rows is not None  # X is its table
            # Written once as Parquet shards in the aligned order and streamed per batch (.party_shards): the
            # table as read, the labels and the IDs are dropped here (the output needs only the IDs' digest).
            t = time.perf_counter()
            order = row_order(ids, common)
            ids = common = start.rows.ids = []
            X = y = None
            shards = ShardFolder.create(shard_parent(cfg, start.config), cfg.name, keep=cfg.keep_shards)
            data = kind.sharded_party_data(job, spec.fields, spec.row_norm, cfg.name, start.rows.take_features(),
                                           order, start.rows.take_labels(), checkpoint, shards.path)
            del order
            timings["shards_s"] = time.perf_counter() - t
        else:
            if X is not None:
                assert start.rows is not None  # X is its table
                order = row_order(ids, common)
                # The rows as the program takes them, in the aligned order, from the table as read (handed over
                # by start.rows, so the kind's rows hold its last reference): a GLM designs them batch by batch
                # from the table and the order (no second table); other kinds hold the ordered, normalised copy.
                X = kind.party_rows(job, spec.fields, spec.row_norm, cfg.name, start.rows.take_features(), order)
                y = y[order] if y is not None else None
            data = kind.party_data(job, spec.fields, cfg.name, X, y, checkpoint)
        logger.info("party %r: %d aligned rows, training a %s job from epoch %d", cfg.name, n_samples, kind.name,
                    start_epoch)
        if data is not None and hasattr(data, "progress"):
            data.progress = EpochProgress(job.epochs, logger.info, prefix=f"party {cfg.name!r}: ")
        t = time.perf_counter()
        channel.set_recv_timeout(step_timeout, deadlines.phase_training(kind))
        # An MPC protocol's engine opens its own link between the parties (vflsec.mpc.links), on this party's
        # listen host, with the same CA and certificate as the channel, behind a relay that counts its bytes
        # (the output's info.engine_bytes_in / _out), which emulates [network] engine_link when the party file sets
        # one; other programs never open one.
        with use_links(MeteredLinks(parse_address(cfg.listen, "[party] listen")[0],
                                    None if insecure else cfg.tls, profile=start.engine_link)), \
                _ends_if_stuck_after_a_failure(channel, cfg.name):
            result = kind.program(job, role)(channel, job, data)
        timings["train_s"] = time.perf_counter() - t
        trained_rss = current_rss_bytes()  # what training holds: the rows (or two shards), not the PSI's peak
        # The kind's entries (privacy spent, model files) describe the trained model, before any evaluation.
        kind_summary = kind.summary(job, result, cfg.output, data)
        if role == "active" and start.rows is not None and start.rows.label_names is not None:
            # The labels' own names (coded 0 and 1), which a predict job's scores file writes.
            kind_summary["label_names"] = [_json_label(v) for v in start.rows.label_names]
        evaluation = None
        if spec.evaluate:
            t = time.perf_counter()
            channel.set_recv_timeout(step_timeout, deadlines.PHASE_EVALUATION)
            evaluation = _evaluate(channel, spec, job, role, result, leader, probe, start.test_rows, data)
            timings["evaluate_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - started
        summary = {
            "party": cfg.name, "role": role, "kind": kind.name, "n_samples": n_samples,
            "start_epoch": start_epoch,
            **kind_summary,
            "evaluation": evaluation,
            "history": {k: [float(v) for v in vals] for k, vals in result.history.items()},
            "program_timings": dict(result.timings), "timings": timings, "peak_rss_bytes": peak_rss_bytes(),
            "rss_after_training_bytes": trained_rss,
            "compute": _compute_summary(),
            **_traffic(channel),
            "job_sha256": spec.digest,
            "ids_sha256": ids_digest,
        }
        if shards is not None and shards.keep:
            summary["shards_kept_in"] = str(shards.path)
        return _finish(channel, cfg, role, summary)
    except BaseException as exc:
        channel.notify_abort(abort_reason(exc))
        raise
    finally:
        channel.close()
        if shards is not None:
            shards.close()


#: seconds a program may take to notice its channel's failure before the process ends without it
STUCK_GRACE_S = 1.0


@contextlib.contextmanager
def _ends_if_stuck_after_a_failure(channel, name: str) -> Iterator[None]:
    """A program blocked in native code (an MPC engine waiting on its own link) cannot see its channel's
    :class:`~vflsec.federation.PeerFailed`, and the engine may crash the process when it gives up on the
    dead peer seconds later. So once the channel has failed and the program has not returned within
    :data:`STUCK_GRACE_S`, the process ends as a failed run ends: the one line naming the peer, exit status
    1 (``os._exit``: the native threads are not unwound). A program in Python returns long before."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            failure = getattr(channel, "failure", None)
            if failure is not None:
                if done.wait(STUCK_GRACE_S):
                    return
                print(f"vflsec party {name}: error: {failure}", file=sys.stderr, flush=True)
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="vflsec-stuck-watch").start()
    try:
        yield
    finally:
        done.set()


def _compute_summary() -> Dict[str, Any]:
    """Where this party's HE vector work and PSI buckets ran: its local pool (and threads), or the
    Ray cluster with the HE tasks and the PSI bucket operations each node ran (Ray node IDs)."""
    from ..federation.psi_workers import bucket_counts
    from ..he.executor import LocalPoolExecutor, get_executor

    executor = get_executor()
    if isinstance(executor, LocalPoolExecutor):
        return {"engine": "local", "workers": executor.n_workers}
    return {"engine": type(executor).__name__, "cluster": getattr(executor, "cluster_address", None),
            "tasks_per_node": dict(getattr(executor, "task_counts", {})),
            "psi_buckets_per_node": bucket_counts(executor)}


def _traffic(channel) -> Dict[str, Any]:
    return {"bytes_sent_by_tag": channel.bytes_by_tag(), "payload_bytes_sent": sum(channel.bytes_by_tag().values()),
            "wire_bytes_sent": channel.wire_bytes_sent, "wire_bytes_received": channel.wire_bytes_received}


def _finish(channel, cfg, role: str, summary: Dict[str, Any]) -> Dict[str, Any]:
    """Write the party's output, log the active party's final line, tell the peers it is done."""
    if cfg.output is not None:
        _write_json(cfg.output, summary)
    if role == "active":
        logger.info("%s", _final_line(cfg.name, summary))
    elif summary.get("released"):  # a passive party of a predict job: what it released, what is left
        released = summary["released"]
        logger.info("party %r released %s of %d customers; its predict ledger %s; left: %d jobs, %d customers",
                    cfg.name, released["what"], released["customers"], released["ledger"], released["left"]["jobs"],
                    released["left"]["scores"])
    channel.notify_done()
    return summary


def _evaluate(channel, spec: JobSpec, job, role: str, result, leader: str, probe, test_rows: Optional[PartyRows],
              data) -> Optional[Dict[str, Any]]:
    """Align the held-out rows by PSI (as the training rows), prepare them as the
    training rows (the kind's ``party_rows``; the table as read handed over by
    ``test_rows`` and dropped once ordered) and score the trained model on them
    (the kind's ``evaluate``, with the program's ``data``); the active party's
    metrics, else None."""
    from ..federation.psi import align_ids, row_order
    from ..he.executor import get_executor

    X = y = None
    if role in ("active", "passive") and test_rows is not None:
        members = probe.passives if role == "active" else ()
        common = align_ids(channel, test_rows.ids, leader=leader, members=members, executor=get_executor(),
                           progress=_PsiProgress(channel.name))
        if not common:
            raise no_common_ids(channel, test_rows.ids, leader, members, "held-out IDs")
        order = row_order(test_rows.ids, common)
        X = spec.kind.party_rows(job, spec.fields, spec.row_norm, channel.name, test_rows.take_features(), order)
        y = test_rows.y[order] if test_rows.y is not None else None
    return spec.kind.evaluate(channel, job, role, result, X, y, data=data)


def _freed_memory_goes_back() -> None:
    """Freed large blocks go back to the system at once in this party's process, so a step's
    temporary memory (the CSV parser's blocks, the sorts and hash tables of alignment, a
    bucket's strings) does not stay counted in its resident memory for the rest of the run:
    Arrow's arrays on the C library's allocator (Arrow's default pool keeps what it frees), and
    glibc's mmap threshold fixed at its initial 128 KiB (it otherwise rises after each large
    free, up to 32 MiB, and blocks below it stay in the heap until trimmed)."""
    try:
        import pyarrow as pa
    except ImportError:
        pass
    else:
        pa.set_memory_pool(pa.system_memory_pool())
    if sys.platform.startswith("linux"):
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
        except (OSError, AttributeError):  # not glibc (musl has no mallopt): its own policy applies
            pass


_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def main(config: str, resume: bool = False, insecure: bool = False, quiet: bool = False,
         job: Sequence[str] = ()) -> int:
    """CLI entry (``vflsec party``): exit status 0 on success, 1 on a failure of the run. A mistake in the
    party's own files (configuration, job, certificates, CSVs) is a :class:`~vflsec.errors.CommandError`
    raised before any socket is opened (:func:`.startup.prepare_party`; ``vflsec.cli``: one line, exit
    status 2), as is a listen address that cannot be bound, and a mistake found between the parties
    (:mod:`.peer_mistakes`: by this party or by a peer). ``job``: the ``--job KEY=VALUE`` overrides of the
    job file's keys (:mod:`.job_overrides`)."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _freed_memory_goes_back()
    start = prepare_party(Path(config), resume=resume, insecure=insecure, job_overrides=parse_job_overrides(job))
    if insecure:
        print("vflsec party: WARNING: --insecure: plaintext transport, peers are NOT authenticated",
              file=sys.stderr)
    name = start.cfg.name
    try:
        summary = _run(start, resume=resume, insecure=insecure)
    except CommandError:
        raise
    except KeyboardInterrupt:
        print(f"vflsec party {name}: interrupted", file=sys.stderr)
        return 130
    except BaseException as exc:  # noqa: BLE001 - reported as one clear line
        mistake = peer_mistake(exc)
        if mistake is not None:  # a mistake a peer found: exit status 2 here too
            raise mistake from exc
        print(f"vflsec party {name}: error: {exc}", file=sys.stderr)
        return 1
    if not quiet:
        print(json.dumps({k: summary[k] for k in ("party", "role", "kind", "protocol", "n_samples", "counts", "scores",
                                                 "start_epoch", "evaluation", "timings") if k in summary}))
    return 0
