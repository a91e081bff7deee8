"""The discovered cabling against the intended one: missing, miswired, unexpected. Pure.

For every intended link not found as such: ``unchecked`` when neither end has a
neighbour and an end's device did not answer (nothing can be said of it),
``missing`` when neither end has a neighbour, else ``miswired`` naming where
each end really goes (one line per intended link, so a swap of two links is two
lines). A discovered link that
explains no miswire and joins ports the intended topology leaves uncabled (or
that it does not know) is ``unexpected``. Each difference becomes an ``Event``
(kind ``anomaly``, metric ``lldp_neighbor``) for the bus and the store.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from fabricops.core.entities import link_id
from fabricops.core.records import Event, EventKind, Severity
from fabricops.core.topology import Topology

CABLING_METRIC = "lldp_neighbor"


class DiffKind(StrEnum):
    UNCHECKED = "unchecked"
    MISSING = "missing"
    MISWIRED = "miswired"
    UNEXPECTED = "unexpected"


@dataclass(frozen=True)
class Difference:
    """One cabling difference; ``entity`` is the intended (or found) link id."""

    kind: DiffKind
    entity: str
    text: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _where(port: str, peers: dict[str, str]) -> str:
    found = peers.get(port)
    return f"{port} reaches {found}" if found else f"{port} has no neighbour"


def diff_cabling(intended: Topology, found: Topology,
                 silent: frozenset[str] = frozenset()) -> list[Difference]:
    """Every difference between the intended and the discovered links, intended order;
    ``silent`` names the devices that did not answer."""
    peers = found.peer_of
    out: list[Difference] = []
    explained: set[str] = set()
    for link in intended.links:
        if link.id in found.link_by_id:
            continue
        a_peer, b_peer = peers.get(link.a), peers.get(link.b)
        silent_ends = [end.partition(":")[0] for end in (link.a, link.b)
                       if end.partition(":")[0] in silent]
        if a_peer is None and b_peer is None and silent_ends:
            out.append(Difference(DiffKind.UNCHECKED, link.id,
                                  f"unchecked  {link.a} ~ {link.b}: "
                                  f"{' and '.join(silent_ends)} did not answer"))
            continue
        if a_peer is None and b_peer is None:
            out.append(Difference(DiffKind.MISSING, link.id,
                                  f"missing    {link.a} ~ {link.b}: neither end has a "
                                  "neighbour"))
            continue
        for end, peer in ((link.a, a_peer), (link.b, b_peer)):
            if peer is not None:
                explained.add(link_id(end, peer))
        out.append(Difference(DiffKind.MISWIRED, link.id,
                              f"miswired   {link.a} ~ {link.b}: {_where(link.a, peers)}, "
                              f"{_where(link.b, peers)}"))
    for link in found.links:
        if link.id in intended.link_by_id or link.id in explained:
            continue
        out.append(Difference(DiffKind.UNEXPECTED, link.id,
                              f"unexpected {link.a} ~ {link.b}: not in the intended cabling"))
    return out


def difference_events(diffs: list[Difference], ts_ns: int) -> list[Event]:
    """One Event per difference, on the device of the link's first end."""
    events = []
    for d in diffs:
        device = d.entity.partition(":")[0]
        severity = Severity.CRITICAL if d.kind is DiffKind.MISWIRED else Severity.WARNING
        events.append(Event(ts_ns=ts_ns, device=device, entity=d.entity,
                            metric=CABLING_METRIC, kind=EventKind.ANOMALY,
                            value=1.0, severity=severity, detail=d.text))
    return events
