"""lldpd's neighbour table (``lldpcli -f json show neighbors``) to switch ports.

Pure function: the JSON text in, the switch port seen on each local interface
out, as ``{interface: (switch system name, port id)}``. Both lldpd layouts are
read: ``-f json`` (a single interface or chassis is an object, several are a
list) and ``-f json0`` (lists everywhere, names under ``"name"``). The port id
is the neighbour's port id when it is an interface name, else its
description. A neighbour without a system name or port is skipped and named
in the problems.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fabricops.agent.values import Problem, Reason

Neighbours = dict[str, tuple[str, str]]
_CHASSIS_FIELDS = frozenset({"id", "descr", "mgmt-ip", "mgmt-iface", "capability"})


def parse_neighbours(text: str | None, where: str) -> tuple[Neighbours, list[Problem]]:
    """Each local interface's LLDP neighbour (switch, port), and what could not be read."""
    if text is None:
        return {}, [Problem(where, Reason.MISSING)]
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        whole = text.endswith("\n") and text.rstrip().endswith(("}", "]"))
        reason = Reason.GARBAGE if whole else Reason.TRUNCATED
        return {}, [Problem(where, reason, str(exc))]
    lldp = doc.get("lldp") if isinstance(doc, dict) else None
    if isinstance(lldp, list):  # json0
        lldp = lldp[0] if lldp and isinstance(lldp[0], dict) else None
    if not isinstance(lldp, dict):
        return {}, [Problem(where, Reason.GARBAGE, "no 'lldp' object")]
    found: Neighbours = {}
    problems: list[Problem] = []
    for name, entry in _named(lldp.get("interface")):
        neighbour = _neighbour(entry)
        if neighbour is None:
            problems.append(Problem(f"{where}:{name}", Reason.GARBAGE,
                                    "neighbour without system name or port"))
        else:
            found[name] = neighbour
    return found, problems


def _named(node: Any) -> Iterator[tuple[str, Any]]:
    """(name, body) pairs of a json ``{name: body}`` object, a list of them, or json0 list."""
    items = node if isinstance(node, list) else [node] if node is not None else []
    for item in items:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("name"), str):  # json0
            yield item["name"], item
            continue
        for name, body in item.items():
            if isinstance(body, dict):
                yield name, body


def _value(node: Any) -> str | None:
    """A json leaf (``"x"``), json ``{"value": "x"}``, or json0 ``[{"value": "x"}]``."""
    if isinstance(node, list):
        node = node[0] if node else None
    if isinstance(node, dict):
        node = node.get("value")
    return node if isinstance(node, str) and node else None


def _switch_name(chassis: Any) -> str | None:
    """json: ``{"<sysname>": {...}}``; json0: ``[{"name": [{"value": "<sysname>"}]}]``."""
    if isinstance(chassis, list):
        chassis = chassis[0] if chassis and isinstance(chassis[0], dict) else None
    if not isinstance(chassis, dict):
        return None
    if "name" in chassis and not isinstance(chassis["name"], dict):
        return _value(chassis["name"])
    for key, body in chassis.items():
        if isinstance(body, dict) and key not in _CHASSIS_FIELDS:
            return str(key)
    return None


def _neighbour(entry: dict[str, Any]) -> tuple[str, str] | None:
    switch = _switch_name(entry.get("chassis"))
    port = entry.get("port")
    if isinstance(port, list):
        port = port[0] if port and isinstance(port[0], dict) else None
    if not isinstance(port, dict):
        return None
    ident = port.get("id")
    if isinstance(ident, list):
        ident = ident[0] if ident else None
    port_name = _value(ident) if isinstance(ident, dict) and ident.get("type") == "ifname" \
        else None
    port_name = port_name or _value(port.get("descr")) or _value(ident)
    if not switch or not port_name:
        return None
    return switch, port_name
