"""The simulator: a deterministic, time-stepped fluid model of a RoCE fabric.

``Simulator(topology, config)`` is inert; add jobs and faults, then ``step()``
advances one tick of ``tick_s`` simulated seconds (1 s by default; 0.1 s
resolves sub-second episodes such as a short PFC storm, at ten times the cost
per simulated second). Every rate, counter increment and pause is scaled by
``tick_s``, so a steady fabric shows the same per-second rates at any tick;
fault times land on ticks as ``effects.fault_ticks`` says. ``frames()`` gives
the telemetry of the tick just simulated, stamped at its end; ``control`` is
the fabric's control surface; ``settings`` its running RoCE configuration,
which the physics obeys and configuration faults change; ``ground_truth()`` is
for scoring only. A switch's ECMP hash fields come from its configuration
(``hash_config``, set through ``control``) once it has one, and until then
from the faults in effect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.frame import Frame
from fabricops.core.topology import Topology
from fabricops.simulator.control import HASH_L3, HASH_UNSET, Control
from fabricops.simulator.effects import TICK_TOLERANCE, FaultBook, TickEffects
from fabricops.simulator.fabric import compile_fabric
from fabricops.simulator.faults import FaultError, FaultSpec, FaultType, GroundTruth
from fabricops.simulator.noise import SensorNoise
from fabricops.simulator.observe import TickObservation
from fabricops.simulator.physics import Paths, PhysicsConfig
from fabricops.simulator.routing import Router
from fabricops.simulator.settings import RunningConfig, SettingFaults
from fabricops.simulator.telemetry import OPER_DOWN, OPER_UP, Telemetry
from fabricops.simulator.tick import simulate_tick
from fabricops.simulator.workload import BackgroundSpec, JobSpec, Workload, roce_sports

I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


class SimConfig(BaseModel):
    """Settings of one simulation run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(default=0, ge=0, description="Same seed, same telemetry, byte for byte")
    tick_s: float = Field(default=1.0, gt=0, le=60, description="Simulated seconds per step")
    convergence_delay_s: float = Field(
        default=2.0, ge=0, description="From a link changing state to routing following it"
    )
    ecmp_seeds: Literal["distinct", "identical"] = Field(
        default="distinct", description="'identical' gives every switch the same hash seed"
    )
    lossless_priorities: tuple[int, ...] = Field(default=(3,), min_length=1)
    start_time_ns: int = Field(default=1_767_225_600_000_000_000, ge=0)
    physics: PhysicsConfig = Field(default_factory=PhysicsConfig)


