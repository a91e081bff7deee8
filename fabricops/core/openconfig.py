"""OpenConfig leaf paths of the catalogue's metrics, with their list keys.

The catalogue gives each metric's OpenConfig schema path without keys
(``/interfaces/interface/state/counters/in-octets``). This module says which
list of such a path carries the interface name, the PFC priority, the egress
queue and the transceiver channel, so that a gNMI target can name a leaf
(``/interfaces/interface[name=eth12]/state/counters/in-octets``) and a collector
can map a leaf back to (interface, metric). The transceiver of a port is the
component named like the interface; the lossless egress queue and the optical
channel are fixed names (``queue_name``, ``channel_index``).

It also parses and formats path text and matches leaves against subscription
patterns: an element ``*`` matches one element, ``...`` any number of them, a
key value ``*`` (or a key left out) matches every instance, and a pattern
matches every leaf below it. Module prefixes on element names
(``openconfig-interfaces:interfaces``) are ignored. Pure; no protobuf here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NamedTuple

from fabricops.core.catalogue import CATALOGUE, Catalogue, Metric, MetricFamily, Scope


class PathElem(NamedTuple):
    """One path element: a name and its list keys (sorted by key name)."""

    name: str
    keys: tuple[tuple[str, str], ...] = ()

    def key(self, name: str) -> str | None:
        return next((v for k, v in self.keys if k == name), None)


OcPath = tuple[PathElem, ...]


class KeyRole(StrEnum):
    """What the key of a list in a metric's path stands for."""

    INTERFACE = "interface"
    PRIORITY = "priority"
    QUEUE = "queue"
    CHANNEL = "channel"


LIST_KEYS: Final[dict[str, tuple[str, KeyRole]]] = {
    "/interfaces/interface": ("name", KeyRole.INTERFACE),
    "/qos/interfaces/interface": ("interface-id", KeyRole.INTERFACE),
    "/qos/interfaces/interface/output/queues/queue": ("name", KeyRole.QUEUE),
    "/qos/interfaces/interface/pfc/priorities/priority": ("priority", KeyRole.PRIORITY),
    "/components/component": ("name", KeyRole.INTERFACE),
    "/components/component/transceiver/physical-channels/channel": ("index", KeyRole.CHANNEL),
    "/nics/nic": ("name", KeyRole.INTERFACE),
}

OPER_STATUS_NAMES: Final[dict[int, str]] = {
    1: "UP", 2: "DOWN", 3: "TESTING", 4: "UNKNOWN", 5: "DORMANT", 6: "NOT_PRESENT",
    7: "LOWER_LAYER_DOWN",
}
OPER_STATUS_CODES: Final[dict[str, int]] = {v: k for k, v in OPER_STATUS_NAMES.items()}


class PathSyntaxError(ValueError):
    """Path text that cannot be parsed; the message quotes it and names the cause."""


def parse_path(text: str) -> OcPath:
    """Parse ``/a/b[k=v][k2=v2]/c`` (``\\]`` and ``\\\\`` escape inside key values)."""
    elems: list[PathElem] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "/":
            i += 1
            continue
        j = i
        while j < n and text[j] not in "/[":
            j += 1
        name = text[i:j]
        keys: dict[str, str] = {}
        while j < n and text[j] == "[":
            j = _parse_key(text, j + 1, keys)
        if not name or (j < n and text[j] != "/"):
            raise PathSyntaxError(f"path {text!r}: bad element at offset {i}")
        elems.append(PathElem(name, tuple(sorted(keys.items()))))
        i = j
    return tuple(elems)


def _parse_key(text: str, i: int, keys: dict[str, str]) -> int:
    """Parse ``k=v]`` starting at ``i`` into ``keys``; return the offset after ``]``."""
    eq = text.find("=", i)
    if eq < 0:
        raise PathSyntaxError(f"path {text!r}: key at offset {i} has no '='")
    value: list[str] = []
    j = eq + 1
    while j < len(text) and text[j] != "]":
        if text[j] == "\\" and j + 1 < len(text):
            j += 1
        value.append(text[j])
        j += 1
    if j >= len(text) or not text[i:eq]:
        raise PathSyntaxError(f"path {text!r}: key at offset {i} is not closed by ']'")
    keys[text[i:eq]] = "".join(value)
    return j + 1


def format_path(path: OcPath) -> str:
    """Inverse of ``parse_path``; ``/`` for the root."""
    parts = []
    for elem in path:
        keys = "".join(f"[{k}={_escape(v)}]" for k, v in elem.keys)
        parts.append(elem.name + keys)
    return "/" + "/".join(parts)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("]", "\\]")


