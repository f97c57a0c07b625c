"""Cross-party prediction with a vertical tree model: each party answers for its own splits.

The active party holds every tree (:class:`~vflsec.trees.tree.Tree`); each party holds
its lookup table and its bins (:mod:`vflsec.trees.binning`). To score rows aligned
across the parties, each passive party bins its rows with its own bins and sends the
active party one message (tag :data:`TAG_MASKS`): for every record of its lookup
table -- one per tree node it owns, in record order -- which rows go left, as a bit
mask packed to ``ceil(n / 8)`` bytes (:func:`split_masks`). The active party answers
its own nodes from its own table and codes, walks the trees with
:func:`~vflsec.trees.tree.tree_output` and adds the baseline (:func:`predict_raw`).

What this shows the active party: for each row and each split a passive party owns,
on which side of its threshold the row's value lies -- also at the nodes the row
never reaches (one message, no round trip per node); never a threshold or a value.
A passive party learns nothing of the trees.

A mask message that is not bytes of the length the trees imply (the number of nodes
the sender owns times ``ceil(n / 8)``) is refused naming the sender
(:class:`~vflsec.vfl.received.PeerMessageRefused`).
"""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from ..vfl.received import PeerMessageRefused, describe_payload
from .tree import LookupTable, Tree, tree_output

__all__ = ["TAG_MASKS", "owned_nodes", "predict_raw", "send_split_masks", "split_masks"]

TAG_MASKS = "trees_masks"


def split_masks(lookup: LookupTable, codes: np.ndarray) -> bytes:
    """For every record of ``lookup``, in order, whether each row of ``codes`` (this
    party's bin codes) goes left, packed to ``ceil(n / 8)`` bytes per record."""
    if len(lookup) == 0:
        return b""
    left = np.stack([lookup.goes_left(record, codes) for record in range(len(lookup))])
    return np.packbits(left, axis=1).tobytes()


def send_split_masks(endpoint: Any, active: str, lookup: LookupTable, codes: np.ndarray) -> None:
    """A passive party's side: its masks (:func:`split_masks`) to the active party, in one message."""
    endpoint.send(active, TAG_MASKS, split_masks(lookup, codes))


def owned_nodes(trees: Sequence[Tree], owner: int) -> int:
    """How many nodes of ``trees`` the party at job position ``owner`` splits (its lookup
    table's records: each split it made added one)."""
    return int(sum(np.count_nonzero(tree.owner == owner) for tree in trees))  # a leaf's owner is LEAF (-1)


def predict_raw(endpoint: Any, passives: Sequence[str], trees: Sequence[Tree], baseline: float,
                lookup: LookupTable, codes: np.ndarray, *, step: str = "prediction") -> np.ndarray:
    """The active party's side: the raw score (log-odds) of each of its rows ``codes``
    (its own bin codes; the passive parties' rows aligned to them), from every passive
    party's masks; ``step`` names the phase in a refusal."""
    n = codes.shape[0]
    row_bytes = (n + 7) // 8
    masks: List[np.ndarray] = [np.zeros((0, n), dtype=bool)]  # the active party answers its own nodes
    for position, party in enumerate(passives, start=1):
        message = endpoint.recv(party, TAG_MASKS)
        records = owned_nodes(trees, position)
        if not isinstance(message, (bytes, bytearray)) or len(message) != records * row_bytes:
            raise PeerMessageRefused(endpoint.name, party, TAG_MASKS, step,
                                     f"split masks: expected {records * row_bytes} bytes ({records} nodes of "
                                     f"{n} rows), got {describe_payload(message)}")
        packed = np.frombuffer(bytes(message), dtype=np.uint8).reshape(records, row_bytes)
        masks.append(np.unpackbits(packed, axis=1, count=n).astype(bool))

    def goes_left(owner: int, record: int, rows: np.ndarray) -> np.ndarray:
        if owner == 0:
            return lookup.goes_left(record, codes[rows])
        return masks[owner][record, rows]

    raw = np.full(n, float(baseline))
    for tree in trees:
        raw += tree_output(tree, n, goes_left)
    return raw
