"""LLDP-MIB over SNMP: GETBULK walks through the SNMP poller's own clients.

A thin shell: the columns of :mod:`fabricops.core.lldp_mib` are walked side by
side (v2c through ``V2cClient``, v3 through ``V3Client``) and handed to
:func:`~fabricops.discover.snmp_rows.report_from_snmp`. ``PollError`` names
the target and the cause.
"""

from __future__ import annotations

import asyncio
import socket

from fabricops.collectors.snmp_config import SnmpTarget
from fabricops.collectors.snmp_transport import PollError, V2cClient, V3Client
from fabricops.core import lldp_mib as lm
from fabricops.core.inventory import Target
from fabricops.core.snmp_mib import Oid
from fabricops.discover.model import DeviceReport
from fabricops.discover.snmp_rows import Tables, report_from_snmp

COLUMNS: tuple[Oid, ...] = (*lm.SCALARS, lm.LOC_CAP_ENABLED, *lm.LOC_PORT_COLUMNS,
                            *lm.REM_COLUMNS, *lm.IF_COLUMNS)


class SnmpLldpSource:
    """Reads one device's LLDP over SNMP per ``fetch``; ``open`` before, ``close`` after."""

    def __init__(self, timeout_s: float = 2.0, retries: int = 1, max_repetitions: int = 25,
                 max_rows: int = 100_000) -> None:
        self.timeout_s, self.retries = timeout_s, retries
        self.max_repetitions, self.max_rows = max_repetitions, max_rows
        self.malformed = 0
        self._v2c: V2cClient | None = None
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
        if self._v3 is not None:
            self._v3.close()

    def _target(self, t: Target) -> SnmpTarget:
        host, port = t.host_port()
        return SnmpTarget(device=t.device, host=host, port=port, credentials=t.snmp,
                          timeout_s=self.timeout_s, retries=self.retries)

    async def fetch(self, target: Target, label: str, device: str | None) -> DeviceReport:
        """Walk ``target``'s LLDP and interface columns; PollError if it does not answer."""
        t = self._target(target)
        if t.credentials.version == "v3":
            self._v3 = self._v3 or V3Client()
            await self._v3.connect(t)
        return report_from_snmp(label, await self._walk(t), device)

    async def _walk(self, t: SnmpTarget) -> Tables:
        client = self._v2c if t.credentials.version == "v2c" else self._v3
        assert client is not None
        tables: Tables = {c: {} for c in COLUMNS}
        cursor = {c: c for c in COLUMNS}
        while cursor:
            cols = list(cursor)
            reps = max(1, min(self.max_repetitions, 512 // len(cols)))
            rows = await client.bulk(t, [cursor[c] for c in cols], 0, reps, t.retries + 1)
            ended = set(cols) if not rows else set()
            for k, (oid, value) in enumerate(rows):
                col = cols[k % len(cols)]
                if col in ended:
                    continue
                if value is None or oid[:len(col)] != col or oid <= cursor[col]:
                    ended.add(col)
                    continue
                tables[col][oid[len(col):]] = value
                cursor[col] = oid
            for col in ended:
                del cursor[col]
            if any(len(tables[c]) > self.max_rows for c in cursor):
                raise PollError(f"{t.where}: an LLDP column has more than {self.max_rows} rows",
                                False)
        return tables
