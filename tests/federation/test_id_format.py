"""The coarse format of a party's IDs (vflsec.federation.id_format), what two parties exchange when PSI
finds no common ID: each property against a plain-Python reading of the IDs, the hints for the usual
ways two parties write one ID differently, a peer's malformed format refused, and the exchange itself
(after an empty intersection, each party gets the others' formats and no ID)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.federation.id_format import IdFormat, format_hints, no_common_ids_text  # noqa: E402
from vflsec.federation.ids import IdColumn  # noqa: E402


def _reference(ids):
    """The format's properties read one ID at a time in plain Python."""
    prefix = ""
    for chars in zip(*ids):
        if len(set(chars)) > 1 or chars[0].isdigit() or len(prefix) == 8:
            break
        prefix += chars[0]
    rests = [i[len(prefix):] for i in ids]
    numbered = all(r.isdigit() and r.isascii() for r in rests)
    upper, lower = any(c.isupper() for i in ids for c in i), any(c.islower() for i in ids for c in i)
    return dict(min_length=min(map(len, ids)), max_length=max(map(len, ids)), prefix=prefix, numbered=numbered,
                leading_zeros=numbered and any(r.startswith("0") and len(r) > 1 for r in rests),
                letters={(0, 0): "", (1, 0): "upper", (0, 1): "lower", (1, 1): "mixed"}[(upper, lower)],
                digits=any(c.isdigit() for i in ids for c in i),
                symbols="".join(sorted({c for i in ids for c in i if not (c.isalnum() or c.isspace())})),
                spaces=any(i != i.strip() for i in ids))


