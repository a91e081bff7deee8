"""Entity naming: one stable, readable id for every measured thing.

- switch ``leaf-0-3``, host ``host-017``
- port ``leaf-0-3:eth12``, NIC ``host-017:nic2`` (a NIC is a host's port)
- link ``leaf-0-3:eth12~spine-1:eth3`` (its two port ids, sorted)
- job ``job-llm-01``
"""

from __future__ import annotations

import re
from enum import StrEnum

NODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
IFNAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./\-]*$")
PORT_SEP = ":"
LINK_SEP = "~"


class EntityKind(StrEnum):
    """What an entity id names."""

    NODE = "node"
    PORT = "port"
    LINK = "link"
    JOB = "job"


class EntityError(ValueError):
    """An entity id that does not follow the naming rules."""


def check_node_id(node: str) -> str:
    """Return ``node`` if it is a valid node id, else raise EntityError naming it."""
    if not NODE_RE.match(node):
        raise EntityError(
            f"node id {node!r} is not valid: use letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
    return node


def port_id(node: str, ifname: str) -> str:
    """The id of port ``ifname`` on ``node``, e.g. ``leaf-0-3:eth12``."""
    check_node_id(node)
    if not IFNAME_RE.match(ifname):
        raise EntityError(f"interface name {ifname!r} on node {node!r} is not valid")
    return f"{node}{PORT_SEP}{ifname}"


def split_port(port: str) -> tuple[str, str]:
    """Split a port id into (node, ifname); raise EntityError if it is not a port id."""
    node, sep, ifname = port.partition(PORT_SEP)
    if not sep or not node or not ifname:
        raise EntityError(f"port id {port!r} is not of the form NODE:IFNAME")
    return node, ifname


def link_id(port_a: str, port_b: str) -> str:
    """The id of the link between two ports: both port ids, sorted, joined by '~'."""
    split_port(port_a)
    split_port(port_b)
    if port_a == port_b:
        raise EntityError(f"a link cannot join port {port_a!r} to itself")
    a, b = sorted((port_a, port_b))
    return f"{a}{LINK_SEP}{b}"


def split_link(link: str) -> tuple[str, str]:
    """Split a link id into its two port ids (sorted); raise EntityError if malformed."""
    a, sep, b = link.partition(LINK_SEP)
    if not sep:
        raise EntityError(f"link id {link!r} is not of the form PORT~PORT")
    split_port(a)
    split_port(b)
    return a, b


def entity_kind(entity: str) -> EntityKind:
    """Classify an entity id by its shape (jobs start with ``job-``)."""
    if LINK_SEP in entity:
        return EntityKind.LINK
    if PORT_SEP in entity:
        return EntityKind.PORT
    if entity.startswith("job-"):
        return EntityKind.JOB
    return EntityKind.NODE
