"""Probe flows for INT, and how a fabric tells which links a flow's packets cross.

A probe flow is a RoCEv2 5-tuple reduced to what ECMP hashing varies: source
NIC, destination NIC (port ids such as ``host-017:nic2``) and UDP source port
(destination port 4791, protocol UDP). A ``PathTracer`` answers, for given
flows, which links (``Link.id``, e.g. ``host-000:nic0~leaf-0:eth1``) each one
crosses in order under the forwarding in place now: a real fabric's hash
calculators or INT itself, or the simulated fabric's router.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, NamedTuple, Protocol

from pydantic import Field

MIN_SPORT = 1
MAX_SPORT = 0xFFFF
LinkPath = tuple[str, ...]
"""Link ids a flow crosses, from its source NIC's link to its destination NIC's."""


class _ProbeFlowFields(NamedTuple):
    src: Annotated[str, Field(min_length=1, description="Source NIC port id")]
    dst: Annotated[str, Field(min_length=1, description="Destination NIC port id")]
    sport: Annotated[int, Field(ge=MIN_SPORT, le=MAX_SPORT, description="UDP source port")]


class ProbeFlow(_ProbeFlowFields):
    """(source NIC, destination NIC, UDP source port); a plain tuple of (str, str, int).

    Constructing one checks that both ends are non-empty strings and that the
    source port is 1..65535 (ValueError naming the flow otherwise).
    """

    __slots__ = ()

    def __new__(cls, src: str, dst: str, sport: int) -> ProbeFlow:
        if not (isinstance(src, str) and src and isinstance(dst, str) and dst):
            raise ValueError(f"probe flow ({src!r}, {dst!r}, {sport!r}): ends must be NIC ids")
        if isinstance(sport, bool) or not isinstance(sport, int):
            raise ValueError(f"probe flow ({src}, {dst}): source port {sport!r} is not an int")
        if not MIN_SPORT <= sport <= MAX_SPORT:
            raise ValueError(f"probe flow ({src}, {dst}): source port {sport} is not 1..65535")
        return super().__new__(cls, src, dst, sport)

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} sport {self.sport}"


class PathTracer(Protocol):
    """Tells which links flows cross under the fabric's current forwarding."""

    def trace(self, flows: Sequence[ProbeFlow]) -> list[LinkPath | None]:
        """Per flow, in order, the link ids it crosses; None if its packets would not
        arrive (no route, or a link on its path is down). ValueError names an end
        that is not a NIC of the fabric."""
        ...