class Simulator:
    """The simulated fabric. Deterministic for a given topology, config, jobs and faults."""

    def __init__(self, topology: Topology, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.fabric = fab = compile_fabric(topology)
        root = np.random.SeedSequence(self.config.seed)
        rng_route, rng_work, self.rng, rng_noise = (np.random.default_rng(s)
                                                    for s in root.spawn(4))
        self.sensor_noise = SensorNoise(rng_noise, fab.n_ports)
        n_sw = len(fab.switch_nodes)
        seeds = rng_route.integers(0, 2**63, size=n_sw, dtype=np.int64).astype(np.uint64)
        if self.config.ecmp_seeds == "identical":
            seeds[:] = seeds[0]
        self.router = Router(fab, seeds)
        self.settings = RunningConfig(fab, self.router.seed, self.config.physics,
                                      self.config.lossless_priorities[0], self.reroute_all)
        self._setting_faults = SettingFaults(self.settings)
        self.workload = Workload(fab, rng_work)
        self.faults = FaultBook(fab, self.config.tick_s)
        self.telemetry = Telemetry(fab, self.config.lossless_priorities)
        self.control = Control(self)
        self.tick = 0
        self.admin_up = np.ones(fab.n_links, bool)
        self.hash_config = np.full(n_sw, HASH_UNSET, np.int8)
        self.oper_up = np.ones(fab.n_links, bool)
        self.pending: list[tuple[float, int, bool]] = []
        self.paths = np.zeros((0, 2), np.int32)
        self.routable = np.zeros(0, bool)
        self.prev_demand_bps = np.zeros(0)
        self._line_rate: tuple[I32, I32, F64] | None = None  # see line_rate_bps
        self.pause_next = np.zeros(fab.n_channels + 1)
        self.reporting = np.ones(fab.n_nodes, bool)
        self.last: TickObservation | None = None
        self._epath_stale = True
        self._epath: Paths = np.zeros((0, 2), np.intp, order="F")
        self._dead_ch = np.zeros(0, np.int32)
        self._optics = _optics_baseline(fab.n_ports, fab.n_links, self.rng)
        self.port_insertion_loss = self._optics[1][fab.port_link]  # of each port's link

    @property
    def time_s(self) -> float:
        """Simulated time at the start of the next tick."""
        return self.tick * self.config.tick_s

    @property
    def ts_ns(self) -> int:
        """Timestamp of the telemetry of the last tick simulated."""
        return self.config.start_time_ns + round(self.tick * self.config.tick_s * 1e9)

    def add_job(self, spec: JobSpec) -> None:
        """Place a training job; ValueError if it does not fit."""
        self.route_flows(self.workload.add_job(spec))

    def add_background(self, spec: BackgroundSpec) -> I32:
        """Add steady flows outside every job (see ``BackgroundSpec``); their indices."""
        fab = self.fabric
        src = self.rng.integers(0, fab.n_nics, spec.flows).astype(np.int32)
        dst = np.empty_like(src)
        for i, s in enumerate(src.tolist()):
            peers = fab.rail_peers(s)
            dst[i] = int(self.rng.choice(peers)) if len(peers) else s
        keep = dst != src
        src, dst = src[keep], dst[keep]
        flows = self.workload.flows.append(src, dst, -1, roce_sports(self.rng, len(src)))
        speed = fab.port_speed_bps[fab.nic_ports]
        self.workload.flows.fixed_demand_bps[flows] = spec.share * speed[src]
        self.route_flows(flows)
        return flows

    def add_fault(self, spec: FaultSpec) -> int:
        """Inject a fault (now or later); return its id. FaultError names what is wrong."""
        senders = None
        if spec.type is FaultType.INCAST:
            senders = self.control.incast_flows(spec, len(self.faults.faults))
        return self.faults.add(spec, senders)

    def placement(self) -> dict[str, list[str]]:
        """Job name -> the ids of its hosts: what a scheduler tells the platform."""
        return {spec.name: [self.fabric.node_ids[h] for h in hosts]
                for spec, hosts in zip(self.workload.specs, self.workload.hosts, strict=True)}

    def ground_truth(self) -> list[GroundTruth]:
        """What was injected, for scoring diagnoses. Not visible to the platform."""
        return self.faults.ground_truth(self.time_s)

    def route_flows(self, flows: I32) -> None:
        """(Re)compute the paths of some flows under the current routing view."""
        n = len(self.workload.flows)
        self._grow(n)
        if len(flows) == 0:
            return
        key_l4, key_l3 = self.workload.flows.keys(flows)
        src, dst = self.workload.flows.src_nic[flows], self.workload.flows.dst_nic[flows]
        paths, ok = self.router.route(src, dst, key_l4, key_l3)
        width = max(self.paths.shape[1], paths.shape[1])
        self.paths = _widen(self.paths, width, self.fabric.dummy_channel)
        self.paths[flows] = _widen(paths, width, self.fabric.dummy_channel)
        self.routable[flows] = ok
        self._epath_stale = True

    def reroute_all(self) -> None:
        self.route_flows(np.flatnonzero(self.workload.flows.active).astype(np.int32))

    def reroute_changed(self, old_dist: npt.NDArray[np.int16], channels: I32) -> I32:
        """Route again the active flows a change can move: the router's distances were
        ``old_dist`` and ``channels`` changed state or weight (see ``Router.stale``).
        Returns the flows routed again."""
        fl = self.workload.flows
        n = len(fl)
        stale = self.router.stale(old_dist, channels, self.paths[:n], fl.dst_nic,
                                  self.routable[:n])
        flows = np.flatnonzero(stale & fl.active).astype(np.int32)
        self.route_flows(flows)
        return flows

    def _grow(self, n: int) -> None:
        extra = n - len(self.prev_demand_bps)
        if extra <= 0:
            return
        self.prev_demand_bps = np.concatenate((self.prev_demand_bps, np.zeros(extra)))
        pad = np.full((extra, self.paths.shape[1]), self.fabric.dummy_channel, np.int32)
        self.paths = np.vstack((self.paths, pad))
        self.routable = np.concatenate((self.routable, np.zeros(extra, bool)))

    def line_rate_bps(self) -> F64:
        """Line rate of every flow: the slower of its two NICs (read-only; worked out again
        only when flows are added, which replaces the flow arrays)."""
        fab, fl = self.fabric, self.workload.flows
        kept = self._line_rate
        if kept is not None and kept[0] is fl.src_nic and kept[1] is fl.dst_nic:
            return kept[2]
        speed = fab.port_speed_bps[fab.nic_ports]
        line = np.minimum(speed[fl.src_nic], speed[fl.dst_nic])
        line.flags.writeable = False
        self._line_rate = (fl.src_nic, fl.dst_nic, line)
        return line

    def step(self) -> TickObservation:
        """Simulate one tick; return what happened in it."""
        t = self.time_s
        self._setting_faults.step(t + TICK_TOLERANCE * self.config.tick_s,
                                  [r.spec for r in self.faults.faults])
        fx = self.faults.effects(self.tick, self.admin_up)
        self._reboot_returning()
        self._update_links(fx, t)
        self._apply_hashing(fx.l3_only)
        self._converge(t)
        self.reporting = ~fx.node_down
        self.telemetry.silent = fx.port_silent
        self.telemetry.mark_reported(self.reporting)
        obs = simulate_tick(self, fx, self.effective_paths())
        self.last = obs
        self.tick += 1
        return obs

    def _apply_hashing(self, fault_l3_only: B) -> None:
        """Hash fields per switch: the configured ones win; an unconfigured switch follows
        the fault effects. Reroutes every flow when any switch changed."""
        l3_only = np.where(self.hash_config == HASH_UNSET, fault_l3_only,
                           self.hash_config == HASH_L3)
        if not np.array_equal(l3_only, self.router.l3_only):
            self.router.l3_only = l3_only
            self.reroute_all()

    def run(self, ticks: int, on_tick: Callable[[TickObservation], None] | None = None) -> None:
        for _ in range(ticks):
            obs = self.step()
            if on_tick is not None:
                on_tick(obs)

    def frames(self) -> list[Frame]:
        """Telemetry of the last tick: one frame per device that is up."""
        return self.telemetry.frames(self.ts_ns, self.reporting)

    def effective_paths(self) -> tuple[Paths, I32]:
        """Paths cut at the first physically down channel (hop-major, ``physics.Paths``),
        and that channel per flow (-1)."""
        if self._epath_stale:
            dummy = self.fabric.dummy_channel
            up = np.append(self.oper_up, True)[self.paths // 2]
            down = ~up
            first = np.where(down.any(axis=1), down.argmax(axis=1), self.paths.shape[1])
            hop = np.arange(self.paths.shape[1])[None, :]
            # hop-major: per-flow reductions over a path's channels run along columns
            self._epath = np.asfortranarray(
                np.where(hop >= first[:, None], dummy, self.paths).astype(np.intp))
            self._epath[~self.routable] = dummy
            rows = np.arange(len(first))
            has = (first < self.paths.shape[1]) & self.routable
            self._dead_ch = np.where(
                has, self.paths[rows, np.minimum(first, self.paths.shape[1] - 1)], -1
            ).astype(np.int32)
            self._epath_stale = False
        return self._epath, self._dead_ch

    def _update_links(self, fx: TickEffects, t: float) -> None:
        oper = self.admin_up & ~fx.link_down
        changed = np.flatnonzero(oper != self.oper_up)
        if changed.size == 0:
            return
        fab = self.fabric
        ends = np.concatenate((fab.ch_tx_port[2 * changed], fab.ch_rx_port[2 * changed]))
        self.telemetry.add_whole("carrier_transitions", np.bincount(ends, minlength=fab.n_ports))
        self.oper_up = oper
        self.telemetry.oper_status[ends] = np.where(
            np.concatenate((oper[changed], oper[changed])), OPER_UP, OPER_DOWN
        )
        due = t + self.config.convergence_delay_s
        self.pending.extend((due, int(li), bool(oper[li])) for li in changed)
        self._epath_stale = True

    def _converge(self, t: float) -> None:
        due = [p for p in self.pending if p[0] <= t + 1e-9]
        if not due:
            return
        self.pending = [p for p in self.pending if p[0] > t + 1e-9]
        old_dist, changed = self.router.dist, []
        for _, li, state in due:
            if self.router.link_up[li] != state:
                changed += [2 * li, 2 * li + 1]
            self.router.link_up[li] = state
        self.router.refresh()
        self.reroute_changed(old_dist, np.array(changed, np.int32))

    def _reboot_returning(self) -> None:
        """A switch back from ``switch_down`` has rebooted: its counters start from zero."""
        for r in self.faults.ended_before(self.tick):
            if r.spec.type is FaultType.SWITCH_DOWN:
                self.telemetry.reset_node(r.node)

    def optics(self) -> tuple[F64, F64, F64]:
        """Per-port transmit-power base, per-link insertion loss, per-port temperature base."""
        return self._optics


def _widen(paths: I32, width: int, dummy: int) -> I32:
    if paths.shape[1] >= width:
        return paths
    pad = np.full((paths.shape[0], width - paths.shape[1]), dummy, np.int32)
    return np.hstack((paths, pad))


def _optics_baseline(n_ports: int, n_links: int, rng: np.random.Generator) -> tuple[
        F64, F64, F64]:
    tx = rng.uniform(-1.5, 0.5, n_ports)
    loss = rng.uniform(0.3, 1.2, n_links)
    temp = rng.uniform(38.0, 48.0, n_ports)
    return tx, loss, temp


__all__ = ["FaultError", "JobSpec", "SimConfig", "Simulator"]
