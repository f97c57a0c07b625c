"""``--job KEY=VALUE``: overrides of a job file's ``[job]`` keys, so one job file serves a sweep.

``vflsec party --config bank.toml --job epochs=5 --job protocol=hdp`` runs the job of the party
file's job file with those two keys replaced (``vflsec init --job ...`` writes them into every job
file it writes). The rules:

* ``VALUE`` is read as a TOML value: ``epochs=5`` (an integer), ``lr=0.05``, ``k=inf``,
  ``evaluate=true``, ``passives=["insurer", "broker"]``, ``protocol="hdp"``. A value that is not
  TOML is the text as written, so a bare word is a string (``protocol=hdp``); quote a string that
  reads as something else (``--job 'name="true"'``). A value that starts like a TOML array, table
  or quoted string (``[``, ``{``, ``"``, ``'``) must be valid TOML.
* ``KEY`` is a ``[job]`` key of the job's kind (``kind``, ``row_norm`` and ``evaluate`` too); a
  dotted key reaches into a sub-table (``options.poly_modulus_degree=8192``,
  ``widths.bank=12``). An unknown key, a key given twice, a missing ``=`` is refused (one line,
  with the fix); a value the job does not take is refused by the job's own checks, as if the job
  file held it.
* The overrides are applied to the ``[job]`` table as it is read (:func:`apply_job_overrides`,
  called by :func:`.job_spec.load_job_spec`), before any check and before the job's digest: the
  parties compare the digest of the job with the overrides, so every party must pass the same
  ones, and a party whose overrides differ is refused by the job agreement like a different job
  file.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from ..errors import CommandError

__all__ = ["JobOverride", "apply_job_overrides", "overrides_text", "parse_job_overrides"]

#: the keys of a job file's [job] table that are not the job kind's own fields (runtime.job_spec)
RUNNER_KEYS = ("kind", "row_norm", "evaluate")
_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_TOML_START = ("[", "{", '"', "'")


@dataclass(frozen=True)
class JobOverride:
    """One ``--job KEY=VALUE``: the (dotted) key, the parsed value and the text as given."""

    key: str
    value: Any
    text: str

    @property
    def path(self) -> Tuple[str, ...]:
        return tuple(self.key.split("."))


def _toml_value(text: str) -> Any:
    """``text`` as a TOML value (ValueError when it is not one)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        parsed = tomllib.loads(f"value = {text}")
    except Exception as exc:  # tomllib.TOMLDecodeError
        raise ValueError(str(exc)) from None
    if set(parsed) != {"value"}:
        raise ValueError("one value")
    return parsed["value"]


def _value(text: str, item: str) -> Any:
    if not text:
        raise CommandError(f"--job {item} has no value",
                           "give KEY=VALUE, e.g. --job epochs=5 (a bare word is a string: --job protocol=hdp)")
    if "\n" in text or "\r" in text:
        raise CommandError(f"--job {item!r}: the value holds a line break", "give the value on one line")
    try:
        return _toml_value(text)
    except ValueError as exc:
        if text.lstrip().startswith(_TOML_START):
            raise CommandError(f"--job {item}: the value {text!r} is not a TOML value ({exc})",
                               "write it as in a job file, e.g. --job 'passives=[\"insurer\"]' (quote the whole "
                               "argument for the shell)") from None
        return text  # a bare word: the string as written


def parse_job_overrides(items: Optional[Sequence[str]]) -> Tuple[JobOverride, ...]:
    """The overrides of ``--job KEY=VALUE`` arguments (None: none; module docstring);
    :class:`~vflsec.errors.CommandError` for a malformed one or a key given twice."""
    out: Dict[str, JobOverride] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise CommandError(f"--job {item!r} is not KEY=VALUE",
                               "give a [job] key and its value, e.g. --job epochs=5 or --job protocol=hdp "
                               "(a sub-table's key: --job options.scale_bits=40)")
        for other in out:
            if other == key or other.startswith(key + ".") or key.startswith(other + "."):
                raise CommandError(f"--job sets {key!r} twice ({out[other].text} and {item})",
                                   "give each [job] key once")
        out[key] = JobOverride(key, _value(text.strip(), item), item)
    return tuple(out.values())


def overrides_text(overrides: Sequence[JobOverride]) -> str:
    """The overrides as they were given: ``--job epochs=5 --job protocol=hdp``."""
    return " ".join(f"--job {o.text}" for o in overrides)


def _known_keys(table: Mapping[str, Any]) -> Tuple[str, Sequence[str]]:
    """The kind the table names and every top-level key it may hold (the job_spec's rules)."""
    from .kinds import DEFAULT_KIND, get_job_kind

    name = table.get("kind", DEFAULT_KIND)
    try:
        kind = get_job_kind(name)
    except (TypeError, ValueError):
        return str(name), ()  # the job spec names the bad kind
    return kind.name, sorted(set(kind.job_fields()) | set(RUNNER_KEYS))


def apply_job_overrides(table: Mapping[str, Any], overrides: Sequence[JobOverride]) -> Dict[str, Any]:
    """A copy of the ``[job]`` table ``table`` with ``overrides`` applied (sub-tables copied, not
    shared). ValueError (`` -- fix``) for a key the job's kind does not take (the kind as
    overridden) or a dotted key into a value that is not a table."""
    out: Dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in table.items()}
    for override in overrides:
        *parents, last = override.path
        node = out
        for depth, part in enumerate(parents):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(override.path[:depth + 1])
                raise ValueError(f"--job {override.text}: [job] {where} is {child!r}, not a table -- set {where} "
                                 f"itself (--job {where}=VALUE)")
            child = dict(child)  # copied: the caller's nested tables are never written
            node[part] = child
            node = child
        node[last] = override.value
    if overrides:
        kind, known = _known_keys(out)
        for override in overrides:
            top = override.path[0]
            if known and top not in known:
                close = difflib.get_close_matches(top, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"--job {override.text}: {top!r} is not a [job] key of a {kind} job -- {hint}"
                                 f"use one of: {', '.join(known)}")
    return out
