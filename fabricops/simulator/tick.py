"""One tick of the fabric: rates, congestion, pauses, counters, job progress."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from fabricops.simulator import physics as ph
from fabricops.simulator.effects import TickEffects
from fabricops.simulator.observe import TickObservation

if TYPE_CHECKING:
    from fabricops.simulator.engine import Simulator

I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
LOS_DBM = -40.0


def simulate_tick(sim: Simulator, fx: TickEffects,
                  paths: tuple[ph.Paths, I32]) -> TickObservation:
    """Advance ``sim`` by one tick under the effects ``fx``; update its counters."""
    cfg, fab, wl = sim.config.physics, sim.fabric, sim.workload
    epath, dead_ch = paths
    dt, line = sim.config.tick_s, sim.line_rate_bps()
    cs = sim.settings.channels()
    dropped = cs.buffer_loss(sim.pause_next)
    ch_loss = 1.0 - (1.0 - fx.loss) * (1.0 - cs.mtu_loss) * (1.0 - dropped)
    loss = ph.path_product_complement(epath, ch_loss)
    demand = _demand(sim, fx, line, dt, ph.goodput_share(loss, cfg))
    dead = dead_ch >= 0
    offered = np.where(dead, np.minimum(demand, cfg.retry_rate_bps), demand)
    n_slots = fab.n_channels + 1
    up = np.repeat(sim.oper_up, 2)  # channels 2i and 2i+1 are link i
    nominal = np.append(fab.ch_capacity_bps * up, ph.BIG * 1e9)
    act = _Active(offered)  # flows that offer nothing add nothing to any channel
    ep, off_a = act.paths(epath), act.take(offered)
    off_load = ph.channel_sum(ep, off_a, n_slots)
    slow = (fx.drain_share < 1.0) & (off_load > fx.drain_share * nominal)
    pause = np.maximum.reduce([np.where(cs.pfc_ok, sim.pause_next, 0.0), fx.pause_fixed,
                               np.where(slow, 1.0 - fx.drain_share, 0.0)])
    pause[-1] = 0.0
    cap = nominal * (1.0 - pause)
    fair_a, fair_load = ph.fair_rates(ep, off_a, cap, cfg.fit_iterations, off_load)
    backlogged = off_load > cap * 1.0001
    backlogged[-1] = False
    deaf_a = _deaf(fx, ep, off_a, backlogged & cs.ecn_deaf)
    if fair_load is None:
        fair_load = ph.channel_sum(ep, fair_a, n_slots)
    # with no deaf flow, what is pushed is the fair share (the same sums, bit for bit)
    push_load = ph.channel_sum(ep, np.where(deaf_a, off_a, fair_a), n_slots) \
        if deaf_a.any() else fair_load
    queue = ph.queue_depth(push_load, fair_load, cap, cfg, cs.settle_kmin, cs.settle_kmax)
    queue[-1] = 0.0
    mark_ch = ph.mark_probability(queue, cs.mark_kmin, cs.mark_kmax, cfg, cs.pmax)
    marked_a = ph.path_product_complement(ep, mark_ch)
    keep = ph.dcqcn_share(marked_a, cfg)
    rate_a = fair_a * keep
    # no sender slowed by marking: it carries its fair share
    served = fair_load if bool((keep == 1.0).all()) else ph.channel_sum(ep, rate_a, n_slots)
    rate, marked = act.put(rate_a), act.put(marked_a)
    goodput = np.where(dead, 0.0, rate * ph.goodput_share(loss, cfg))
    sim.pause_next = _pause_next(sim, act, ep, offered, rate, demand, act.put(deaf_a),
                                 backlogged, nominal)
    pkts = rate * dt / 8.0 / cfg.packet_bytes
    cnp = np.where(goodput > 0, np.minimum(pkts * marked, dt / cfg.cnp_interval_s), 0.0)
    _count_ports(sim, fx, served, pause, queue, mark_ch, offered, dead_ch, (cs.mtu_loss, dropped))
    _count_nics(sim, rate, pkts, loss, dead, cnp)
    wl.advance(goodput, dt)
    # flows of no job (-1) fall in bin 0, the others in their job's bin after it
    job_good = ph.sum_at(wl.flows.job + 1, goodput, len(wl.specs) + 1)[1:]
    return TickObservation(
        t_s=sim.time_s, demand_bps=demand, offered_bps=offered, rate_bps=rate,
        goodput_bps=goodput, loss=loss, served_bps=served, capacity_bps=cap, queue_bytes=queue,
        pause_share=pause, job_goodput_bps=job_good, job_steps=wl.steps.copy(),
    )


def _deaf(fx: TickEffects, epath: ph.Paths, offered: F64,
          no_ecn: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Flows whose sender hears no CNPs, so keeps pushing.

    Either the receiver drains nothing at all (a NIC pausing without end or a
    deadlocked cycle: a fault, not back-pressure), or ECN is off where the flow
    is congested (``no_ecn``: backlogged channels whose marking is off or starts
    above Xoff). A flow merely held by pauses from downstream is not deaf: its
    sender is paused in turn, and it speeds up as soon as the cause clears.
    """
    cause = (fx.pause_fixed >= 1.0) | no_ecn
    if not cause.any():
        return np.zeros(len(offered), bool)
    deaf: npt.NDArray[np.bool_] = (offered > 0.0) & ph.over_path(np.logical_or, cause, epath)
    return deaf


