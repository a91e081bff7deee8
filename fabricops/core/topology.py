"""The topology model: nodes, ports, links, NIC attachment, rails and pods.

One document describes a fabric. The simulator writes it; for a real fabric the
user supplies it. A host's ports are its NICs (``host-017:nic2``); every link
joins two ports and every port is on at most one link. Validation errors name
the element that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fabricops.core.entities import EntityError, check_node_id, link_id, port_id, split_port
from fabricops.core.yamlfile import read_text


class TopologyError(ValueError):
    """A topology document that cannot be used; the message names the bad element."""


class NodeRole(StrEnum):
    """The part a node plays. Hosts carry NICs; everything else forwards."""

    HOST = "host"
    LEAF = "leaf"
    SPINE = "spine"
    AGG = "agg"
    CORE = "core"
    SWITCH = "switch"


class Port(BaseModel):
    """A port of a node; on a host, a NIC."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Interface name, unique on its node (eth12, nic2)")
    speed_bps: int = Field(gt=0, description="Line rate in bits per second")
    rail: int | None = Field(default=None, ge=0, description="Rail of a NIC, if rail-optimized")


class Node(BaseModel):
    """A switch or a host."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    role: NodeRole
    pod: int | None = Field(default=None, ge=0, description="Pod (fat-tree) or group")
    rail: int | None = Field(default=None, ge=0, description="Rail a rail-leaf serves")
    ports: tuple[Port, ...] = ()

    @property
    def is_host(self) -> bool:
        return self.role is NodeRole.HOST


class Link(BaseModel):
    """A full-duplex link between two ports, given by their port ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    a: str
    b: str

    @property
    def id(self) -> str:
        return link_id(self.a, self.b)


class Topology(BaseModel):
    """A whole fabric. Build it with a builder or load it with ``load_topology``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "fabric"
    kind: str = Field(default="custom", description="Builder that made it, or 'custom'")
    params: dict[str, Any] = Field(default_factory=dict, description="Builder parameters")
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]

    @model_validator(mode="after")
    def _check(self) -> Topology:
        problems = list(_problems(self))
        if problems:
            shown = "; ".join(problems[:10])
            more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
            raise ValueError(shown + more)
        return self

    @cached_property
    def node_by_id(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    @cached_property
    def port_ids(self) -> tuple[str, ...]:
        """Every port id, in node order then port order."""
        return tuple(port_id(n.id, p.name) for n in self.nodes for p in n.ports)

    @cached_property
    def port_by_id(self) -> dict[str, tuple[Node, Port]]:
        return {port_id(n.id, p.name): (n, p) for n in self.nodes for p in n.ports}

    @cached_property
    def peer_of(self) -> dict[str, str]:
        """Port id to the port id at the other end of its link."""
        peers: dict[str, str] = {}
        for link in self.links:
            peers[link.a] = link.b
            peers[link.b] = link.a
        return peers

    @cached_property
    def link_by_id(self) -> dict[str, Link]:
        return {link.id: link for link in self.links}

    def hosts(self) -> Iterator[Node]:
        return (n for n in self.nodes if n.is_host)

    def switches(self) -> Iterator[Node]:
        return (n for n in self.nodes if not n.is_host)

    def nics(self) -> Iterator[str]:
        """Every NIC id (a host's port id)."""
        return (port_id(n.id, p.name) for n in self.hosts() for p in n.ports)

    def attachment(self, nic: str) -> str:
        """The switch port a NIC is cabled to; TopologyError if it is not cabled."""
        try:
            return self.peer_of[nic]
        except KeyError:
            raise TopologyError(f"NIC {nic!r} is not attached to any switch port") from None

    def link_of_port(self, port: str) -> str:
        """The id of the link a port is on; TopologyError if it is not cabled."""
        try:
            return link_id(port, self.peer_of[port])
        except KeyError:
            raise TopologyError(f"port {port!r} is not on any link") from None

    def entity_exists(self, entity: str) -> bool:
        """True if ``entity`` names a node, port or link of this topology."""
        return (
            entity in self.node_by_id or entity in self.port_by_id or entity in self.link_by_id
        )

    def summary(self) -> dict[str, int]:
        hosts = sum(1 for _ in self.hosts())
        return {
            "switches": len(self.nodes) - hosts,
            "hosts": hosts,
            "nics": sum(1 for _ in self.nics()),
            "ports": len(self.port_ids),
            "links": len(self.links),
        }


def _problems(topo: Topology) -> Iterator[str]:
    """Every reason the topology is not usable, each naming its element."""
    seen_nodes: set[str] = set()
    ports: dict[str, Node] = {}
    for node in topo.nodes:
        try:
            check_node_id(node.id)
        except EntityError as exc:
            yield str(exc)
        if node.id in seen_nodes:
            yield f"node {node.id!r} is defined twice"
        seen_nodes.add(node.id)
        names: set[str] = set()
        for port in node.ports:
            if port.name in names:
                yield f"node {node.id!r} has port {port.name!r} twice"
            names.add(port.name)
            try:
                ports[port_id(node.id, port.name)] = node
            except EntityError as exc:
                yield str(exc)
    used: dict[str, int] = {}
    for i, link in enumerate(topo.links):
        where = f"link #{i} ({link.a} ~ {link.b})"
        if link.a == link.b:
            yield f"{where} joins a port to itself"
            continue
        ends_ok = True
        for end in (link.a, link.b):
            try:
                node_name, _ = split_port(end)
            except EntityError as exc:
                yield f"{where}: {exc}"
                ends_ok = False
                continue
            if end not in ports:
                missing = "node" if node_name not in seen_nodes else "port"
                what = node_name if missing == "node" else end
                yield f"{where} is dangling: {missing} {what!r} does not exist"
                ends_ok = False
            elif end in used:
                yield f"{where}: port {end!r} is already used by link #{used[end]}"
            else:
                used[end] = i
        if ends_ok and ports[link.a].is_host and ports[link.b].is_host:
            yield f"{where} joins two hosts; hosts attach only to switches"


def topology_from_dict(doc: dict[str, Any], *, source: str = "topology") -> Topology:
    """Validate a topology document; TopologyError names the source and bad element."""
    try:
        return Topology.model_validate(doc)
    except ValidationError as exc:
        raise TopologyError(f"{source}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:10]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def load_topology(path: str | Path) -> Topology:
    """Load a topology from a .json, .yaml or .yml file."""
    p = Path(path)
    text = read_text(p, "topology file", TopologyError)
    try:
        doc = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise TopologyError(f"{p}: not valid {p.suffix.lstrip('.') or 'YAML'}: {exc}") from None
    if not isinstance(doc, dict):
        raise TopologyError(f"{p}: a topology document must be a mapping at the top level")
    return topology_from_dict(doc, source=str(p))


def save_topology(topo: Topology, path: str | Path) -> Path:
    """Write a topology as JSON (.json) or YAML (any other suffix)."""
    p = Path(path)
    doc = topo.model_dump(mode="json", exclude_defaults=False)
    if p.suffix == ".json":
        p.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    else:
        p.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return p
