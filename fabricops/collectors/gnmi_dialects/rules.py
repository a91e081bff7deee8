"""Dialect profiles: tables that map a platform's gNMI leaf paths onto the catalogue.

A profile is a list of ``Rule`` (a leaf path pattern and the catalogue family it
carries) and a list of ``Unsupported`` (path prefixes the platform sends that
the catalogue deliberately has no metric for, each with its reason). Patterns
are path text with placeholders:

- ``{if}`` captures the interface (port) name, in a key value
  (``interface[name={if}]``) or inside an element name (``{if}:3``);
- ``{prio}`` captures a PFC priority (the label of ``pfc_*_pause`` families);
- ``*`` in an element name or key value matches anything, captures nothing;
- any other key value must be equal (``queue[name=3]``: the lossless queue).

An element matches a path element by its name as sent or without its module
prefix (``openconfig-interfaces:interfaces`` is ``interfaces``). Keys a pattern
does not name are ignored; a key it names must be present (a keyless path
names no interface and maps to nothing). ``Resolution`` is what a leaf path
resolves to: a ``LeafTarget``, an ``Unsupported`` reason, or ``None``.
Pure; compiled once per profile, resolved once per distinct path (callers cache).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from fabricops.core.catalogue import CATALOGUE, Metric, MetricKind
from fabricops.core.openconfig import OcPath, PathElem, bare_name, parse_path

OPER_STATES: Final[Mapping[str, int]] = {
    "up": 1,
    "down": 2,
    "testing": 3,
    "unknown": 4,
    "dormant": 5,
    "notpresent": 6,
    "lowerlayerdown": 7,
}
"""IF-MIB ifOperStatus codes by state name, lower case without ``-``/``_``."""


def state_key(text: str) -> str:
    """A state name as looked up in a state table: no module prefix, lower case, no -/_."""
    return bare_name(text).lower().replace("-", "").replace("_", "")


@dataclass(frozen=True)
class ValueMap:
    """How a platform's value becomes the catalogue's: a scale, or a state table."""

    scale: float = 1.0
    states: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LeafTarget:
    """A resolved leaf: the interface it is measured on, its metric, and its value map."""

    interface: str
    metric: Metric
    value_map: ValueMap | None = None


@dataclass(frozen=True)
class Unsupported:
    """Leaves the catalogue deliberately does not carry; ``name`` is shown and counted."""

    prefix: str
    reason: str

    @property
    def name(self) -> str:
        return f"{self.prefix} ({self.reason})"


Resolution = LeafTarget | Unsupported | None

_HOLE: Final = re.compile(r"\{(if|prio)\}|\*")


class _ElemPattern:
    """One compiled pattern element: a name matcher and key matchers."""

    def __init__(self, elem: PathElem) -> None:
        self.literal: str | None = None
        self.regex: re.Pattern[str] | None = None
        if _HOLE.search(elem.name):
            self.regex = re.compile(_to_regex(elem.name))
        else:
            self.literal = elem.name
        self.keys = tuple((k, v) for k, v in elem.keys)

    def match(self, elem: PathElem, caps: dict[str, str]) -> bool:
        """True if ``elem`` matches; a key the pattern captures but ``elem`` lacks is
        captured as ``""`` (the leaf then names no port or priority)."""
        name = elem.name
        if self.literal is not None:
            if name != self.literal and bare_name(name) != self.literal:
                return False
        else:
            assert self.regex is not None
            found = self.regex.fullmatch(name) or self.regex.fullmatch(bare_name(name))
            if found is None:
                return False
            caps.update({k: v for k, v in found.groupdict().items() if v is not None})
        for key, want in self.keys:
            got = elem.key(key)
            if got is None and want in ("{if}", "{prio}"):
                caps.setdefault(want[1:-1], "")
                continue
            if got is None:
                return False
            if want in ("{if}", "{prio}"):
                caps[want[1:-1]] = _unquote(got)
            elif want != "*" and got != want:
                return False
        return True


def _unquote(value: str) -> str:
    """A key value without the quotes some targets wrap it in (Junos: ``'et-0/0/0'``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _to_regex(name: str) -> str:
    out, pos = [], 0
    for hole in _HOLE.finditer(name):
        out.append(re.escape(name[pos : hole.start()]))
        group = hole.group(1)
        out.append(f"(?P<{group}>.+?)" if group else ".*")
        pos = hole.end()
    out.append(re.escape(name[pos:]))
    return "".join(out)


@dataclass(frozen=True)
class Rule:
    """A leaf path pattern and the catalogue family its value is a reading of."""

    pattern: str
    family: str
    value_map: ValueMap | None = None


class _Compiled:
    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.elems = tuple(_ElemPattern(e) for e in parse_path(rule.pattern))
        self.family = CATALOGUE.families[rule.family]
        if self.family.kind is MetricKind.STATE and rule.value_map is None:
            self.value_map: ValueMap | None = ValueMap(states=OPER_STATES)
        else:
            self.value_map = rule.value_map

    def resolve(self, path: OcPath) -> LeafTarget | bool:
        """The leaf ``path`` names; True if it matches but lacks a port or a valid
        priority (it then names nothing at all); False if it does not match."""
        if len(path) != len(self.elems):
            return False
        caps: dict[str, str] = {}
        if not all(p.match(e, caps) for p, e in zip(self.elems, path, strict=True)):
            return False
        interface = caps.get("if")
        if not interface:
            return True
        fam = self.family
        if fam.label is None:
            return LeafTarget(interface, CATALOGUE.by_id(fam.first_id), self.value_map)
        prio = caps.get("prio", "")
        if not prio.isdigit() or int(prio) not in fam.label_values:
            return True
        metric = CATALOGUE.by_id(fam.first_id + fam.label_values.index(int(prio)))
        return LeafTarget(interface, metric, self.value_map)


class _Prefix:
    def __init__(self, entry: Unsupported) -> None:
        self.entry = entry
        self.elems = tuple(_ElemPattern(PathElem(e.name)) for e in parse_path(entry.prefix))

    def covers(self, path: OcPath) -> bool:
        if len(path) < len(self.elems):
            return False
        scratch: dict[str, str] = {}
        return all(p.match(e, scratch) for p, e in zip(self.elems, path, strict=False))


@dataclass(frozen=True)
class Profile:
    """A platform's dialect: rules, deliberate gaps, and how it is subscribed by default.

    ``instances`` names elements whose next element is an instance name (a port
    in a SONiC table, say): unmapped paths show it as ``*`` so that their count
    stays bounded. ``entity_lists`` are the patterns of a port's own list entry
    (a delete there means the port is gone).
    """

    name: str
    description: str
    rules: tuple[Rule, ...]
    unsupported: tuple[Unsupported, ...] = ()
    paths: tuple[str, ...] = ()
    encoding: str = "PROTO"
    target: str | None = None
    instances: frozenset[str] = frozenset()
    entity_lists: tuple[str, ...] = ()


class ProfileResolver:
    """Resolves leaf paths with one profile's tables (pure; callers cache results)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._by_tail: dict[tuple[int, str], list[_Compiled]] = {}
        self._open: dict[int, list[_Compiled]] = {}
        for rule in profile.rules:
            c = _Compiled(rule)
            last = c.elems[-1]
            if last.literal is not None:
                self._by_tail.setdefault((len(c.elems), last.literal), []).append(c)
            else:
                self._open.setdefault(len(c.elems), []).append(c)
        self._gaps = tuple(_Prefix(u) for u in profile.unsupported)
        self._entities = tuple(
            tuple(_ElemPattern(e) for e in parse_path(p)) for p in profile.entity_lists
        )

    def resolve(self, path: OcPath) -> Resolution:
        """What ``path`` (a full leaf path) carries under this profile."""
        if path:
            name = path[-1].name
            tails = {bare_name(name), name}
            candidates = [c for t in tails for c in self._by_tail.get((len(path), t), ())]
            for c in (*candidates, *self._open.get(len(path), ())):
                found = c.resolve(path)
                if isinstance(found, LeafTarget):
                    return found
                if found:
                    return None
        for gap in self._gaps:
            if gap.covers(path):
                return gap.entry
        return None

    def entity_of(self, path: OcPath) -> tuple[str | None, bool]:
        """For a deleted path: (the port whose entry it is, or None; whether it is above
        every port's entry, so that it deletes them all)."""
        for elems in self._entities:
            if len(path) == len(elems):
                caps: dict[str, str] = {}
                if all(p.match(e, caps) for p, e in zip(elems, path, strict=True)):
                    return caps.get("if"), False
            if len(path) < len(elems):
                scratch: dict[str, str] = {}
                if all(
                    p.literal is not None and p.match(PathElem(e.name), scratch)
                    for p, e in zip(elems, path, strict=False)
                ):
                    return None, True
        return None, False

    def normalise(self, origin: str, path: OcPath) -> str:
        """The bounded display form of an unmapped path: keys and module prefixes
        dropped, instance elements as ``*``, the origin in front when there is one."""
        names: list[str] = []
        previous = ""
        for elem in path:
            names.append("*" if previous in self.profile.instances else bare_name(elem.name))
            previous = bare_name(elem.name)
        text = "/" + "/".join(names)
        return f"{origin}:{text}" if origin else text


def rules(table: Iterable[tuple[str, str]], value_map: ValueMap | None = None) -> tuple[Rule, ...]:
    """Rules from (pattern, family) pairs sharing one value map."""
    return tuple(Rule(p, f, value_map) for p, f in table)