class _Active:
    """The flows that offer traffic this tick, when they are few enough that working
    on them alone pays (an idle flow adds nothing to any channel, its rate is 0)."""

    SHARE = 0.75  # of all flows; above it, all flows are worked on

    def __init__(self, offered: F64) -> None:
        self.n = len(offered)
        idx = np.flatnonzero(offered > 0.0)
        self.idx = None if len(idx) > self.SHARE * self.n else idx

    def paths(self, epath: ph.Paths) -> ph.Paths:
        return epath if self.idx is None else np.asfortranarray(epath[self.idx])

    def take(self, per_flow: F64) -> F64:
        return per_flow if self.idx is None else per_flow[self.idx]

    def put(self, per_active: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A per-flow array of ``per_active``, zero (False) for idle flows."""
        if self.idx is None:
            return per_active
        out = np.zeros(self.n, per_active.dtype)
        out[self.idx] = per_active
        return out


def _pause_next(sim: Simulator, act: _Active, epath: ph.Paths, offered: F64, rate: F64,
                demand: F64, deaf: npt.NDArray[np.bool_], backlogged: npt.NDArray[np.bool_],
                nominal: F64) -> F64:
    """Pause shares for the next tick, from the excess of flows that do not back off
    (``epath``: the paths of ``act``'s flows)."""
    fab, cfg = sim.fabric, sim.config.physics
    onset = (demand > 0.0) & (sim.prev_demand_bps <= 0.0)
    surplus = np.maximum(offered - rate, 0.0)
    overrun = min(1.0, cfg.onset_s / sim.config.tick_s)  # share of the tick before DCQCN acts
    excess = np.where(deaf, surplus, np.where(onset, surplus * overrun, 0.0))
    sim.prev_demand_bps = demand
    return ph.pause_pressure(epath, act.take(excess), backlogged, len(nominal),
                             fab.slot_into_switch, nominal)


def _demand(sim: Simulator, fx: TickEffects, line: F64, dt: float, efficiency: F64) -> F64:
    wl = sim.workload
    share = wl.begin_tick(sim.time_s, dt)
    demand = wl.demand_bps(share, line, dt, efficiency)
    for flows, rate_share in zip(fx.incast_flows, fx.incast_rate, strict=True):
        demand[flows] = line[flows] * rate_share
    return np.where(sim.routable, wl.paced(demand), 0.0)


def _count_ports(sim: Simulator, fx: TickEffects, served: F64, pause: F64, queue: F64,
                 mark_ch: F64, offered: F64, dead_ch: I32,
                 setting_loss: tuple[F64, F64]) -> None:
    cfg, fab, tel, rng = sim.config.physics, sim.fabric, sim.telemetry, sim.rng
    dt = sim.config.tick_s
    tx_ch = fab.port_tx_slot
    served_tx = served[tx_ch]
    sent = tel.add("out_pkts", served_tx * dt / 8.0 / cfg.packet_bytes)
    pkts_ch = np.zeros(fab.n_channels + 1, np.int64)
    pkts_ch[tx_ch] = sent
    pkts_ch[-1] = 0
    errors = _binomial(rng, pkts_ch, fx.loss)
    rx = fab.ch_rx_ports
    tel.add_whole("out_octets", sent * cfg.packet_bytes)
    tel.add_whole("in_octets", pkts_ch[:-1] * cfg.packet_bytes, at=rx)
    oversize = _binomial(rng, pkts_ch, setting_loss[0])
    overflow = _binomial(rng, pkts_ch, setting_loss[1])
    bad = errors[:-1] + oversize[:-1]
    tel.add_whole("in_pkts", pkts_ch[:-1] - (bad + overflow[:-1]), at=rx)
    tel.add_whole("in_errors", bad, at=rx)
    tel.add_whole("in_fcs_errors", errors[:-1], at=rx)
    tel.add_whole("in_discards", overflow[:-1], at=rx)
    tel.add_whole("ecn_marked_pkts", _binomial(rng, pkts_ch, mark_ch)[tx_ch])
    dead = dead_ch >= 0
    if dead.any():  # drops are the traffic of flows into a dead channel
        drops = ph.sum_at(dead_ch[dead], offered[dead], fab.n_channels + 1)
        tel.add("out_discards", drops[tx_ch] * dt / 8.0 / cfg.packet_bytes)
    if pause.any():  # pause frames are sent only where a channel is paused
        frames = pause * dt / (cfg.pause_quanta_s / 2.0)
        for prio in sim.config.lossless_priorities:
            tel.add(f"pfc_rx_pause{{prio={prio}}}", frames[tx_ch])
            tel.add(f"pfc_tx_pause{{prio={prio}}}", frames[:-1], at=rx)
    _gauges(sim, fx, served_tx, queue, tx_ch)


def _gauges(sim: Simulator, fx: TickEffects, served_tx: F64, queue: F64,
            tx_ch: npt.NDArray[np.intp]) -> None:
    fab, tel = sim.fabric, sim.telemetry
    tx_base, _, temp_base = sim.optics()
    n, pkt = fab.n_ports, sim.config.physics.packet_bytes
    noise = sim.sensor_noise
    g = tel.port_gauges  # each row written in place: no temporary of a row's size
    q = np.take(queue, tx_ch, out=g[0], mode="clip")  # "raise" would copy: indices are valid
    np.multiply(q, 1.25, out=g[1])
    np.add(g[1], float(pkt), out=g[1], where=q > 0)
    np.minimum(g[1], sim.config.physics.xoff_bytes * 1.5, out=g[1])
    tx_power = np.multiply(noise.draw(n), 0.02, out=g[3])
    tx_power += tx_base
    rx_power = np.take(tx_power, fab.port_peer, out=g[2], mode="clip")
    rx_power -= sim.port_insertion_loss
    if fx.rx_offset_db.any():  # a degrading optic (adding zeros changes no reading)
        rx_power += fx.rx_offset_db
    if not sim.oper_up.all():
        np.copyto(rx_power, LOS_DBM, where=~sim.oper_up[fab.port_link])
    heat = served_tx / fab.port_speed_floor
    np.clip(heat, 0.0, 1.0, out=heat)
    heat *= 8.0
    np.add(temp_base, heat, out=g[4])
    g[4] += 0.1 * noise.draw(n)


def _count_nics(sim: Simulator, rate: F64, pkts: F64, loss: F64, dead: npt.NDArray[np.bool_],
                cnp: F64) -> None:
    cfg, tel, fl = sim.config.physics, sim.telemetry, sim.workload.flows
    n = sim.fabric.n_nics
    lost = pkts * loss
    resent = np.where(dead, pkts, np.minimum(pkts, lost * cfg.gbn_resend_pkts))
    for name, nic, amount in (("rdma_retransmits", fl.src_nic, resent),
                              ("out_of_sequence", fl.dst_nic, lost),
                              ("cnp_sent", fl.dst_nic, cnp), ("cnp_handled", fl.src_nic, cnp)):
        if (amount > 0.0).any():  # else the sum adds nothing (see _accumulate)
            tel.add_nic(name, ph.sum_at(nic, amount, n))
    tel.nic_gauges[0] = ph.sum_at(fl.src_nic, rate, n)


def _binomial(rng: np.random.Generator, n: npt.NDArray[np.int64], p: F64) -> npt.NDArray[
        np.int64]:
    out = np.zeros(len(n), np.int64)
    hit = np.flatnonzero((p > 0) & (n > 0))
    if hit.size:
        out[hit] = rng.binomial(n[hit], np.clip(p[hit], 0.0, 1.0))
    return out
