"""Neighbour claims into links. Pure: device reports in, nodes, links and findings out.

Each device is named by the inventory, else by its LLDP system name (sysName),
else by its chassis id, made a valid node id (a change is a finding). A
neighbour is an inventoried device when its chassis id or system name is one;
its port id is then looked up among the ports that device advertises (or
names); failing that, the far device's own claim back to this port settles it.
A neighbour that is not inventoried is named by its system name (a host,
unless it announces bridge or router and not station-only: a switch), its
port by an ``interfaceName``/``interfaceAlias``/``local`` id, else by the port
description. A link kept is seen from both ends, or from one end when the other
end is silent on that port (``ONE_SIDED``); ends that disagree are a
``CONFLICT``, and a port on several links keeps only the link both ends agree on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricops.core import lldp_mib as lm
from fabricops.core.entities import IFNAME_RE, NODE_RE, link_id, port_id
from fabricops.discover.model import DeviceReport, Finding, FindingKind, Neighbor

_NAMED = (lm.PortIdSubtype.INTERFACE_NAME, lm.PortIdSubtype.INTERFACE_ALIAS,
          lm.PortIdSubtype.LOCAL)


@dataclass(frozen=True)
class NodeFacts:
    """A node of the discovered fabric."""

    id: str
    host: bool
    inventoried: bool


@dataclass
class Resolution:
    """Nodes and links found, speeds reported, and everything that could not be used."""

    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)
    speeds: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # report label -> node id
    one_sided: int = 0
    confirmed: int = 0


@dataclass(frozen=True)
class _Claim:
    node: str
    port: str
    far: str
    far_port: str | None
    external: bool
    seen: Neighbor


def valid_name(text: str, pattern: re.Pattern[str], fallback: str) -> str:
    """``text`` made to match ``pattern``: other characters become '-'."""
    if pattern.match(text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.\-/]" if pattern is IFNAME_RE else r"[^A-Za-z0-9_.\-]",
                     "-", text).lstrip("-_./")
    return cleaned if cleaned and pattern.match(cleaned) else fallback


class _Resolver:
    def __init__(self, reports: list[DeviceReport]) -> None:
        self.out = Resolution()
        self.reports = [r for r in reports if r.answered]
        self.by_chassis: dict[tuple[int, str], str] = {}
        self.by_sysname: dict[str, str] = {}
        self.refs: dict[str, dict[tuple[int, str], str]] = {}
        self.station: set[str] = set()

    def _name(self, report: DeviceReport) -> str:
        wanted = report.device or report.sys_name or report.chassis_id or report.label
        name = valid_name(wanted, NODE_RE, "device")
        base, n = name, 2
        while name in self.out.nodes:
            name, n = f"{base}-{n}", n + 1
        if name != wanted:
            self.out.findings.append(Finding(FindingKind.RENAMED, report.label,
                                             f"{wanted!r} -> {name!r}"))
        return name

    def _port(self, node: str, name: str) -> str:
        fixed = valid_name(name, IFNAME_RE, "port")
        if fixed != name:
            self.out.findings.append(Finding(FindingKind.RENAMED, f"{node}",
                                             f"port {name!r} -> {fixed!r}"))
        return fixed

    def index(self) -> None:
        for r in self.reports:
            node = self._name(r)
            self.out.nodes[node] = NodeFacts(node, r.station, True)
            self.out.names[r.label] = node
            if r.station:
                self.station.add(node)
            if r.chassis_subtype is not None and r.chassis_id:
                self.by_chassis[(r.chassis_subtype, r.chassis_id)] = node
            for alias in {r.sys_name, r.device or ""} - {""}:
                self.by_sysname.setdefault(alias, node)
            refs = self.refs[node] = {}
            for p in r.ports.values():
                name = self._port(node, p.name)
                pairs = [(int(lm.PortIdSubtype.INTERFACE_NAME), p.name),
                         (int(lm.PortIdSubtype.INTERFACE_ALIAS), p.name), *p.aliases]
                if p.id_subtype is not None and p.port_id:
                    pairs.insert(0, (p.id_subtype, p.port_id))
                for pair in pairs:
                    refs.setdefault(pair, name)
                if p.speed_bps:
                    self.out.speeds[port_id(node, name)] = p.speed_bps

    def claims(self) -> list[_Claim]:
        out = []
        for r in self.reports:
            node = self.out.names[r.label]
            for n in r.neighbors:
                out.append(self._claim(node, n))
        return out

    def _claim(self, node: str, n: Neighbor) -> _Claim:
        local = valid_name(n.local_port, IFNAME_RE, "port")
        far = self.by_chassis.get((n.chassis_subtype, n.chassis_id)) or \
            self.by_sysname.get(n.sys_name)
        if n.station and far is not None:
            self.station.add(far)
        if far is not None:
            return _Claim(node, local, far, self.refs[far].get((n.port_subtype, n.port_id)),
                          False, n)
        name = valid_name(n.sys_name or f"chassis-{n.chassis_id}", NODE_RE, "neighbor")
        far_port = None
        for text in ((n.port_id,) if n.port_subtype in _NAMED else ()) + (n.port_desc,):
            if text and IFNAME_RE.match(text):
                far_port = text
                break
        if n.bridge and not n.station:
            self.out.findings.append(Finding(FindingKind.NOT_INVENTORIED, f"{node}:{local}",
                                             f"{name} announces bridge/router"))
        return _Claim(node, local, name, far_port, True, n)


def resolve(reports: list[DeviceReport]) -> Resolution:
    """Nodes, links and findings of the devices' reports (see the module docstring)."""
    r = _Resolver(reports)
    r.index()
    claims = r.claims()
    by_port = {(c.node, c.port): c for c in claims}
    back: dict[tuple[str, str, str | None], list[str]] = {}
    for d in claims:
        back.setdefault((d.far, d.node, d.far_port), []).append(d.port)
    evidence: dict[str, tuple[str, str, set[str]]] = {}
    for c in claims:
        found = [] if c.external else back.get((c.node, c.far, c.port), [])
        far_port = c.far_port if c.far_port is not None else \
            (found[0] if len(found) == 1 else None)
        if far_port is None:
            r.out.findings.append(Finding(
                FindingKind.UNRESOLVED_PORT, f"{c.node}:{c.port}",
                f"{c.far} port id {c.seen.port_id!r} (subtype {c.seen.port_subtype})"))
            continue
        if c.external and c.far not in r.out.nodes:
            switch_like = c.seen.bridge and not c.seen.station
            r.out.nodes[c.far] = NodeFacts(c.far, not switch_like, False)
        a, b = port_id(c.node, c.port), port_id(c.far, far_port)
        if a == b:
            continue
        entry = evidence.setdefault(link_id(a, b), (a, b, set()))
        entry[2].add(c.node)
    for node in r.station:
        facts = r.out.nodes[node]
        r.out.nodes[node] = NodeFacts(node, True, facts.inventoried)
    _keep(r.out, evidence, by_port)
    return r.out


