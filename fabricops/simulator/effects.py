"""Faults resolved onto the fabric's arrays, and their effect in a given tick.

``FaultBook`` keeps the injected faults, their ground truth, and for each the
indices it acts on; ``effects(tick)`` folds the faults active in that tick into
one ``TickEffects`` for the engine.

Fault times are in seconds and land on ticks by ``fault_ticks``: a fault acts
on every tick that starts in ``[start_s, start_s + duration_s)``, within a
millionth of a tick (so ``k * tick_s`` rounding never moves a fault by a
tick). A fault shorter than a tick acts on the tick that holds it (its
middle, if no tick starts inside it); a pause it causes lasts only its share
of that tick, so a 0.3 s PFC storm at 1 s ticks sends 0.3 s of pause frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fabricops.simulator.fabric import Fabric
from fabricops.simulator.faults import (
    FaultError,
    FaultSpec,
    FaultType,
    GroundTruth,
    check_target,
)

F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
B = npt.NDArray[np.bool_]
OPTIC_FLOOR_DBM = -9.0  # receive power below which the bit error rate climbs
NOMINAL_RX_DBM = -2.0
TICK_TOLERANCE = 1e-6  # of a tick: how far k * tick_s may miss a fault's start or end


def fault_ticks(spec: FaultSpec, tick_s: float) -> tuple[int, float, float]:
    """The ticks ``[first, stop)`` a fault acts on (``stop`` inf: to the end of the run),
    and the share of each of those ticks it lasts (1 unless it is shorter than a tick)."""
    first = math.ceil(spec.start_s / tick_s - TICK_TOLERANCE)
    if spec.duration_s is None:
        return first, math.inf, 1.0
    stop = math.ceil((spec.start_s + spec.duration_s) / tick_s - TICK_TOLERANCE)
    if stop <= first:
        first = math.floor((spec.start_s + spec.duration_s / 2) / tick_s)
        stop = first + 1
    return first, stop, min(1.0, spec.duration_s / tick_s)


@dataclass
class TickEffects:
    """What the active faults do during one tick."""

    link_down: B
    flap_link: B
    loss: F64  # per channel (+ dummy)
    pause_fixed: F64  # per channel: share of time paused by a broken receiver
    drain_share: F64  # per channel into a NIC: share of line rate the NIC drains
    ecn_mode: npt.NDArray[np.int8]  # per channel: unused (ECN faults change settings.py)
    l3_only: B  # per switch
    rx_offset_db: F64  # per port
    node_down: B
    port_silent: B  # per port: a dead NIC, gone from its host's telemetry
    incast_flows: list[I32] = field(default_factory=list)
    incast_rate: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Resolved:
    """A fault and the indices it acts on."""

    spec: FaultSpec
    channels: I32
    node: int = -1
    flows: I32 = field(default_factory=lambda: np.zeros(0, np.int32))


class FaultBook:
    """The faults of a run, resolved against one fabric stepped ``tick_s`` seconds a tick."""

    def __init__(self, fabric: Fabric, tick_s: float = 1.0) -> None:
        self.fabric = fabric
        self.tick_s = tick_s
        self.faults: list[Resolved] = []

    def add(self, spec: FaultSpec, incast_senders: I32 | None = None) -> int:
        """Validate and resolve a fault; return its id. FaultError names what is wrong."""
        index = len(self.faults)
        check_target(spec, self.fabric.topology, index)
        channels, node = self._resolve(spec, index)
        flows = incast_senders if incast_senders is not None else np.zeros(0, np.int32)
        self.faults.append(Resolved(spec, channels, node, flows))
        return index

    def ground_truth(self, horizon_s: float) -> list[GroundTruth]:
        """Faults that had started by ``horizon_s``, their end clipped to it."""
        return [
            GroundTruth(
                fault_id=i, type=r.spec.type, entity=r.spec.entity, start_s=r.spec.start_s,
                end_s=None if r.spec.duration_s is None else r.spec.end_s(horizon_s),
                params=r.spec.typed_params().model_dump(),
            )
            for i, r in enumerate(self.faults)
            if r.spec.start_s < horizon_s
        ]

    def _resolve(self, spec: FaultSpec, index: int) -> tuple[I32, int]:
        fab = self.fabric
        t = spec.type
        if t in (FaultType.SWITCH_DOWN, FaultType.HASH_POLARIZATION, FaultType.ECN_MISCONFIG):
            node = fab.node_index(spec.entity)
            return node_channels(fab, node, egress_only=t is FaultType.ECN_MISCONFIG), node
        if t is FaultType.PFC_DEADLOCK:
            return deadlock_cycle(fab, fab.link_index(spec.entity), spec, index), -1
        if spec.entity in fab.topology.link_by_id:
            li = fab.link_index(spec.entity)
            return _directed(li, getattr(spec.typed_params(), "direction", "both")), -1
        if spec.entity in fab.topology.node_by_id:  # a host: all its NICs
            node = fab.node_index(spec.entity)
            ports = np.arange(*_bounds(fab.node_ports(node)))
            return fab.port_rx_ch[ports].astype(np.int32), node
        port = fab.port_index(spec.entity)
        return np.array([fab.port_rx_ch[port]], np.int32), int(fab.port_node[port])

    def active(self, tick: int) -> list[tuple[Resolved, float]]:
        """The faults acting on ``tick``, each with the share of the tick it lasts."""
        out = []
        for r in self.faults:
            first, stop, share = fault_ticks(r.spec, self.tick_s)
            if first <= tick < stop:
                out.append((r, share))
        return out

    def ended_before(self, tick: int) -> list[Resolved]:
        """The faults whose last tick was ``tick - 1``."""
        return [r for r in self.faults if fault_ticks(r.spec, self.tick_s)[1] == tick]

    def effects(self, tick: int, admin_up: B | None = None) -> TickEffects:
        """Fold every fault acting on ``tick`` into arrays.

        ``admin_up`` (per link) is the operator's port state: a PFC deadlock
        whose cycle has a link shut is broken, and its buffers drain.
        """
        fab = self.fabric
        n_ch = fab.n_channels + 1
        fx = TickEffects(
            link_down=np.zeros(fab.n_links, bool), flap_link=np.zeros(fab.n_links, bool),
            loss=np.zeros(n_ch), pause_fixed=np.zeros(n_ch), drain_share=np.ones(n_ch),
            ecn_mode=np.zeros(n_ch, np.int8), l3_only=np.zeros(len(fab.switch_nodes), bool),
            rx_offset_db=np.zeros(fab.n_ports), node_down=np.zeros(fab.n_nodes, bool),
            port_silent=np.zeros(fab.n_ports, bool),
        )
        t_s = tick * self.tick_s
        for r, share in self.active(tick):
            if (r.spec.type is FaultType.PFC_DEADLOCK and admin_up is not None
                    and not admin_up[r.channels // 2].all()):
                continue
            elapsed_s = max(0.0, t_s - r.spec.start_s) + TICK_TOLERANCE * self.tick_s
            _apply(fx, r, elapsed_s, share, fab)
        return fx


def _apply(fx: TickEffects, r: Resolved, elapsed_s: float, share: float, fab: Fabric) -> None:
    """Add one fault's effect, ``elapsed_s`` after its start, lasting ``share`` of the tick."""
    t, ch, p = r.spec.type, r.channels, r.spec.typed_params()
    links = np.unique(ch // 2)
    if t in (FaultType.LINK_DOWN, FaultType.NIC_DOWN):
        fx.link_down[links] = True
        if t is FaultType.NIC_DOWN:
            fx.port_silent[fab.ch_rx_port[ch]] = True
    elif t is FaultType.LINK_FLAP:
        fx.flap_link[links] = True
        fx.link_down[links] |= (elapsed_s % p.period_s) < p.down_s
    elif t is FaultType.GRAY_LOSS:
        fx.loss[ch] = 1.0 - (1.0 - fx.loss[ch]) * (1.0 - p.loss_rate)
    elif t is FaultType.OPTIC_DEGRADATION:
        drop = p.decay_db_per_s * elapsed_s
        fx.rx_offset_db[fab.ch_rx_port[ch]] -= drop
        fx.loss[ch] = np.maximum(fx.loss[ch], optic_loss(NOMINAL_RX_DBM - drop))
    elif t is FaultType.PFC_STORM:
        fx.pause_fixed[ch] = np.maximum(fx.pause_fixed[ch], share)
    elif t is FaultType.PFC_DEADLOCK:
        fx.pause_fixed[ch] = 1.0
    elif t is FaultType.SLOW_RECEIVER:
        fx.drain_share[ch] = np.minimum(fx.drain_share[ch], p.drain_share)
    elif t is FaultType.SWITCH_DOWN:
        fx.link_down[links] = True
        fx.node_down[r.node] = True
    elif t is FaultType.HASH_POLARIZATION:
        fx.l3_only[fab.node_switch[r.node]] = True
    elif t is FaultType.INCAST:
        fx.incast_flows.append(r.flows)
        fx.incast_rate.append(p.rate_share)


def optic_loss(rx_dbm: float) -> float:
    """Frame loss rate of an optic receiving ``rx_dbm``: negligible above the floor."""
    return float(10.0 ** np.clip(-12.0 + 2.0 * (OPTIC_FLOOR_DBM - rx_dbm), -12.0, -1.0))


def _directed(link: int, direction: str) -> I32:
    if direction == "a_to_b":
        return np.array([2 * link], np.int32)
    if direction == "b_to_a":
        return np.array([2 * link + 1], np.int32)
    return np.array([2 * link, 2 * link + 1], np.int32)


def _bounds(r: range) -> tuple[int, int]:
    return r.start, r.stop


def node_channels(fab: Fabric, node: int, *, egress_only: bool) -> I32:
    """Channels a node transmits on (and, unless ``egress_only``, receives on)."""
    ports = np.arange(*_bounds(fab.node_ports(node)))
    tx = fab.port_tx_ch[ports]
    chans = tx if egress_only else np.concatenate((tx, fab.port_rx_ch[ports]))
    return chans[chans >= 0].astype(np.int32)


def deadlock_cycle(fab: Fabric, link: int, spec: FaultSpec, index: int) -> I32:
    """Four channels A->B->C->D->A through ``link`` (A-B) between switches: a buffer cycle."""
    tx_node, rx_node = fab.ch_tx_node(), fab.ch_rx_node()
    a, b = int(tx_node[2 * link]), int(rx_node[2 * link])
    if fab.node_is_host[a] or fab.node_is_host[b]:
        raise FaultError(f"fault #{index} (pfc_deadlock on {spec.entity!r}): "
                         "a deadlock cycle needs a link between two switches")
    out: dict[int, dict[int, int]] = {}
    for ch in range(fab.n_channels):
        out.setdefault(int(tx_node[ch]), {}).setdefault(int(rx_node[ch]), ch)
    for c, bc in out.get(b, {}).items():
        if c == a or fab.node_is_host[c]:
            continue
        for d, cd in out.get(c, {}).items():
            if d not in (a, b) and not fab.node_is_host[d] and a in out.get(d, {}):
                return np.array([2 * link, bc, cd, out[d][a]], np.int32)
    raise FaultError(f"fault #{index} (pfc_deadlock on {spec.entity!r}): "
                     "no four-switch cycle passes through this link")
