"""The simulated fabric as a running service: the twin plus its protocol agents.

``SimulatedFabric`` steps a scenario's simulator in real time (or faster),
serves every switch over SNMP and gNMI on loopback, and sends INT reports to a
UDP collector. ``inventory()`` describes how to reach it, exactly as an
operator's inventory of a real fabric would, so that the collectors cannot
tell the difference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.inventory import (
    Defaults,
    GnmiCredentials,
    IntListener,
    Inventory,
    SnmpCredentials,
    Target,
)
from fabricops.core.probes import ProbeFlow
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_set import DriverSetHandler
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig
from fabricops.simulator.agents.lldp import Cabling
from fabricops.simulator.agents.snmp_agent import SnmpAgent, SnmpAgentConfig
from fabricops.simulator.agents.tracer import SimulatedTracer
from fabricops.simulator.engine import Simulator
from fabricops.simulator.host_trees import HostTreeWriter

T = TypeVar("T")


class SimulatedFabricConfig(BaseModel):
    """How fast the twin runs and how its agents listen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    speed: float = Field(default=1.0, gt=0, description="Simulated seconds per wall second")
    snmp: SnmpAgentConfig = Field(default_factory=SnmpAgentConfig)
    gnmi: GnmiTargetConfig = Field(default_factory=GnmiTargetConfig)
    int_exporter: IntExporterConfig = Field(default_factory=IntExporterConfig)
    snmp_interval_s: float = Field(default=10.0, gt=0, description="In the inventory it offers")
    snmp_timeout_s: float = Field(
        default=5.0, gt=0, le=60,
        description="Per request try, in the inventory it offers: the twin's agent answers "
                    "from this process, so a busy machine delays it more than a switch")
    gnmi_interval_s: float = Field(default=1.0, gt=0, description="In the inventory it offers")
    host_telemetry: bool = Field(
        default=False, description="Also serve every host's NIC counters over gNMI (target = "
                                   "host), as a host telemetry agent does; the RCA needs them")
    host_trees: Path | None = Field(
        default=None, description="Write every host's NIC tree (sysfs, ethtool, lldpd outputs) "
                                  "below this folder each tick, for `fabricops agent --root`")


class SimulatedFabric:
    """A running twin. Inert until ``start``; ``stop`` ends the agents, then the twin."""

    def __init__(self, sim: Simulator, config: SimulatedFabricConfig | None = None) -> None:
        self.config = config or SimulatedFabricConfig()
        self.sim = sim
        self.board = FrameBoard()
        self.driver = SimulationDriver(sim, self.board, DriverConfig(speed=self.config.speed))
        switches = [sim.fabric.node_ids[n] for n in sim.fabric.switch_nodes.tolist()]
        self.switches = tuple(switches)
        self.hosts = tuple(sim.fabric.node_ids[n] for n in range(len(sim.fabric.node_ids))
                           if sim.fabric.node_is_host[n] and self.config.host_telemetry)
        self.cabling = Cabling(sim.fabric.topology)  # LLDP's truth; miswires go here
        self.snmp = SnmpAgent(self.config.snmp, self.board, switches, cabling=self.cabling)
        self.gnmi = GnmiTarget(self.config.gnmi, self.board, [*switches, *self.hosts],
                               set_handler=DriverSetHandler(self.driver), cabling=self.cabling)
        self.int_exporter = IntExporter(self.config.int_exporter, sim)
        self.host_trees = HostTreeWriter(sim, self.config.host_trees) \
            if self.config.host_trees is not None else None
        self._running = False

    def start(self) -> None:
        self.int_exporter.start()
        self.driver.add_tick_hook(self.int_exporter.on_tick)
        if self.host_trees is not None:
            self.driver.add_tick_hook(self.host_trees.write)
        self.driver.start()
        self._running = True
        self.snmp.start()
        self.gnmi.start()

    def stop(self) -> None:
        self.gnmi.stop()
        self.snmp.stop()
        self.driver.stop()
        self._running = False
        self.int_exporter.stop()

    def call(self, fn: Callable[[Simulator], T], timeout_s: float = 10.0) -> T:
        """Run ``fn(sim)`` between two ticks while running, else at once; return its result."""
        if self._running:
            return self.driver.call(fn, timeout_s)
        return fn(self.sim)

    def tracer(self) -> SimulatedTracer:
        """A PathTracer of this fabric's current forwarding (safe while it runs)."""
        return SimulatedTracer(self.sim, via=self)

    def set_probe_flows(self, probes: Sequence[ProbeFlow]) -> None:
        """Report these probe flows over INT from the next tick on (e.g. a ``ProbePlan``'s).

        ValueError names a port that is not a NIC.
        """
        flows = tuple(probes)
        self.call(lambda _: self.int_exporter.set_probe_flows(flows))

    def inventory(self) -> Inventory:
        """Every switch over SNMP (v2c, community = switch) and gNMI (target = switch), and
        with ``host_telemetry`` every host's NICs over gNMI (target = host)."""
        cfg = self.config
        snmp_at = f"{cfg.snmp.host}:{self.snmp.port}"
        targets = [Target(device=s, protocol="snmp", address=snmp_at,
                          interval_s=cfg.snmp_interval_s,
                          snmp=SnmpCredentials(version="v2c", community=s,
                                               timeout_s=cfg.snmp_timeout_s))
                   for s in self.switches]
        targets += [Target(device=s, protocol="gnmi", address=self.gnmi.address,
                           interval_s=cfg.gnmi_interval_s, gnmi=GnmiCredentials(target=s))
                    for s in (*self.switches, *self.hosts)]
        exporter = cfg.int_exporter
        return Inventory(defaults=Defaults(), targets=targets,
                         int=IntListener(listen=f"{exporter.collector_host}:"
                                                f"{exporter.collector_port}"))
