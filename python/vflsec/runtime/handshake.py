"""The start-up agreements of ``vflsec party``, led by the active party.

* :func:`agree_on_job`: every party sends the SHA-256 of its job description
  (and of each of its keys, :meth:`.job_spec.JobSpec.key_digests`) to the
  leader, which refuses any mismatch -- every party then stops with one line
  naming the keys that differ and exit status 2 -- then opens a fresh random
  session id (messages of any other session are rejected). A job kind whose
  job has ``widths`` (GLM) also agrees here on every data party's block
  width, before any key is made: each data party announces the feature
  columns of its data, the leader collects them (a job file that pins
  ``widths`` must match them) and announces the whole map with the session,
  each party checks its own entry, and the followers compare the SHA-256 of
  (job digest, widths) with one another, so a leader that tells two parties
  different widths stops the job. No party can check another's width: the
  map is what each party announced, public to every party and the same for
  all; pin ``widths`` in the job file to hold each party to a width agreed
  beforehand.
* :func:`agree_on_plan`: ``(n_samples, start_epoch)``; with ``--resume`` the
  start is one past the last epoch every data party has checkpointed, unless
  the job kind refuses to resume that job.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import CommandError
from .job_spec import JobSpec

__all__ = ["agree_on_job", "agree_on_plan", "checkpoint_fingerprint"]

TAG_HELLO = "job_hello"
TAG_SESSION = "job_session"
TAG_READY = "job_ready"
TAG_GO = "job_go"
TAG_RESUME = "job_resume"
TAG_PLAN = "job_plan"
TAG_WIDTHS = "job_widths"
#: every tag the handshake receives
TAGS = (TAG_HELLO, TAG_SESSION, TAG_READY, TAG_GO, TAG_RESUME, TAG_PLAN, TAG_WIDTHS)

Widths = Optional[Dict[str, int]]


def agree_on_job(channel, spec: JobSpec, leader: str, followers: List[str], width: Optional[int] = None) -> Widths:
    """Compare job digests and agree on the block widths, then move everyone to
    a fresh random session.

    ``width``: this party's number of feature columns (None for a party
    without data). Returns the agreed widths, party -> feature columns, for
    the job (:meth:`JobSpec.job`): None where the job kind has none, or where
    a data party announced none (a job that needs them then refuses to run).
    """
    with_widths = "widths" in spec.kind.job_fields()
    if channel.name != leader:
        hello: Dict[str, Any] = {"job_sha256": spec.digest, "key_sha256": _key_digests_text(spec)}
        if with_widths and width is not None:
            hello["n_features"] = int(width)
        channel.send(leader, TAG_HELLO, hello)
        reply = channel.recv(leader, TAG_SESSION)
        if not isinstance(reply, dict) or not ("error" in reply or isinstance(reply.get("session"), str)):
            raise ValueError(f"the leader {leader!r} answered the job agreement with {_short(reply)}")
        if "error" in reply:
            if "differs" in reply:
                raise _follower_mistake(spec, leader, channel.name, reply["differs"])
            raise ValueError(f"the leader {leader!r} refused the job: {reply['error']}")
        channel.begin_session(reply["session"])
        # Checked in the new session: a refusal's abort then reaches the leader, which is in it already.
        widths = _announced_widths(spec, leader, reply.get("widths"), channel.name, width) if with_widths else None
        channel.send(leader, TAG_READY, b"")
        channel.recv(leader, TAG_GO)
        if with_widths:
            _compare_widths(channel, spec, widths, leader, followers)
        return widths
    differs: Dict[str, Optional[List[str]]] = {}  # follower -> the keys that differ (None: not said)
    announced: Dict[str, Any] = {leader: width}
    for follower in followers:
        hello = channel.recv(follower, TAG_HELLO)
        if not isinstance(hello, dict) or hello.get("job_sha256") != spec.digest:
            differs[follower] = _differing_keys(spec, hello.get("key_sha256") if isinstance(hello, dict) else None)
        else:
            announced[follower] = hello.get("n_features")
    error = None
    widths = None
    if differs:
        error = (f"job description of {sorted(differs)} differs from the leader's (sha256 {spec.digest[:16]}...); "
                 "every party must run the same job.toml")
    elif with_widths:
        try:
            widths = _agreed_widths(spec, announced)
        except ValueError as exc:
            error = str(exc)
    if error is not None:
        refusal: Dict[str, Any] = {"error": error}
        if differs:  # key names only: every party names them (the wire carries no nested dict)
            refusal["differs"] = json.dumps(differs, sort_keys=True)
        for follower in followers:
            try:
                channel.send(follower, TAG_SESSION, refusal)
            except Exception:  # noqa: BLE001 - a follower that stopped on the refusal already; report the refusal
                pass
        if differs:
            raise _leader_mistake(spec, differs)
        raise ValueError(error)
    session = f"{spec.digest[:16]}-{secrets.token_hex(16)}"
    channel.accept_session(session)
    opened: Dict[str, Any] = {"session": session}
    if widths is not None:  # the wire carries no nested dict: canonical JSON
        opened["widths"] = json.dumps(widths, sort_keys=True)
    for follower in followers:
        channel.send(follower, TAG_SESSION, opened)
    channel.begin_session(session)
    for follower in followers:
        channel.recv(follower, TAG_READY)
    for follower in followers:
        channel.send(follower, TAG_GO, b"")
    return widths


#: hex digits kept of each key's digest (a comparison, not a commitment: 64 bits tell keys apart)
_KEY_DIGEST_HEX = 16


def _key_digests_text(spec: JobSpec) -> str:
    """``{key: digest}`` of the job's keys as canonical JSON (the wire carries no nested dict)."""
    digests = {key: digest[:_KEY_DIGEST_HEX] for key, digest in spec.key_digests().items()}
    text = json.dumps(digests, sort_keys=True, separators=(",", ":"))
    return text if len(text) < 60_000 else ""  # a wire string holds 64 KiB; the keys then go unnamed


