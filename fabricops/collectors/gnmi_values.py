"""gNMI values: TypedValues unpacked into leaves, and leaves read as catalogue values.

``unpack`` turns one update into (leaf path, raw value) pairs. A scalar
TypedValue is one leaf at the update's path. A JSON or JSON_IETF value (RFC
7951: module-qualified member names, 64-bit integers and decimals as strings)
is walked: objects add path elements, arrays of objects are list entries whose
key members become the element's keys (``interface[name=Ethernet1]``) and are
not leaves themselves, arrays of scalars are one leaf-list leaf. An update at a
list without keys (``/interfaces/interface``) whose JSON carries the keys is
keyed the same way. Which members are keys comes from ``ListKeys`` (the
profile's rules name them), else the first of the usual key names present.

``read_value`` turns a raw value into the metric's number: counters and
states as int, gauges as float; PROTO scalars of any numeric kind, decimal64
(``digits * 10**-precision``, precision at most 18, per the gNMI
specification), ASCII and strings holding numbers, and state names through
the rule's state table. Anything else raises ``BadValueError`` naming the
metric; a value that cannot be unpacked raises ``BadEncodingError``.
``usual_json_number`` reads the usual JSON forms to the same number without
the checks (None for the rest). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from fabricops.collectors.gnmi_dialects.rules import ValueMap, state_key
from fabricops.core.catalogue import Metric, MetricKind
from fabricops.core.openconfig import OcPath, PathElem, bare_name, parse_path

MAX_DEPTH: Final = 32
MAX_LEAVES: Final = 100_000
_PATHS_MAX: Final = 4096  # update paths whose list-ness ListKeys remembers
MAX_DECIMAL_PRECISION: Final = 18  # gNMI Decimal64: "precision MUST NOT exceed 18"
SCALAR_KINDS: Final = frozenset({"uint_val", "int_val", "double_val", "float_val", "string_val",
                                 "ascii_val", "decimal_val", "bool_val"})
JSON_KINDS: Final = frozenset({"json_val", "json_ietf_val"})
USUAL_KEYS: Final = ("name", "id", "index", "interface-id", "interface-name", "priority",
                     "queue-number", "queue-name", "class-name", "lane-index")


class BadEncodingError(ValueError):
    """A TypedValue that cannot be unpacked into leaves; the message says why."""


class BadValueError(ValueError):
    """A value that does not fit a metric's kind; the message names both."""


