"""Benchmark configurations as data: shipped TOML files read into typed, validated dataclasses.

Every benchmark's grid lives in ``vflsec/bench/experiments/<bench>/<bench>.toml``
(one table per variant: ``[full]`` and ``[quick]``, plus e.g. ``[cuda.full]``),
and the published numbers and claims a benchmark compares against in
``vflsec/bench/papers/<paper>.toml``. Both ship inside the package and are read
through :mod:`importlib.resources`, so ``vflsec bench NAME --print-config``
and the defaults work from an installed wheel.

A variant table is read into a frozen dataclass: every field is required,
unknown keys are refused, and each value is checked against its annotation
(``int``, ``float``, ``bool``, ``str``, ``Optional[...]``, a union of scalar types
such as ``Union[float, str]``, ``Tuple[X, ...]``, ``Dict[str, X]``, nested
dataclasses) and the bounds or choices in the field's metadata (:func:`spec`;
bounds apply to numbers only). Mistakes raise :class:`BenchConfigError`, one line
naming the file, the table, the key and what is allowed.
"""
from __future__ import annotations

import dataclasses
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Mapping, NoReturn, Optional, Sequence, Tuple, Type, TypeVar

from .errors import BenchConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11 (requires-python is >= 3.9): the same API, as in runtime/config.py
    import tomli as tomllib  # type: ignore[no-redef]  # the backport stands in for the stdlib module

__all__ = ["BenchConfigError", "load_paper", "load_variant", "optional_field", "read_document", "shipped_config_text",
           "spec", "validated", "with_overrides"]

T = TypeVar("T")

# Where an Optional field is absent from a table it is None: TOML has no null.
_NONE_WHEN_ABSENT = "none_when_absent"




def spec(*, low: Optional[float] = None, high: Optional[float] = None, low_inclusive: bool = True,
         choices: Optional[Sequence[Any]] = None, keys: Optional[Sequence[str]] = None, non_empty: bool = False,
         help: str = "") -> Dict[str, Any]:
    """Field metadata: numeric bounds (of the value or of every element),
    allowed ``choices``, allowed mapping ``keys``, ``non_empty`` sequences;
    ``help`` describes what a union of types (``Union[float, str]``) accepts."""
    return {"low": low, "high": high, "low_inclusive": low_inclusive, "choices": None if choices is None else
            tuple(choices), "keys": None if keys is None else tuple(keys), "non_empty": non_empty, "help": help}


def optional_field(**kwargs: Any) -> Dict[str, Any]:
    """Metadata of an Optional field that a table may leave out (meaning None)."""
    return {**spec(**kwargs), _NONE_WHEN_ABSENT: True}


# -- reading files -------------------------------------------------------------------------
def _shipped(name: str) -> Tuple[Any, str]:
    """(resource, path shown) of ``name``: ``papers/<paper>`` or a benchmark's grid."""
    bench = resources.files("vflsec.bench")
    if name.startswith("papers/"):
        return bench / "papers" / f"{name.split('/', 1)[1]}.toml", f"vflsec/bench/{name}.toml"
    return bench / "experiments" / name / f"{name}.toml", f"vflsec/bench/experiments/{name}/{name}.toml"


def shipped_config_text(name: str) -> str:
    """The text of benchmark ``name``'s shipped grid (``name`` may be ``papers/<paper>``)."""
    entry, shown = _shipped(name)
    if not entry.is_file():
        raise BenchConfigError(f"no shipped configuration {name!r} (looked for {shown})")
    return entry.read_text(encoding="utf-8")


