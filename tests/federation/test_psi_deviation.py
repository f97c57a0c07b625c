"""Entity alignment with a party that puts IDs it does not hold into its set (issue 39), measured.

PSI shows the leader which of its IDs a member holds, and every member the final intersection. A party
that adds a dictionary of candidate IDs (customer numbers it guessed, a list bought elsewhere) learns the
same of them: which the other party holds. Nothing in the protocol tells a held ID from a guessed one,
and the product neither bounds a party's set nor agrees on the sizes of the sets before PSI (a member
sees how many IDs the leader sent and compares it with nothing; a member only checks that every announced
ID is one of its own, which a dictionary ID it added is). In a party job the dictionary IDs need rows in
the party's data file, with made-up columns; those rows then join the training like any other."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("private_set_intersection.python")

from vflsec.federation.psi import TAG_PSI_REQUEST  # noqa: E402


def _population(seed=0):
    """Two parties' customers (300 each, 150 shared), the customers only each holds, and 200 IDs nobody holds."""
    rng = np.random.default_rng(seed)
    ids = [f"cust-{v:07d}" for v in rng.permutation(10 ** 7)[:650]]
    shared, only_a, only_b, nobodys = ids[:150], ids[150:300], ids[300:450], ids[450:]
    return shared + only_a, shared + only_b, only_a, only_b, nobodys


def _membership(learned, dictionary, truth):
    """Precision and recall of "held by the other party" over the dictionary IDs."""
    said = set(learned) & set(dictionary)
    held = set(truth) & set(dictionary)
    return len(said & held) / max(1, len(said)), len(said & held) / len(held)


def _request_items(hub):
    """The IDs the leader's PSI requests carry, as the member can count them (one blinded item each)."""
    from private_set_intersection.python import Request

    sizes = []
    for record, payload in hub.transcript:
        if record.tag == TAG_PSI_REQUEST and isinstance(payload, bytes):
            request = Request()
            request.ParseFromString(payload)
            sizes.append(len(request.encrypted_elements))
    return sum(sizes)


def test_a_leader_that_adds_a_dictionary_learns_exactly_which_of_it_the_member_holds(run_psi):
    a, b, _, only_b, nobodys = _population()
    dictionary = only_b + nobodys  # candidates the leader does not hold: 150 of b's customers, 200 nobody's
    honest, errors, _ = run_psi({"a": a, "b": b})
    assert not errors, errors
    assert _membership(honest["a"], dictionary, b) == (0.0, 0.0)  # following the protocol: none of them
    deviating, errors, hub = run_psi({"a": a + dictionary, "b": b})
    assert not errors, errors  # nothing detects the dictionary: every party completes
    assert _membership(deviating["a"], dictionary, b) == (1.0, 1.0)  # all 150, and no other
    assert list(deviating["b"]) == list(deviating["a"])  # the member accepts the result: every ID is its own
    # What the member could have noticed: the leader sent 650 IDs, not 300. Nothing compares it.
    assert _request_items(hub) == len(a) + len(dictionary)


def test_a_member_that_adds_a_dictionary_learns_from_the_announced_intersection_which_of_it_the_leader_holds(
        run_psi):
    a, b, only_a, _, nobodys = _population(seed=1)
    dictionary = only_a + nobodys  # candidates the member does not hold: 150 of the leader's customers, 200 nobody's
    deviating, errors, _ = run_psi({"a": a, "b": b + dictionary})
    assert not errors, errors  # nothing detects the dictionary: every party completes
    assert _membership(deviating["b"], dictionary, a) == (1.0, 1.0)
