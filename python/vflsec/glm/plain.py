"""Protocol "plain": idealized non-private vertical GLM.

Intermediate results travel in the clear (see :mod:`.ir_exchange`); this is
the accuracy/runtime reference that DP and HE protocols are compared with.
Clipping follows ``job.k`` (None or inf disables it).
"""
from __future__ import annotations

from . import ir_exchange
from .ir_exchange import active_program, passive_program
from .registry import register_protocol

__all__ = ["PROTOCOL"]


def plain_active(endpoint, job, data):
    return active_program(endpoint, job, data)


def plain_passive(endpoint, job, data):
    return passive_program(endpoint, job, data)


PROTOCOL = {"active": plain_active, "passive": plain_passive}
# shard_schedule: the programs read their rows by the job's batches only (shard_rows allowed).
# weight_refusal=None: the active party weights its residuals (vflsec.glm.weights).
register_protocol("plain", PROTOCOL, replace=True, tags=ir_exchange.TAGS, shard_schedule=True, weight_refusal=None)