def _keep(out: Resolution, evidence: dict[str, tuple[str, str, set[str]]],
          by_port: dict[tuple[str, str], _Claim]) -> None:
    """Links both ends agree on, then one-sided ones whose ports are still free."""
    both: list[tuple[str, str, set[str]]] = []
    single: list[tuple[str, str, set[str]]] = []
    for a, b, seen in evidence.values():
        far_nodes = {a.partition(":")[0], b.partition(":")[0]}
        inventoried = {n for n in far_nodes if out.nodes[n].inventoried}
        (both if inventoried <= seen else single).append((a, b, seen))
    used: dict[str, str] = {}
    for group in (both, single):
        for a, b, seen in sorted(group):
            hosts = [out.nodes[p.partition(":")[0]].host for p in (a, b)]
            if all(hosts):
                out.findings.append(Finding(FindingKind.HOST_TO_HOST, f"{a} ~ {b}"))
                continue
            taken = [p for p in (a, b) if p in used]
            if taken:
                out.findings.append(Finding(FindingKind.CONFLICT, f"{a} ~ {b}",
                                            f"{taken[0]} is already on {used[taken[0]]}"))
                continue
            if group is single:
                silent = _silent_end(a, b, seen, by_port)
                out.findings.append(Finding(FindingKind.ONE_SIDED, f"{a} ~ {b}",
                                            f"{silent} reports no neighbour there"))
                out.one_sided += 1
            else:
                out.confirmed += 1
            used[a] = used[b] = link_id(a, b)
            out.links.append((a, b))


def _silent_end(a: str, b: str, seen: set[str], by_port: dict[tuple[str, str], _Claim]) -> str:
    for p in (a, b):
        node, _, name = p.partition(":")
        if node not in seen:
            return p if (node, name) not in by_port else f"{p} (it names another)"
    return a


__all__ = ["NodeFacts", "Resolution", "resolve", "valid_name"]