def _differing_keys(spec: JobSpec, theirs: Any) -> Optional[List[str]]:
    """The keys whose digests differ between this job and a peer's ``{key: digest}`` text, a key
    only one of them has included; None when the peer sent no usable map (an older vflsec)."""
    try:
        peer = json.loads(theirs) if isinstance(theirs, str) and theirs else None
    except ValueError:
        peer = None
    if not isinstance(peer, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in peer.items()):
        return None
    own = {key: digest[:_KEY_DIGEST_HEX] for key, digest in spec.key_digests().items()}
    return sorted(key for key in set(own) | set(peer) if own.get(key) != peer.get(key))[:50]


def _shown_path(spec: JobSpec) -> str:
    return os.path.normpath(spec.source) if spec.source is not None else "the job file"


def _keys_text(spec: JobSpec, keys: Optional[Sequence[str]], own_values: bool) -> str:
    """``lr (here 0.5), options.k (not set here)``: the keys that differ, with this party's values
    (shown here only, never sent)."""
    if keys is None:
        return "keys its vflsec version does not name (every party on the same vflsec version names them)"
    if not keys:  # every key alike and yet another digest
        return "no single key (are both parties on the same vflsec version?)"
    values = spec.keyed()
    shown = []
    for key in keys:
        if not own_values:
            shown.append(key)
        elif key in values:
            text = json.dumps(values[key], default=str)
            shown.append(f"{key} (here {text if len(text) <= 40 else text[:40] + '...'})")
        else:
            shown.append(f"{key} (not set here)")
    return "[job] " + ", ".join(shown)


#: what a party tells its peers when it stops on different job files (each party names the keys)
_SHARED = "the parties run different job files (each party names the keys) -- use the same job.toml on every party"
_SAME_JOB_FIX = "use the same job.toml (and the same --job overrides) on every party"


def _leader_mistake(spec: JobSpec, differs: Mapping[str, Optional[List[str]]]) -> CommandError:
    """The leader's line: which party's job file differs from its own, in which keys."""
    parts = [f"the job file of party {party!r} differs from this party's {_shown_path(spec)} in "
             f"{_keys_text(spec, keys, own_values=True)}" for party, keys in sorted(differs.items())]
    names = ", ".join(repr(p) for p in sorted(differs))
    return CommandError("; ".join(parts),
                        f"{_SAME_JOB_FIX} (copy {_shown_path(spec)} to {names})",
                        shared=_SHARED)


def _follower_mistake(spec: JobSpec, leader: str, name: str, differs_text: Any) -> CommandError:
    """A follower's line from the leader's refusal: its own keys that differ, or which other
    party's file differs."""
    try:
        differs = json.loads(differs_text) if isinstance(differs_text, str) else None
    except ValueError:
        differs = None
    if not isinstance(differs, dict) or not differs:
        raise ValueError(f"the leader {leader!r} refused the job naming no party: {_short(differs_text)}")
    if name in differs:
        keys = differs[name]
        keys = [str(k) for k in keys] if isinstance(keys, list) else None
        return CommandError(f"this party's job file {_shown_path(spec)} differs from the leader's (party "
                            f"{leader!r}) in {_keys_text(spec, keys, own_values=True)}",
                            f"{_SAME_JOB_FIX} (copy the leader's job file over {_shown_path(spec)})", shared=_SHARED)
    parts = []
    for party, keys in sorted(differs.items()):
        keys = [str(k) for k in keys] if isinstance(keys, list) else None
        parts.append(f"the job file of party {party!r} differs from the leader's (party {leader!r}) in "
                     f"{_keys_text(spec, keys, own_values=False)}")
    names = ", ".join(repr(p) for p in sorted(differs))
    return CommandError("; ".join(parts),
                        f"{_SAME_JOB_FIX} (copy the leader's job file to {names})", shared=_SHARED)


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _pinned_widths(spec: JobSpec) -> Widths:
    pinned = spec.fields.get("widths")
    return None if pinned is None else {str(k): int(v) for k, v in dict(pinned).items()}