class ListKeys:
    """Key member names of lists, by the list's schema path (no keys, no module prefixes)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self._keys: dict[str, tuple[str, ...]] = {}
        self._at: dict[OcPath, bool] = {}
        for text in patterns:
            names: list[str] = []
            for elem in parse_path(text):
                names.append(bare_name(elem.name))
                if elem.keys:
                    self._keys.setdefault("/" + "/".join(names), tuple(k for k, _ in elem.keys))

    def of(self, schema: str, entry: Mapping[str, Any]) -> tuple[str, ...]:
        """The key members of ``entry``, a list entry at ``schema``."""
        members = {bare_name(m) for m in entry}
        known = self._keys.get(schema)
        if known is not None and all(k in members for k in known):
            return known
        return next(((k,) for k in USUAL_KEYS if k in members), ())

    def is_list_at(self, path: OcPath) -> bool:
        """Whether ``path``'s schema names a keyed list, remembered per path (updates
        repeat theirs)."""
        found = self._at.get(path)
        if found is None:
            if len(self._at) >= _PATHS_MAX:
                self._at.clear()
            found = self._at[path] = _schema(path) in self._keys
        return found


def _schema(path: OcPath) -> str:
    return "/" + "/".join(bare_name(e.name) for e in path)


def unpack(path: OcPath, value: Any, keys: ListKeys) -> list[tuple[OcPath, Any]]:
    """The leaves of an update at ``path`` carrying ``value`` (a ``gnmi.TypedValue``)."""
    kind = value.WhichOneof("value")
    if kind in SCALAR_KINDS:
        return [(path, value)]
    if kind not in JSON_KINDS:
        raise BadEncodingError(f"{kind or 'empty'} values are not decoded")
    try:
        doc = json.loads(getattr(value, kind))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadEncodingError(f"{kind} is not JSON: {exc}"[:120]) from None
    out: list[tuple[OcPath, Any]] = []
    last = path[-1] if path else None
    if last is not None and not last.keys and keys.is_list_at(path):
        entries = doc if isinstance(doc, list) else [doc]
        _entries(path[:-1], last.name, entries, keys, out, 0)
    else:
        _walk(path, doc, keys, out, 0)
    if not out:
        raise BadEncodingError(f"{kind} carries no leaf")
    return out


def _walk(path: OcPath, doc: Any, keys: ListKeys, out: list[tuple[OcPath, Any]],
          depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BadEncodingError(f"JSON nested deeper than {MAX_DEPTH}")
    if isinstance(doc, dict):
        for member, sub in doc.items():
            if isinstance(sub, list) and any(isinstance(e, dict) for e in sub):
                _entries(path, member, sub, keys, out, depth + 1)
            else:
                _walk((*path, PathElem(member)), sub, keys, out, depth + 1)
        return
    if len(out) >= MAX_LEAVES:
        raise BadEncodingError(f"more than {MAX_LEAVES:,} leaves in one value")
    out.append((path, tuple(doc) if isinstance(doc, list) else doc))


def _entries(parent: OcPath, name: str, entries: list[Any], keys: ListKeys,
             out: list[tuple[OcPath, Any]], depth: int) -> None:
    schema = _schema(parent) + "/" + bare_name(name)
    for entry in entries:
        if not isinstance(entry, dict):
            raise BadEncodingError(f"list {schema} mixes entries and scalars")
        names = keys.of(schema, entry)
        values = {bare_name(m): v for m, v in entry.items()}
        elem = PathElem(name, tuple(sorted((k, _key_text(values[k])) for k in names)))
        rest = {m: v for m, v in entry.items() if bare_name(m) not in names}
        _walk((*parent, elem), rest, keys, out, depth + 1)


def _key_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def scalar_of(raw: Any) -> Any:
    """A TypedValue's scalar as a Python value (JSON leaves are already Python values)."""
    if not hasattr(raw, "WhichOneof"):
        return raw
    kind = raw.WhichOneof("value")
    if kind is None:
        return None
    found = getattr(raw, kind)
    if kind == "decimal_val":
        if found.precision > MAX_DECIMAL_PRECISION:
            raise BadValueError(f"decimal precision {found.precision} is over "
                                f"{MAX_DECIMAL_PRECISION}")
        return found.digits / 10 ** found.precision
    return found


def read_value(raw: Any, metric: Metric, value_map: ValueMap | None) -> int | float:
    """``raw`` (a TypedValue or a JSON scalar) as ``metric``'s value (see the module doc)."""
    try:
        value = scalar_of(raw)
    except BadValueError as exc:
        raise BadValueError(f"{metric.name}: {exc}") from None
    if metric.kind is MetricKind.STATE and isinstance(value, str):
        states = value_map.states if value_map is not None else {}
        code = states.get(state_key(value))
        if code is None:
            raise BadValueError(f"{metric.name}: unknown state {value!r:.40}")
        return code
    number = _number(value, metric)
    if value_map is not None and value_map.scale != 1.0:
        return float(number) * value_map.scale
    return number


def usual_json_number(raw: Any, fast: str) -> int | float | None:
    """A JSON leaf's value in its usual form, as ``read_value`` reads it for a metric
    without a value map (``fast``: ``"uint_val"`` for a counter, else a gauge), without
    its checks: a counter as a string of up to 19 digits (RFC 7951 writes 64-bit
    integers as strings) or a JSON integer in range, a gauge as a number or a numeric
    string; None for anything else (``read_value`` then decides, and names what is
    wrong)."""
    kind = type(raw)
    if fast == "uint_val":
        if kind is str and len(raw) < 20 and raw.isascii() and raw.isdigit():
            return int(raw)
        return raw if kind is int and 0 <= raw < 2**64 else None
    if kind is float or kind is int or kind is str:
        try:
            return float(raw)
        except (ValueError, OverflowError):  # an int no float holds, a word
            return None
    return None


def _number(raw: Any, metric: Metric) -> int | float:
    if isinstance(raw, bool) or raw is None or isinstance(raw, tuple | bytes | dict):
        raise BadValueError(f"{metric.name}: value {raw!r:.40} is not a number")
    try:
        if metric.kind is MetricKind.GAUGE:
            return float(raw)
        number = int(raw) if isinstance(raw, int | str) else float(raw)
    except (TypeError, ValueError, OverflowError):
        raise BadValueError(f"{metric.name}: value {raw!r:.40} is not a number") from None
    if not (isinstance(number, int) or number.is_integer()) or not 0 <= number < 2**64:
        raise BadValueError(f"{metric.name}: value {raw!r:.40} is not an unsigned 64-bit "
                            "integer")
    return int(number)
