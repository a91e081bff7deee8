"""Port ids of a device: one printable, unique name per ifIndex, learnt once.

The rule, for every ifIndex that any interface column of the device lists:

1. a naming template, if the inventory gives one for the device (``snmp.port_name``)
   or for its vendor (the poller's ``port_names_by_vendor``, keyed by a
   ``sysObjectID`` prefix); fields ``{ifName}``, ``{ifDescr}``, ``{ifAlias}``,
   ``{ifIndex}``; where it renders empty, the steps below apply;
2. else ``ifName``, else ``ifDescr``, else ``ifAlias``, else ``ifIndex-N``.

Characters that are not printable (a NUL terminator, control characters, bytes
that are not UTF-8) are removed and surrounding blanks trimmed; a name empty after
that counts as absent. When several ifIndexes end up with one name, the lowest
ifIndex keeps it and each other gets ``#N`` appended (N its ifIndex), so ids do not
depend on the order an agent lists its rows. The names are kept with the device
description and reused by every poll until the device is described again (its
``sysUpTime`` went back or ``ifTableLastChange`` moved); a port's id therefore
never moves between polls.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping

from fabricops.core import snmp_mib as mib
from fabricops.core.snmp_mib import Oid

NAME_SOURCES: tuple[mib.Column, ...] = (mib.IF_NAME, mib.IF_DESCR, mib.IF_ALIAS)
TEMPLATE_FIELDS = frozenset(("ifName", "ifDescr", "ifAlias", "ifIndex"))


def printable(value: int | bytes | None) -> str:
    """``value`` as text with every non-printable character removed, blanks trimmed."""
    if value is None:
        return ""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return "".join(ch for ch in text if ch.isprintable() and ch != "\ufffd").strip()


def check_template(template: str) -> str:
    """``template`` if it is a valid port naming template, else ValueError naming why."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ValueError(f"port name template {template!r}: {exc}") from None
    unknown = sorted(fields - TEMPLATE_FIELDS)
    if unknown or not fields:
        raise ValueError(f"port name template {template!r} must use only "
                         f"{{{'}, {'.join(sorted(TEMPLATE_FIELDS))}}}, got {unknown or 'none'}")
    return template


def port_names(if_indexes: Iterable[int], sources: Mapping[str, Mapping[int, int | bytes]],
               template: str | None = None) -> dict[int, str]:
    """ifIndex -> unique printable port name (see the module docstring).

    ``sources`` maps ``ifName``/``ifDescr``/``ifAlias`` to their rows by ifIndex.
    """
    chosen: dict[int, str] = {}
    for ifx in sorted(set(if_indexes)):
        texts = {c.name: printable(sources.get(c.name, {}).get(ifx)) for c in NAME_SOURCES}
        name = printable(template.format(ifIndex=ifx, **texts).encode()) if template else ""
        chosen[ifx] = name or next((t for t in texts.values() if t), f"ifIndex-{ifx}")
    return _unique(chosen)


def _unique(chosen: dict[int, str]) -> dict[int, str]:
    taken: set[str] = set()
    out = {}
    for ifx, name in sorted(chosen.items()):
        if name in taken:
            name = f"{name}#{ifx}"
            while name in taken:
                name += "#"
        taken.add(name)
        out[ifx] = name
    return out


def vendor_template(sys_object_id: Oid | None, templates: Mapping[str, str]) -> str | None:
    """The template whose dotted ``sysObjectID`` prefix is longest among those matching."""
    if sys_object_id is None:
        return None
    dotted = ".".join(map(str, sys_object_id))
    found = [p for p in templates if dotted == p or dotted.startswith(p.rstrip(".") + ".")]
    return templates[max(found, key=len)] if found else None


__all__ = ["NAME_SOURCES", "TEMPLATE_FIELDS", "check_template", "port_names", "printable",
           "vendor_template"]
