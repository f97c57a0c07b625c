"""Protocol "plain": idealized non-private vertical GLM.

Intermediate results travel in the clear (see :mod:`.ir_exchange`); this is
the accuracy/runtime reference that DP and HE protocols are compared with.
Clipping follows ``job.k`` (None or inf disables it).

Bounds on receipt: an unweighted logistic job's ``IR_A = -y sigmoid(-y theta)`` is in
[-1, 1], so a passive party refuses a larger entry naming the active party
(:data:`LOGISTIC_IR_LIMIT`); other losses and weighted jobs have no bound a passive
party knows (the row weights are the active party's), and there an IR whose product
with the passive party's rows overflows is refused naming its sender
(:func:`.ir_exchange.passive_program`). What a passive party sends (``X_P w_P``, its rows
unnormalised here) has no bound either: the active party refuses only what overflows.
"""
from __future__ import annotations

from . import ir_exchange
from .ir_exchange import active_program, passive_program
from .registry import register_protocol

__all__ = ["LOGISTIC_IR_LIMIT", "PROTOCOL"]


def plain_active(endpoint, job, data):
    return active_program(endpoint, job, data)


#: the largest |IR_A| an honest active party of an unweighted logistic job sends (float slack included)
LOGISTIC_IR_LIMIT = 1.0 + 1e-9


def plain_passive(endpoint, job, data):
    limit = LOGISTIC_IR_LIMIT if job.loss == "logistic" and not job.weighted else None
    return passive_program(endpoint, job, data, received_limit=limit)


PROTOCOL = {"active": plain_active, "passive": plain_passive}
# shard_schedule: the programs read their rows by the job's batches only (shard_rows allowed).
# weight_refusal=None: the active party weights its residuals (vflsec.glm.weights).
register_protocol("plain", PROTOCOL, replace=True, tags=ir_exchange.TAGS, shard_schedule=True, weight_refusal=None)
