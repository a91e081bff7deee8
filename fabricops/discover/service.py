"""Discovery: poll every inventoried device's LLDP, then build the topology.

``Discovery(config, inventory)`` is inert; ``run`` polls at most
``max_in_flight`` devices at once, calling ``progress(done, total, device)``
after each, then resolves links and tiers. A device listed under several
protocols is asked over each in turn (``via``: SNMP first, then gNMI) until one
answers; a device that answers over none is a finding (``UNREACHABLE``, naming
every cause), not an error, and the others are used. Sources are picked from
an explicit registry by protocol (tests pass fakes). Metrics: devices polled
by protocol and outcome, findings by kind, links found.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field

from fabricops.collectors import grpc_loop
from fabricops.core.inventory import Inventory, Target
from fabricops.core.topology import Topology
from fabricops.discover.gnmi_source import GnmiLldpSource
from fabricops.discover.inventory import is_placeholder
from fabricops.discover.links import Resolution, resolve
from fabricops.discover.model import DeviceReport, Finding, FindingKind
from fabricops.discover.snmp_source import SnmpLldpSource
from fabricops.discover.tiers import build_topology

Progress = Callable[[int, int, str], None]


class DiscoveryConfig(BaseModel):
    """How discovery polls and what it names the result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    via: Literal["auto", "snmp", "gnmi"] = Field(
        default="auto", description="auto: SNMP where the inventory lists it, then gNMI "
                                    "if SNMP does not answer")
    max_in_flight: int = Field(default=32, ge=1, description="Devices polled at once")
    timeout_s: float = Field(default=2.0, gt=0, le=60, description="Per request try")
    retries: int = Field(default=1, ge=0, le=10, description="SNMP tries after the first")
    max_repetitions: int = Field(default=25, ge=1, le=1000, description="GETBULK rows")
    name: str = Field(default="fabric", min_length=1, description="Topology name")
    default_speed_bps: int = Field(default=400_000_000_000, gt=0,
                                   description="Speed of a port whose speed is not reported")


class LldpSource(Protocol):
    """Reads one device's LLDP neighbours over one protocol."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def fetch(self, target: Target, label: str, device: str | None) -> DeviceReport: ...


@dataclass
class DiscoveryResult:
    """The topology found, every finding, and the name found for each polled target."""

    topology: Topology
    resolution: Resolution
    findings: list[Finding]
    reports: list[DeviceReport]
    names: dict[str, str] = field(default_factory=dict)  # inventory device -> node id
    elapsed_s: float = 0.0


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.polled = Counter("fabricops_discover_devices", "Devices polled for LLDP",
                              ["protocol", "outcome"], registry=registry)
        self.findings = Counter("fabricops_discover_findings",
                                "LLDP rows, neighbours or devices that could not be used",
                                ["reason"], registry=registry)
        self.links = Gauge("fabricops_discover_links", "Links in the last topology found",
                           registry=registry)


class Discovery:
    """Polls the inventory's devices and builds their topology; see the module docstring."""

    def __init__(self, config: DiscoveryConfig, inventory: Inventory,
                 registry: CollectorRegistry | None = None,
                 sources: dict[str, LldpSource] | None = None) -> None:
        self.config = config
        self.inventory = inventory
        self.sources: dict[str, LldpSource] = sources if sources is not None else {
            "snmp": SnmpLldpSource(config.timeout_s, config.retries, config.max_repetitions),
            "gnmi": GnmiLldpSource(config.timeout_s)}
        self.metrics = _Metrics(registry if registry is not None else CollectorRegistry())

    def start(self) -> None:
        """Nothing runs in the background; ``run`` does the work."""

    def stop(self) -> None:
        """Nothing to stop."""

    def candidates(self) -> dict[str, list[Target]]:
        """Each device's targets in the order they are tried (see ``via``)."""
        order = ("snmp", "gnmi") if self.config.via == "auto" else (self.config.via,)
        found: dict[str, list[Target]] = {}
        for protocol in order:
            for t in self.inventory.by_protocol(protocol):
                found.setdefault(t.device, []).append(t)
        return found

    def chosen_targets(self) -> list[Target]:
        """The first target of each device."""
        return [targets[0] for targets in self.candidates().values()]

    def run(self, progress: Progress | None = None) -> DiscoveryResult:
        """Poll, resolve, build; never raises for a device that does not answer."""
        started = time.perf_counter()
        candidates = self.candidates()
        polled = grpc_loop.run(self._poll_all(candidates, progress))
        reports = [report for _, report in polled]
        resolution = resolve(reports)
        topology, more = build_topology(resolution, name=self.config.name,
                                        default_speed_bps=self.config.default_speed_bps)
        findings = [f for r in reports for f in r.findings] + resolution.findings + more
        for f in findings:
            self.metrics.findings.labels(f.kind.name.lower()).inc()
        self.metrics.links.set(len(topology.links))
        names = {t.device: resolution.names[_label(t)] for t, _ in polled
                 if _label(t) in resolution.names}
        return DiscoveryResult(topology, resolution, findings, reports, names,
                               time.perf_counter() - started)

    async def _poll_all(self, candidates: dict[str, list[Target]], progress: Progress | None
                        ) -> list[tuple[Target, DeviceReport]]:
        used = {t.protocol for targets in candidates.values() for t in targets}
        for protocol in used:
            await self.sources[protocol].open()
        gate = asyncio.Semaphore(self.config.max_in_flight)
        done = 0

        async def one(device: str, targets: list[Target]) -> tuple[Target, DeviceReport]:
            nonlocal done
            async with gate:
                polled = await self._poll(targets)
            done += 1
            if progress is not None:
                progress(done, len(candidates), device)
            return polled

        try:
            return list(await asyncio.gather(*(one(d, ts) for d, ts in candidates.items())))
        finally:
            for protocol in used:
                await self.sources[protocol].close()

    async def _poll(self, targets: list[Target]) -> tuple[Target, DeviceReport]:
        """The first answer among ``targets``, else an unanswered report naming each cause."""
        causes = []
        for t in targets:
            device = None if is_placeholder(t.device) else t.device
            try:
                report = await self.sources[t.protocol].fetch(t, _label(t), device)
            except Exception as exc:  # one device's failure is a finding; the others go on
                self.metrics.polled.labels(t.protocol, "failed").inc()
                causes.append(f"{t.protocol}: {type(exc).__name__}: {exc}")
                continue
            self.metrics.polled.labels(t.protocol, "ok").inc()
            return t, report
        first = targets[0]
        report = DeviceReport(label=_label(first), device=None if is_placeholder(first.device)
                              else first.device, answered=False)
        report.findings.append(Finding(FindingKind.UNREACHABLE, _label(first),
                                       "; ".join(causes)))
        return first, report


def _label(t: Target) -> str:
    """How a target is named before discovery names it."""
    return t.device if not is_placeholder(t.device) else t.device[1:]
