"""Mistakes found between the parties of a ``vflsec party`` job: one line with the fix
(a :class:`~vflsec.errors.CommandError`, exit status 2) at every party.

* :func:`connect`: a peer that never answers within ``[network] connect_timeout``, named with
  its address and what to check;
* :func:`no_common_ids`: no ID held by every party. Only then the parties exchange the coarse
  formats of their IDs (:func:`vflsec.federation.psi.exchange_id_formats`: length range,
  common start, digits or not, leading zeros, case, separators; no ID) and each data party
  shows its own first IDs (never sent), the peers' formats and what to change;
* fewer common IDs than the job's ``batch_size``: :func:`aligned_job`;
* job files that differ: :func:`.handshake.agree_on_job`; a predict job's model from another
  training run: :meth:`.predict_kind.PredictJobKind.agree_on_model`.

A party that stops tells its peers (:func:`abort_reason`: a mistake's ``shared`` text, which
holds nothing of the party's own data); a peer that learns of it this way stops with
``peer party '<name>' stopped the job: ... -- <fix>`` and exit status 2 too
(:func:`peer_mistake`).
"""
from __future__ import annotations

import os
import re
import socket
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

from ..errors import CommandError

if TYPE_CHECKING:
    from .job_spec import JobSpec
    from .startup import PartyStart

__all__ = ["abort_reason", "connect", "no_common_ids", "peer_mistake"]


def connect(channel, start: PartyStart) -> None:
    """Wait for every peer (``connect_timeout``); a peer that never answers is one line naming it,
    its address, what a TCP probe of that address found and what to check."""
    from ..federation.grpc_channel import PeerFailed

    try:
        channel.wait_for_peers()
    except PeerFailed as exc:
        channel.fail(exc.peer, exc.reason)  # the peers that did answer are told; this one is not tried again
        timeout = channel.settings.connect_timeout
        address = start.cfg.peers[exc.peer]
        config = os.path.normpath(start.config)
        found, fix = _probe(address)
        raise CommandError(f"peer party {exc.peer!r} at {address} never answered in {timeout:g} s ({found})",
                           f"{fix}; check the address of {exc.peer!r} in [peers] of {config}; raise [network] "
                           f"connect_timeout in {config} if it starts later") from None


def _probe(address: str) -> Tuple[str, str]:
    """What a plain TCP connection to ``address`` finds, and what to do about it: a program that
    accepts but does not speak to this party (TLS files of another CA, or not ``vflsec party``),
    nothing listening, or no answer at all."""
    from ..federation.address import parse_address

    host, port = parse_address(address)
    start_it = "start 'vflsec party --config <its party file>' on that machine"
    try:
        with socket.create_connection((host, port), timeout=2.0):
            pass
    except ConnectionRefusedError:
        return "nothing listens there", start_it
    except OSError:
        return "no answer from that address", f"{start_it}, and check the firewall between the machines"
    return ("a program accepts connections there but did not answer this party",
            "check that it is that party's 'vflsec party' and that both parties' [tls] files come from one "
            "`vflsec certs init` (the same CA), or both pass --insecure")


def no_common_ids(channel, ids: Sequence[str], leader: str, members: Sequence[str],
                  what: str = "IDs") -> CommandError:
    """No ID is held by every party: the parties exchange their IDs' formats (only then,
    :func:`~vflsec.federation.psi.exchange_id_formats`) and each says how the writing differs,
    with its own first IDs as examples (shown here, never sent)."""
    from ..federation.id_format import no_common_ids_text
    from ..federation.psi import exchange_id_formats

    formats = exchange_id_formats(channel, ids, leader=leader, members=members)
    own = formats.pop(channel.name)
    text, fix = no_common_ids_text(list(ids[:3]), own, formats, what)
    return CommandError(text, fix, shared=f"the parties share no {what}: each data party's message shows how its "
                                          "IDs are written -- make every party write the IDs the same way")


def aligned_job(spec: JobSpec, n_samples: int, start_epoch: int, widths: Any) -> Any:
    """The job for the aligned rows; fewer common IDs than the job's ``batch_size`` is one line
    (every party finds it from the same count)."""
    size = spec.fields.get("batch_size")
    if isinstance(size, int) and not isinstance(size, bool) and 0 < n_samples < size:
        source = os.path.normpath(spec.source) if spec.source is not None else "the job file"
        raise CommandError(f"the parties share only {n_samples} IDs, fewer than batch_size = {size} in {source}",
                           f"lower batch_size in every party's copy of {source} (at most {n_samples}), or give the "
                           "parties more customers in common",
                           shared=f"the parties share only {n_samples} IDs, fewer than batch_size = {size} -- lower "
                                  "batch_size in every party's job file")
    return spec.job(n_samples=n_samples, start_epoch=start_epoch, widths=widths)


def abort_reason(exc: BaseException) -> str:
    """What this party's peers are told when it stops: a mistake's shared text (no example ID,
    no value of this party's own), else the error."""
    if isinstance(exc, CommandError):
        return f"CommandError: {exc.shared or exc}"
    return f"{type(exc).__name__}: {exc}"


_PEER_MISTAKE = re.compile(r"peer party '([^']+)' failed: it aborted the job: CommandError: ")


def peer_mistake(exc: BaseException) -> Optional[CommandError]:
    """A peer stopped the job on a mistake (its :func:`abort_reason`, maybe passed on by another
    peer): this party's one line, naming the party that found it."""
    text = " ".join(str(exc).split())
    found = list(_PEER_MISTAKE.finditer(text))
    if not found:
        return None
    peer, rest = found[-1].group(1), text[found[-1].end():]
    return CommandError(f"peer party {peer!r} stopped the job: {rest}",
                        "" if " -- " in rest else f"see the message of party {peer!r}")
