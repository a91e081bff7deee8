"""LLDP-MIB over SNMP, through the SNMP poller's own walker and clients.

A thin shell: the columns of :mod:`fabricops.core.lldp_mib` are walked side by
side by :func:`~fabricops.collectors.snmp_walk.walk` (so v1 and GETNEXT agents,
agents that cap their answers, and ``tooBig`` are handled as the poller handles
them), over the v1/v2c client, the native SNMPv3 client where it supports the
target's protocols, else pysnmp's. Each inventory entry's own transport
settings (timeout, retries, max-repetitions, varbinds per request, GETNEXT)
win over discovery's defaults. The rows go to
:func:`~fabricops.discover.snmp_rows.report_from_snmp`; ``PollError`` names the
target and the cause.
"""

from __future__ import annotations

import asyncio
import socket

from fabricops.collectors import snmp_pdu as pdu
from fabricops.collectors.snmp_config import SnmpTarget, transport_settings
from fabricops.collectors.snmp_transport import V2cClient, V3Client
from fabricops.collectors.snmp_usm_client import UsmClient
from fabricops.collectors.snmp_usm_client import supports as usm_supports
from fabricops.collectors.snmp_walk import WalkLimits, walk
from fabricops.core import lldp_mib as lm
from fabricops.core.inventory import Target
from fabricops.core.snmp_mib import Column, Index, Oid, Syntax
from fabricops.discover.model import DeviceReport
from fabricops.discover.snmp_rows import Tables, report_from_snmp

SCALAR_OIDS: tuple[Oid, ...] = (*lm.SCALARS, lm.LOC_CAP_ENABLED)
COLUMN_OIDS: tuple[Oid, ...] = (*lm.LOC_PORT_COLUMNS, *lm.REM_COLUMNS, *lm.IF_COLUMNS)
COLUMNS: tuple[Oid, ...] = (*SCALAR_OIDS, *COLUMN_OIDS)


def _walked(oid: Oid) -> Column:
    """A column of the walker's vocabulary for a bare OID (syntax and index unused)."""
    return Column(".".join(map(str, oid)), oid, Syntax.OCTETS, Index.SCALAR)


class SnmpLldpSource:
    """Reads one device's LLDP over SNMP per ``fetch``; ``open`` before, ``close`` after."""

    def __init__(self, timeout_s: float = 2.0, retries: int = 1, max_repetitions: int = 25,
                 max_rows: int = 100_000, max_varbinds: int = 256) -> None:
        self.timeout_s, self.retries = timeout_s, retries
        self.max_repetitions, self.max_rows = max_repetitions, max_rows
        self.max_varbinds = max_varbinds
        self.malformed = 0
        self._v2c: V2cClient | None = None
        self._usm: UsmClient | None = None
        self._v3: V3Client | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        _, self._v2c = await loop.create_datagram_endpoint(
            lambda: V2cClient(self._count_malformed), family=socket.AF_INET)

    def _count_malformed(self) -> None:
        self.malformed += 1

    async def close(self) -> None:
        if self._v2c is not None and self._v2c.transport is not None:
            self._v2c.transport.close()
        if self._usm is not None and self._usm.transport is not None:
            self._usm.transport.close()
        if self._v3 is not None:
            self._v3.close()

    def target(self, t: Target) -> SnmpTarget:
        """The walker's target for an inventory entry: its settings over ours."""
        host, port = t.host_port()
        settings = {"timeout_s": self.timeout_s, "retries": self.retries,
                    **transport_settings(t.snmp)}
        return SnmpTarget(device=t.device, host=host, port=port, credentials=t.snmp,
                          **settings)

    async def fetch(self, target: Target, label: str, device: str | None) -> DeviceReport:
        """Walk ``target``'s LLDP and interface columns; PollError if it does not answer."""
        t = self.target(target)
        client: V2cClient | UsmClient | V3Client | None = self._v2c
        if t.credentials.version == "v3" and usm_supports(t):
            self._usm = self._usm or await UsmClient.open(on_malformed=self._count_malformed)
            client = self._usm
        elif t.credentials.version == "v3":
            self._v3 = self._v3 or V3Client()
            await self._v3.connect(t)
            client = self._v3
        assert client is not None
        limits = WalkLimits(t.max_repetitions or self.max_repetitions,
                            t.max_varbinds_per_request or self.max_varbinds, self.max_rows,
                            t.getnext)

        async def request(oids: list[Oid], non_repeaters: int, reps: int, getnext: bool
                          ) -> list[pdu.Row]:
            assert client is not None
            return await client.bulk(t, oids, non_repeaters, reps, t.retries + 1,
                                     getnext=getnext)

        tables, _ = await walk(request, [_walked(c) for c in COLUMN_OIDS],
                               [_walked(c) for c in SCALAR_OIDS], limits, t.where)
        found: Tables = {c: {} for c in COLUMNS}
        found.update(tables)
        return report_from_snmp(label, found, device)
