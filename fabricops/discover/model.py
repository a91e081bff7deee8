"""What one device says about itself and its LLDP neighbours, and what could not be used.

Reports are built by the parsers of each protocol and consumed by ``links``.
Ids are kept as text: MAC addresses as ``aa:bb:cc:dd:ee:ff``, others as sent.
Every row that cannot be used becomes a ``Finding`` (kind, where, detail): it is
counted and shown, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class FindingKind(StrEnum):
    """Why a row, neighbour or device could not be used as it was."""

    UNREACHABLE = "device did not answer"
    UNKNOWN_SUBTYPE = "unknown id subtype"
    EMPTY_ID = "empty port or chassis id"
    TRUNCATED = "truncated row"
    BAD_INDEX = "malformed table index"
    NO_LOCAL_PORT = "neighbour on a port the device does not have"
    UNRESOLVED_PORT = "port id names no port of the neighbour"
    ONE_SIDED = "neighbour seen from one side only"
    CONFLICT = "the two ends disagree"
    RENAMED = "name changed to a valid id"
    NOT_INVENTORIED = "switch neighbour not in the inventory (seen from one end)"
    NO_TIER = "switch with no path to a host"
    SPEED_UNKNOWN = "port speed not reported (default used)"
    HOST_TO_HOST = "host cabled to a host"


@dataclass(frozen=True)
class Finding:
    """One thing discovery could not use as reported; ``where`` names the device/port."""

    kind: FindingKind
    where: str
    detail: str = ""

    def line(self) -> str:
        return f"{self.where}: {self.kind.value}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class LocalPort:
    """A port of the reporting device: its name and the port id it advertises."""

    name: str
    id_subtype: int | None = None
    port_id: str | None = None
    aliases: tuple[tuple[int, str], ...] = ()  # other (subtype, id) that name this port
    speed_bps: int | None = None


@dataclass(frozen=True)
class Neighbor:
    """One LLDP neighbour seen on ``local_port`` of the reporting device."""

    local_port: str
    chassis_subtype: int
    chassis_id: str
    port_subtype: int
    port_id: str
    port_desc: str = ""
    sys_name: str = ""
    station: bool = False  # announces station-only, as a server does
    bridge: bool = False  # announces bridge or router


@dataclass
class DeviceReport:
    """Everything one device answered; ``label`` names it before its name is known."""

    label: str
    device: str | None = None  # the inventory's name, if it gave one
    sys_name: str = ""
    chassis_subtype: int | None = None
    chassis_id: str = ""
    station: bool = False
    ports: dict[str, LocalPort] = field(default_factory=dict)
    neighbors: list[Neighbor] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    answered: bool = True