def bare_name(name: str) -> str:
    """An element name without its module prefix."""
    return name.rpartition(":")[2]


def schema_path(path: OcPath) -> str:
    """The path without keys or module prefixes, e.g. ``/interfaces/interface/state``."""
    return "/" + "/".join(bare_name(e.name) for e in path)


def matches(pattern: OcPath, leaf: OcPath) -> bool:
    """True if ``leaf`` is ``pattern`` or below it (see the module docstring)."""
    for j, p in enumerate(pattern):
        if p.name == "...":
            rest = pattern[j + 1:]
            return any(matches(rest, leaf[k:]) for k in range(len(leaf) + 1))
        if not leaf:
            return False
        elem, leaf = leaf[0], leaf[1:]
        if p.name != "*" and bare_name(p.name) != elem.name:
            return False
        if any(v != "*" and elem.key(k) != v for k, v in p.keys):
            return False
    return True


@dataclass(frozen=True)
class LeafRef:
    """What a leaf path names: an interface (port or NIC name) and a concrete metric."""

    interface: str
    metric: Metric


@dataclass(frozen=True)
class _Template:
    family: MetricFamily
    names: tuple[str, ...]
    keyed: tuple[tuple[int, str, KeyRole], ...]  # element index, key name, role


class OpenConfigSchema:
    """Keyed leaf paths of every catalogue metric that has an OpenConfig path, both ways."""

    def __init__(self, catalogue: Catalogue = CATALOGUE, *, queue_name: str = "3",
                 channel_index: str = "0") -> None:
        self.catalogue = catalogue
        self.queue_name = queue_name
        self.channel_index = channel_index
        self._templates: dict[str, _Template] = {}
        for fam in catalogue.families.values():
            if fam.sources.openconfig_path and fam.scope is not Scope.INT_HOP:
                self._templates[fam.sources.openconfig_path] = _template(fam)

    def leaf_path(self, metric: Metric, interface: str) -> OcPath:
        """The keyed path of ``metric`` on ``interface``; KeyError if it has none."""
        tpl = self._templates[metric.family.sources.openconfig_path or ""]
        fixed = {KeyRole.INTERFACE: interface, KeyRole.QUEUE: self.queue_name,
                 KeyRole.CHANNEL: self.channel_index,
                 KeyRole.PRIORITY: str(metric.label_value)}
        keys: dict[int, tuple[tuple[str, str], ...]] = {
            i: ((key, fixed[role]),) for i, key, role in tpl.keyed}
        return tuple(PathElem(name, keys.get(i, ())) for i, name in enumerate(tpl.names))

    def resolve(self, path: OcPath) -> LeafRef | None:
        """The (interface, metric) a keyed leaf path names, or None if it names none."""
        tpl = self._templates.get(schema_path(path))
        if tpl is None:
            return None
        interface, label = None, None
        for i, key, role in tpl.keyed:
            value = path[i].key(key)
            if value is None:
                return None
            if role is KeyRole.INTERFACE:
                interface = value
            elif role is KeyRole.PRIORITY:
                label = value
            elif value != (self.queue_name if role is KeyRole.QUEUE else self.channel_index):
                return None
        if not interface:
            return None
        return self._metric_of(tpl.family, interface, label)

    def _metric_of(self, fam: MetricFamily, interface: str, label: str | None) -> LeafRef | None:
        if fam.label is None:
            return LeafRef(interface, self.catalogue.by_id(fam.first_id))
        if label is None or not label.isdigit() or int(label) not in fam.label_values:
            return None
        offset = fam.label_values.index(int(label))
        return LeafRef(interface, self.catalogue.by_id(fam.first_id + offset))

    def subtrees(self, scope: Scope = Scope.PORT) -> tuple[str, ...]:
        """The smallest ``state`` containers holding every leaf of ``scope``, as path text."""
        out: dict[str, None] = {}
        for tpl in self._templates.values():
            if tpl.family.scope is scope:
                last_state = max(i for i, name in enumerate(tpl.names) if name == "state")
                out["/" + "/".join(tpl.names[:last_state + 1])] = None
        return tuple(out)


def _template(fam: MetricFamily) -> _Template:
    names = tuple(e.name for e in parse_path(fam.sources.openconfig_path or ""))
    keyed = []
    for i in range(len(names)):
        found = LIST_KEYS.get("/" + "/".join(names[:i + 1]))
        if found is not None:
            keyed.append((i, found[0], found[1]))
    return _Template(fam, names, tuple(keyed))


OPENCONFIG: Final = OpenConfigSchema()
