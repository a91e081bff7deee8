"""A fake LLDP source for tests: canned reports by device, or an error for a device."""

from __future__ import annotations

from dataclasses import replace

from fabricops.core.inventory import Target
from fabricops.discover.model import DeviceReport


class FakeLldpSource:
    """Answers ``fetch`` from ``reports`` (by inventory device); raises ``errors[device]``."""

    def __init__(self, reports: dict[str, DeviceReport],
                 errors: dict[str, Exception] | None = None) -> None:
        self.reports = reports
        self.errors = errors or {}
        self.opened = self.closed = 0
        self.fetched: list[str] = []

    async def open(self) -> None:
        self.opened += 1

    async def close(self) -> None:
        self.closed += 1

    async def fetch(self, target: Target, label: str, device: str | None) -> DeviceReport:
        self.fetched.append(target.device)
        if target.device in self.errors:
            raise self.errors[target.device]
        return replace(self.reports[target.device], label=label, device=device)