def read_document(name: str, path: Optional[Path] = None) -> Tuple[Dict[str, Any], str]:
    """(parsed TOML, source label): the user's file ``path``, else the shipped ``configs/<name>.toml``."""
    if path is None:
        source = f"{name}.toml (shipped with vflsec)"
        text = shipped_config_text(name)
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise BenchConfigError(f"cannot read configuration {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text), source
    except tomllib.TOMLDecodeError as exc:
        raise BenchConfigError(f"{source}: not valid TOML: {exc}") from None


def _table(document: Mapping[str, Any], dotted: str, source: str) -> Mapping[str, Any]:
    node: Any = document
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            present = ", ".join(f"[{k}]" for k in document if isinstance(document[k], Mapping)) or "none"
            raise BenchConfigError(f"{source}: missing table [{dotted}] (tables present: {present})")
        node = node[part]
    if not isinstance(node, Mapping):
        raise BenchConfigError(f"{source}: [{dotted}] must be a table, got {type(node).__name__}")
    return node


def load_variant(cls: Type[T], name: str, variant: str, path: Optional[Path] = None,
                 variants: Optional[Mapping[str, type]] = None) -> T:
    """The ``variant`` table (e.g. ``"quick"``, ``"cuda.full"``) of the benchmark
    configuration ``name`` (``path``: a user's copy) as a validated ``cls``.

    ``variants`` maps every table the file may have to its class (default:
    ``full`` and ``quick``, both ``cls``). Every one of them present in the
    file is validated, so an edit that breaks another variant is reported
    too; other top-level tables or keys are refused.
    """
    variants = dict(variants) if variants is not None else {"full": cls, "quick": cls}
    document, source = read_document(name, path)
    roots = {v.split(".")[0] for v in variants}
    unknown = [k for k in document if k not in roots]
    if unknown:
        raise BenchConfigError(f"{source}: unknown table or key {unknown[0]!r} at the top level; "
                               f"allowed: {', '.join(f'[{v}]' for v in variants)}")
    chosen: Any = None
    for v, v_cls in variants.items():
        try:
            table = _table(document, v, source)
        except BenchConfigError:
            if v == variant:
                raise
            continue
        parsed: Any = _from_table(v_cls, table, source, v)
        if v == variant:
            chosen = parsed
    if chosen is None:
        raise BenchConfigError(f"{source}: variant [{variant}] is not one of {', '.join(variants)}")
    return typing.cast(T, chosen)


def load_paper(cls: Type[T], paper: str) -> T:
    """The published numbers of ``papers/<paper>.toml`` as a validated ``cls`` (its
    ``[[claims]]`` are read by :func:`.claims.load_claims`, not here)."""
    document, source = read_document(f"papers/{paper}")
    numbers = {key: value for key, value in document.items() if key != "claims"}
    return _from_table(cls, numbers, source, "")


def with_overrides(config: T, source: str, **overrides: Any) -> T:
    """``config`` with ``overrides`` (command-line flags) applied and validated."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    for key, value in overrides.items():
        if key not in values:
            raise BenchConfigError(f"{source}: unknown key {key!r}; allowed: {', '.join(values)}")
        values[key] = value
    return _from_table(type(config), values, source, "")


def validated(config: T, source: str = "configuration") -> T:
    """``config`` checked again (after :func:`dataclasses.replace`, for example)."""
    return with_overrides(config, source)


# -- validation ------------------------------------------------------------------------------
def _where(source: str, table: str, key: str) -> str:
    return f"{source}: [{table}] {key}" if table else f"{source}: {key}"


def _from_table(cls: Type[T], table: Mapping[str, Any], source: str, where: str) -> T:
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    for key in table:
        if key not in fields:
            raise BenchConfigError(f"{source}: [{where}] unknown key {key!r}; allowed: {', '.join(fields)}"
                                   if where else f"{source}: unknown key {key!r}; allowed: {', '.join(fields)}")
    values: Dict[str, Any] = {}
    for name, f in fields.items():
        if name not in table:
            if f.metadata.get(_NONE_WHEN_ABSENT):
                values[name] = None
                continue
            expected = _describe(hints[name], f.metadata)
            raise BenchConfigError(f"{_where(source, where, name)}: missing (expected {expected})")
        sub = f"{where}.{name}" if where else name
        values[name] = _convert(table[name], hints[name], f.metadata, source, where, name, sub)
    try:
        return cls(**values)
    except BenchConfigError as exc:  # a rule across keys (__post_init__): say where
        raise BenchConfigError(f"{source}: [{where}] {exc}" if where else f"{source}: {exc}") from None


def _describe(tp: Any, meta: Mapping[str, Any]) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        members = [a for a in args if a is not type(None)]
        if len(members) > 1:
            return meta.get("help") or " or ".join(_describe(m, meta) for m in members)
        return _describe(members[0], meta) + " (leave the key out for none)"
    if origin in (tuple, list):
        return f"a{' non-empty' if meta.get('non_empty') else 'n'} array of {_describe(args[0], meta)}s"
    if origin in (dict, Dict):
        keys = meta.get("keys")
        return f"a table of {_describe(args[1], meta)}" + (f" with keys among {', '.join(keys)}" if keys else "")
    if dataclasses.is_dataclass(tp):
        return f"a table with keys {', '.join(f.name for f in dataclasses.fields(tp))}"
    if meta.get("choices") is not None:
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    word = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))
    low, high = meta.get("low"), meta.get("high")
    if low is not None:
        word += f" {'>=' if meta.get('low_inclusive', True) else '>'} {low:g}"
    if high is not None:
        word += f"{',' if low is not None else ''} <= {high:g}"
    return word


def _convert(value: Any, tp: Any, meta: Mapping[str, Any], source: str, table: str, key: str, sub: str) -> Any:
    def fail() -> NoReturn:
        raise BenchConfigError(f"{_where(source, table, key)}: expected {_describe(tp, meta)}, got {value!r}")

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        members = [a for a in args if a is not type(None)]
        if value is None and len(members) < len(args):
            return None
        if len(members) == 1:
            return _convert(value, members[0], meta, source, table, key, sub)
        # Several scalar types (Union[float, str]): the one the TOML value is; a rule on the
        # form of a string is the dataclass's (__post_init__).
        for member in members:
            if _is_scalar(value, member):
                try:
                    return _convert(value, member, meta, source, table, key, sub)
                except BenchConfigError:
                    fail()
        fail()
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or (meta.get("non_empty") and not value):
            fail()
        element = args[0]
        return tuple(_convert(v, element, meta, source, table, f"{key}[{i}]", sub) for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, Mapping) or (meta.get("non_empty") and not value):
            fail()
        allowed = meta.get("keys")
        for k in value:
            if allowed is not None and k not in allowed:
                raise BenchConfigError(f"{_where(source, table, key)}: unknown key {k!r}; allowed: "
                                       f"{', '.join(allowed)}")
        return {k: _convert(v, args[1], {**meta, "non_empty": meta.get("non_empty")}, source, table,
                            f"{key}.{k}", sub) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return _from_table(tp, {f.name: getattr(value, f.name) for f in dataclasses.fields(tp)}, source, sub)
        if not isinstance(value, Mapping):
            fail()
        return _from_table(tp, value, source, sub)
    if tp is bool:
        if not isinstance(value, bool):
            fail()
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail()
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail()
        value = float(value)
    elif tp is str:
        if not isinstance(value, str):
            fail()
    else:  # pragma: no cover - a schema mistake, not a user's
        raise TypeError(f"unsupported configuration type {tp!r} for {key}")
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        fail()
    if tp is str:  # bounds are numeric (a union of a number and a string shares one spec)
        return value
    low, high = meta.get("low"), meta.get("high")
    if low is not None and (value < low or (value == low and not meta.get("low_inclusive", True))):
        fail()
    if high is not None and value > high:
        fail()
    return value


def _is_scalar(value: Any, tp: Any) -> bool:
    """Whether the TOML value is of scalar type ``tp`` (an integer counts as a float, a bool as neither)."""
    if tp is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if tp is int:
        return isinstance(value, int)
    if tp is float:
        return isinstance(value, (int, float))
    return tp is str and isinstance(value, str)