CASES = {
    "plain numbers": [str(v) for v in range(1, 5000, 7)],
    "prefixed, zero-padded": [f"C{v:06d}" for v in range(1, 5000, 7)],
    "zero-padded": [f"{v:04d}" for v in range(0, 900, 3)],
    "words with separators": ["cust-0012", "cust-0345", "cust_9", "cust-x1"],
    "mixed case": ["Ab12", "aB13", "xY"],
    "spaces": [" 12", "13 ", "14"],
    "no common start": ["a1", "b2", "c3"],
    "one ID": ["K-77"],
    "accents": ["émile", "Zoë", "ana"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_property_is_what_a_plain_reading_of_the_ids_gives(name):
    ids = CASES[name]
    rng = np.random.default_rng(0)
    shuffled = [ids[i] for i in rng.permutation(len(ids))]
    fmt = IdFormat.of(IdColumn.of(shuffled))
    assert fmt == IdFormat(**_reference(ids))
    assert IdFormat.of(shuffled) == fmt  # a list of str reads the same
    assert IdFormat.from_message(fmt.to_message(), "peer") == fmt


def test_the_descriptions_name_the_shapes():
    assert IdFormat.of(CASES["plain numbers"]).describe() == "digits only, 1-4 long"
    assert IdFormat.of(CASES["prefixed, zero-padded"]).describe() == "'C' + 6 digits, with leading zeros"
    words = IdFormat.of(CASES["words with separators"]).describe()
    assert words == "letters (lower case), digits and '-' '_', 6-9 characters, all starting 'cust'"
    assert IdFormat.of(CASES["spaces"]).describe().endswith("some with spaces around them")


def _hints(a, b):
    return format_hints({"this party": IdFormat.of(a), "party 'bank'": IdFormat.of(b)})


def test_a_prefix_and_zero_padding_are_named_with_what_to_change():
    hints = _hints(["4711", "12", "9"], ["C004711", "C000012", "C000013"])
    assert hints == ["strip the prefix 'C' from the IDs of party 'bank' (or add it at this party)",
                     "zero-pad the numbers to 6 digits at every party (or strip the leading zeros everywhere): "
                     "'007' and '7' differ"]


def test_other_differences_are_named_and_alike_formats_give_no_hint():
    assert _hints(["007", "012"], ["7", "12"]) == [
        "zero-pad the numbers to 3 digits at every party (or strip the leading zeros everywhere): '007' and '7' "
        "differ"]
    assert _hints([" 12", "13"], ["12", "13"]) == ["strip the spaces around the IDs of this party"]
    assert _hints(["ab1", "cd2"], ["AB1", "CD2"]) == ["write the letters in one case (lower at this party, upper "
                                                      "at party 'bank')"]
    assert _hints(["a-1", "b-2"], ["a_1", "b_2"]) == ["use the same separators ('-' at this party, '_' at party "
                                                      "'bank')"]
    assert _hints(["x-1", "x-2"], ["y-1", "y-2"]) == ["use one prefix ('x-' at this party, 'y-' at party 'bank')"]
    assert _hints(["1", "2", "30"], ["400", "500"]) == []


def test_the_line_shows_own_examples_and_the_peers_format_only():
    own, peer = ["4711", "12", "9"], ["C004711", "C000012"]
    what, fix = no_common_ids_text(own, IdFormat.of(own), {"bank": IdFormat.of(peer)})
    assert "this party's look like '4711', '12', '9' (digits only, 1-4 long)" in what
    assert "those of party 'bank' are 'C' + 6 digits, with leading zeros" in what
    assert not any(item in what + fix for item in peer)
    assert fix.startswith("make every party write the same text: strip the prefix 'C'")
    _, alike = no_common_ids_text(own, IdFormat.of(own), {"bank": IdFormat.of(["5", "6"])})
    assert "hold different customers" in alike and "[party] id_column" in alike


@pytest.mark.parametrize("edit", [
    lambda m: m.pop("prefix"),
    lambda m: m.update(min_length=0),
    lambda m: m.update(max_length=0),
    lambda m: m.update(prefix="x" * 9),
    lambda m: m.update(letters="title"),
    lambda m: m.update(numbered=2),
    lambda m: m.update(spaces="yes"),
    lambda m: m.update(digits=True),
    lambda m: m.update(extra=1),
])
def test_a_malformed_format_from_a_peer_is_refused_naming_it(edit):
    message = IdFormat.of(["a1"]).to_message()
    edit(message)
    with pytest.raises(ValueError, match="party 'bank' sent an ID format"):
        IdFormat.from_message(message, "bank")


def test_no_ids_have_no_format():
    with pytest.raises(ValueError, match="at least one ID"):
        IdFormat.of([])


def test_after_an_empty_intersection_each_party_gets_the_others_formats_and_no_id():
    pytest.importorskip("private_set_intersection.python")
    from vflsec.federation.psi import TAG_PSI_FORMAT, align_ids, exchange_id_formats

    sets = {"a": [str(v) for v in range(1, 300)], "b": [f"C{v:06d}" for v in range(1, 300)],
            "c": [f"c-{v}" for v in range(1, 300)]}
    hub = InMemoryHub(default_timeout=60, keep_payloads=True)
    endpoints = {name: hub.endpoint(name) for name in sets}
    results, errors, progress = {}, {}, []

    def party(name):
        members = ["b", "c"] if name == "a" else ()
        try:
            common = align_ids(endpoints[name], sets[name], leader="a", members=members, workers=2,
                               bucket_target=100, progress=lambda peer, done, total: progress.append(
                                   (name, peer, done, total)))
            assert len(common) == 0
            results[name] = exchange_id_formats(endpoints[name], sets[name], leader="a", members=members)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors[name] = exc

    threads = [threading.Thread(target=party, args=(n,)) for n in sets]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    assert not errors, errors
    formats = {name: IdFormat.of(ids) for name, ids in sets.items()}
    assert results["a"] == formats and list(results["a"]) == ["a", "b", "c"]
    assert results["b"] == {"b": formats["b"], "a": formats["a"]}
    assert results["c"] == {"c": formats["c"], "a": formats["a"]}
    sent = [(r.sender, p) for r, p in hub.transcript if r.tag == TAG_PSI_FORMAT]
    assert sorted(s for s, _ in sent) == ["a", "a", "b", "c"]
    assert not any(item in str(p) for _, p in sent for ids in sets.values() for item in ids[:20] if len(item) > 2)
    # progress: every bucket of each two-party run, counted up to the run's bucket count
    a_with_b = [(done, total) for name, peer, done, total in progress if name == "a" and peer == "b"]
    assert a_with_b == [(k + 1, a_with_b[0][1]) for k in range(a_with_b[0][1])] and a_with_b[0][1] > 1
    b_runs = [(done, total) for name, peer, done, total in progress if name == "b"]
    assert b_runs[-1][0] == b_runs[-1][1] == a_with_b[0][1]


def test_align_in_one_process_gives_the_same_hints():
    pd = pytest.importorskip("pandas")
    from vflsec.data import align

    bank, insurer = ["4711", "12"], ["C004711", "C000012"]
    with pytest.raises(ValueError) as info:
        align({"bank": pd.DataFrame({"id": bank}), "insurer": pd.DataFrame({"id": insurer})}, "id")
    hints = format_hints({"party 'bank'": IdFormat.of(bank), "party 'insurer'": IdFormat.of(insurer)})
    assert str(info.value).endswith("-- make every party write the same text: " + "; ".join(hints))
    assert "insurer: 'C000012', 'C004711' ('C' + 6 digits, with leading zeros)" in str(info.value)