def _agreed_widths(spec: JobSpec, announced: Dict[str, Any]) -> Widths:
    """The leader's map from every party's announcement (ValueError naming the
    party for a bad one, or one that differs from the job file's ``widths``)."""
    data_parties = spec.probe_job().data_parties
    for party, value in announced.items():
        if party not in data_parties:
            if value is not None:
                raise ValueError(f"party {party!r} holds no data but announced {_short(value)} feature columns")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"party {party!r} announced {_short(value)} feature columns, not an int >= 1")
    pinned = _pinned_widths(spec)
    if pinned is not None:
        for party in data_parties:
            if announced.get(party) is not None and announced[party] != pinned[party]:
                raise ValueError(f"party {party!r} holds {announced[party]} feature columns, the job file pins "
                                 f"widths.{party} = {pinned[party]}")
        return pinned
    if any(announced.get(party) is None for party in data_parties):
        return None
    return {party: int(announced[party]) for party in data_parties}


def _announced_widths(spec: JobSpec, leader: str, widths: Any, name: str, width: Optional[int]) -> Widths:
    """A follower's check of the leader's map (JSON text, or None: no widths
    agreed): the job file's ``widths`` if it pins them, and this party's own
    entry."""
    if widths is not None:
        text = widths
        try:
            widths = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            widths = None
        data_parties = spec.probe_job().data_parties
        if not isinstance(widths, dict) or set(widths) != set(data_parties) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in widths.values()):
            raise ValueError(f"the leader {leader!r} announced the block widths {_short(text)}, not a map "
                             f"of the data parties {list(data_parties)} to ints >= 1")
    pinned = _pinned_widths(spec)
    if pinned is not None and widths != pinned:
        raise ValueError(f"the leader {leader!r} announced the block widths {_short(widths)}, the job file pins "
                         f"{pinned}")
    if widths is not None and width is not None and widths.get(name) != width:
        raise ValueError(f"the leader {leader!r} announced {widths.get(name)!r} feature columns for this party "
                         f"{name!r}, which holds {width}")
    return widths


def _compare_widths(channel, spec: JobSpec, widths: Widths, leader: str, followers: List[str]) -> None:
    """Every follower compares the SHA-256 of (job digest, widths) with every
    other follower: a leader that announced different widths to two parties
    stops the job here, before any key is made."""
    canonical = json.dumps({"job_sha256": spec.digest, "widths": widths}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    others = [f for f in followers if f != channel.name]
    for other in others:
        channel.send(other, TAG_WIDTHS, {"widths_sha256": digest})
    for other in others:
        got = channel.recv(other, TAG_WIDTHS)
        if not isinstance(got, dict) or got.get("widths_sha256") != digest:
            raise ValueError(f"party {other!r} was told other block widths than this party {channel.name!r} "
                             f"({widths}): the leader {leader!r} announced different widths to different parties")


def checkpoint_fingerprint(spec: JobSpec, common: Sequence[str]) -> str:
    """Ties a checkpoint to this job description and these aligned IDs."""
    digest = hashlib.sha256(spec.digest.encode())
    for item in common:
        digest.update(item.encode("utf-8") + b"\n")
    return digest.hexdigest()


def agree_on_plan(channel, spec: JobSpec, leader: str, followers: List[str], data_parties: Sequence[str],
                  n_samples: Optional[int], last_epoch: int, resume: bool) -> Tuple[int, int]:
    """Agree on ``(n_samples, start_epoch)``; the leader decides."""
    if channel.name != leader:
        channel.send(leader, TAG_RESUME, {"last_epoch": int(last_epoch)})
        plan = channel.recv(leader, TAG_PLAN)
        if "error" in plan:
            raise ValueError(plan["error"])
        return int(plan["n_samples"]), int(plan["start_epoch"])
    if n_samples is None:
        raise ValueError(f"the leader {leader!r} must hold aligned rows")
    epochs = [last_epoch] + [int(channel.recv(f, TAG_RESUME)["last_epoch"]) for f in followers]
    data_epochs = [e for e, p in zip(epochs, [leader] + followers) if p in data_parties]
    start = min(data_epochs) + 1 if resume else 0
    error = None
    total = int(spec.fields.get("epochs", 10))
    refusal = spec.kind.resume_refusal(spec.probe_job(), spec.fields) if start > 0 else None
    if refusal is not None:
        error = refusal
    elif start >= total:
        error = f"every data party has already checkpointed all {total} epochs; nothing to resume"
    elif resume and start == 0:
        empty = [p for e, p in zip(epochs, [leader] + followers) if p in data_parties and e < 0]
        error = (f"--resume: data part{'ies' if len(empty) > 1 else 'y'} {', '.join(map(repr, empty))} "
                 f"{'hold' if len(empty) > 1 else 'holds'} no checkpointed epoch of this job on these rows in "
                 "[party] checkpoint_dir; nothing to resume -- start the job without --resume")
    for follower in followers:
        channel.send(follower, TAG_PLAN, {"error": error} if error else
                     {"n_samples": int(n_samples), "start_epoch": int(start)})
    if error:
        raise ValueError(error)
    return int(n_samples), start
