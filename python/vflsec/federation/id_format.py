"""How a party writes its IDs, coarsely: :class:`IdFormat`, and what to change when two parties
write them differently (:func:`format_hints`).

When no ID is held by every party, the usual cause is the writing, not the customers:
``'4711'`` at one party, ``'C004711'`` at the other; ``'007'`` and ``'7'``. Entity alignment
compares IDs as text, so these never match. An :class:`IdFormat` is what a party may tell its
peers to find such a cause without showing an ID: the range of the IDs' lengths, the common
start of every ID before its first digit (at most :data:`PREFIX_MAX` characters: ``'C'``,
``'cust-'``), whether every ID is that start followed by digits only, whether those digits
have leading zeros, which letter case and which other characters (at most
:data:`SYMBOLS_MAX`, such as ``-`` or ``_``) occur, and whether some ID has spaces around it.
No ID, no count of IDs and nothing of a single ID that is not common to all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from .ids import IdColumn, _pa

__all__ = ["PREFIX_MAX", "SYMBOLS_MAX", "IdFormat", "format_hints", "no_common_ids_text"]

#: most characters of the common start of the IDs an IdFormat carries
PREFIX_MAX = 8
#: most distinct characters other than letters, digits and spaces an IdFormat carries
SYMBOLS_MAX = 8
_CASES = ("", "upper", "lower", "mixed")
#: distinct leftovers (an ID without its letters, digits and spaces) looked at for the symbols
_LEFTOVERS = 10_000


@dataclass(frozen=True)
class IdFormat:
    """A coarse description of how a party writes its IDs (module docstring).

    ``min_length`` / ``max_length``: characters; ``prefix``: the characters every ID starts
    with before its first digit; ``numbered``: every ID is ``prefix`` followed by digits only;
    ``leading_zeros``: some such number starts with 0 and has more than one digit; ``letters``:
    "" (none), "upper", "lower" or "mixed" case; ``digits``: some ID has a digit; ``symbols``:
    the other characters that occur; ``spaces``: some ID starts or ends with whitespace."""

    min_length: int
    max_length: int
    prefix: str = ""
    numbered: bool = False
    leading_zeros: bool = False
    letters: str = ""
    digits: bool = False
    symbols: str = ""
    spaces: bool = False

    @classmethod
    def of(cls, ids: Any) -> "IdFormat":
        """The format of a non-empty sequence of ``str`` or an
        :class:`~vflsec.federation.ids.IdColumn` (Arrow's kernels: one pass per property)."""
        pa = _pa()
        pc = pa.compute
        array = (ids if isinstance(ids, IdColumn) else IdColumn(pa.array(list(ids), type=pa.large_string()))).array
        if len(array) == 0:
            raise ValueError("an ID format needs at least one ID")

        def anywhere(pattern: str, values: Any = None) -> bool:
            return bool(pc.any(pc.match_substring_regex(array if values is None else values, pattern)).as_py())

        lengths = pc.min_max(pc.utf8_length(array)).as_py()
        bounds = pc.min_max(array).as_py()  # the common start of all IDs is that of the smallest and largest
        prefix = ""
        for a, b in zip(bounds["min"], bounds["max"]):
            if a != b or a.isdigit() or len(prefix) == PREFIX_MAX:
                break
            prefix += a
        rest = pc.utf8_slice_codeunits(array, len(prefix))
        numbered = bool(pc.all(pc.match_substring_regex(rest, "^[0-9]+$")).as_py())
        upper, lower = anywhere(r"\p{Lu}"), anywhere(r"\p{Ll}")
        leftover = pc.unique(pc.replace_substring_regex(array, r"[\p{L}\p{N}\s]", "")).to_pylist()
        symbols = sorted({c for text in leftover[:_LEFTOVERS] for c in text})
        return cls(min_length=int(lengths["min"]), max_length=int(lengths["max"]), prefix=prefix, numbered=numbered,
                   leading_zeros=numbered and anywhere("^0[0-9]", rest),
                   letters=_CASES[(2 if lower else 0) + (1 if upper else 0)] if (upper or lower) else "",
                   digits=anywhere("[0-9]"), symbols="".join(symbols[:SYMBOLS_MAX]),
                   spaces=anywhere(r"^\s|\s$"))

    # -- on the wire -----------------------------------------------------------------
    def to_message(self) -> Dict[str, Any]:
        """A channel payload (a dict of int and str)."""
        return {"min_length": self.min_length, "max_length": self.max_length, "prefix": self.prefix,
                "numbered": int(self.numbered), "leading_zeros": int(self.leading_zeros), "letters": self.letters,
                "digits": int(self.digits), "symbols": self.symbols, "spaces": int(self.spaces)}

    @classmethod
    def from_message(cls, payload: Any, sender: str) -> "IdFormat":
        """A peer's :meth:`to_message`, checked (ValueError naming the sender)."""
        fields = ("min_length", "max_length", "prefix", "numbered", "leading_zeros", "letters", "digits", "symbols",
                  "spaces")
        problem = f"party {sender!r} sent an ID format that is not {{{', '.join(fields)}}}"
        if not isinstance(payload, dict) or set(payload) != set(fields):
            raise ValueError(problem)
        ints = [payload[k] for k in ("min_length", "max_length", "numbered", "leading_zeros", "digits", "spaces")]
        texts = [payload[k] for k in ("prefix", "letters", "symbols")]
        if (not all(isinstance(v, int) and not isinstance(v, bool) for v in ints)
                or not all(isinstance(v, str) for v in texts) or not 1 <= payload["min_length"] <= payload[
                    "max_length"] or len(payload["prefix"]) > PREFIX_MAX or len(payload["symbols"]) > SYMBOLS_MAX
                or payload["letters"] not in _CASES or not all(v in (0, 1) for v in ints[2:])):
            raise ValueError(problem)
        return cls(payload["min_length"], payload["max_length"], payload["prefix"], bool(payload["numbered"]),
                   bool(payload["leading_zeros"]), payload["letters"], bool(payload["digits"]), payload["symbols"],
                   bool(payload["spaces"]))

    # -- in words --------------------------------------------------------------------
    def _length(self, unit: str, offset: int = 0) -> str:
        low, high = self.min_length - offset, self.max_length - offset
        return f"{low} {unit}" if low == high else f"{low}-{high} {unit}"

    def describe(self) -> str:
        """``'C' + 6 digits, with leading zeros``; ``digits only, 1-4 long``; ``letters (lower case),
        digits and '-', 8-10 characters, all starting 'cust-'``."""
        if self.numbered:
            if self.prefix:
                text = f"{self.prefix!r} + {self._length('digits', len(self.prefix))}"
            else:
                text = f"digits only, {self._length('long')}"
            if self.leading_zeros:
                text += ", with leading zeros"
        else:
            kinds = []
            if self.letters:
                kinds.append("letters" + ("" if self.letters == "mixed" else f" ({self.letters} case)"))
            if self.digits:
                kinds.append("digits")
            if self.symbols:
                kinds.append(_symbols(self))
            text = (" and ".join(kinds) if len(kinds) < 3 else ", ".join(kinds[:-1]) + " and " + kinds[-1])
            text += f", {self._length('characters')}"
            if self.prefix:
                text += f", all starting {self.prefix!r}"
        if self.spaces:
            text += ", some with spaces around them"
        return text


def _symbols(fmt: IdFormat) -> str:
    return " ".join(repr(c) for c in fmt.symbols) or "none"


def format_hints(formats: Mapping[str, IdFormat]) -> List[str]:
    """What to change so that the parties write their IDs alike: the first entry of ``formats``
    (``who -> format``, e.g. ``{"this party": ..., "party 'bank'": ...}``) compared with each
    other one. An empty list where the formats look alike (the parties then hold different
    customers, or the wrong column)."""
    names: Sequence[str] = list(formats)
    if len(names) < 2:
        return []
    first = names[0]
    own = formats[first]
    hints: List[str] = []

    def add(hint: str) -> None:
        if hint not in hints:
            hints.append(hint)

    for other in names[1:]:
        peer = formats[other]
        if own.spaces != peer.spaces:
            add(f"strip the spaces around the IDs of {first if own.spaces else other}")
        if own.prefix != peer.prefix:
            if not own.prefix or not peer.prefix:
                has, lacks = (first, other) if own.prefix else (other, first)
                add(f"strip the prefix {(own.prefix or peer.prefix)!r} from the IDs of {has} (or add it at {lacks})")
            else:
                add(f"use one prefix ({own.prefix!r} at {first}, {peer.prefix!r} at {other})")
        if own.numbered and peer.numbered:
            own_digits = (own.min_length - len(own.prefix), own.max_length - len(own.prefix))
            peer_digits = (peer.min_length - len(peer.prefix), peer.max_length - len(peer.prefix))
            if (own.leading_zeros or peer.leading_zeros) and own_digits != peer_digits:
                width = max(own_digits[1], peer_digits[1])
                add(f"zero-pad the numbers to {width} digits at every party (or strip the leading zeros "
                    "everywhere): '007' and '7' differ")
        if own.letters in ("upper", "lower") and peer.letters in ("upper", "lower") and own.letters != peer.letters:
            add(f"write the letters in one case ({own.letters} at {first}, {peer.letters} at {other})")
        if own.symbols != peer.symbols and (own.symbols or peer.symbols):
            add(f"use the same separators ({_symbols(own)} at {first}, {_symbols(peer)} at {other})")
    return hints


#: own IDs shown as examples
EXAMPLES = 3


def no_common_ids_text(examples: Sequence[str], own: IdFormat, peers: Mapping[str, IdFormat],
                       what: str = "IDs") -> Tuple[str, str]:
    """``(what, fix)`` of a party that shares no ID with its peers: its own first IDs (shown to
    it only), its format and each peer's (``party name -> format``), and :func:`format_hints`."""
    shown = ", ".join(repr(e) for e in list(examples)[:EXAMPLES])
    theirs = "; ".join(f"those of party {name!r} are {fmt.describe()}" for name, fmt in peers.items())
    text = f"the parties share no {what} (PSI found none): this party's look like {shown} ({own.describe()}); {theirs}"
    hints = format_hints({"this party": own, **{f"party {name!r}": fmt for name, fmt in peers.items()}})
    if hints:
        return text, "make every party write the same text: " + "; ".join(hints)
    return text, ("the IDs are written alike, so the parties hold different customers: check that [party] data "
                  "is the right file and [party] id_column the ID column at every party")
