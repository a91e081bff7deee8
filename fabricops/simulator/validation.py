"""Validation traffic on the twin: all-to-all or ring all-reduce between chosen hosts.

``run_traffic(sim, spec)`` adds the pattern's flows to ``sim`` (fixed demand, no job),
runs ``bursts`` bursts of ``burst_ticks`` ticks at line rate with one idle tick
between them (every burst starts as a collective does, all senders at once), and
returns what a person running perftest or NCCL tests on real hosts would read off
the fabric, as a plain dict:

- ``busbw_share``: mean over sending NICs of the goodput each achieved, as a share
  of its line rate, over the burst ticks (for a ring all-reduce that is the bus
  bandwidth NCCL reports, over the NIC speed); ``worst_nic`` / ``worst_nic_share``;
- ``drops``: packets the switches and NICs dropped (``in_errors``, ``in_discards``,
  ``out_discards``), ``retransmits`` (RDMA, from the NICs);
- ``pause_share_max`` and ``worst_pause_port``: the largest share of time a switch
  port was paused; ``ecn_marked_share``: marked over transmitted packets at switch
  ports.

The flows are removed (deactivated) afterwards, so the twin's jobs carry on.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fabricops.simulator.engine import Simulator
from fabricops.simulator.workload import roce_sports

_DROPS = ("in_errors", "in_discards", "out_discards")


class TrafficSpec(BaseModel):
    """The validation pattern, its hosts and how long it runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: Literal["all_to_all", "ring"] = "all_to_all"
    hosts: tuple[str, ...] = Field(default=(), description="Empty: every host of the fabric")
    bursts: int = Field(default=3, ge=1, le=100)
    burst_ticks: int = Field(default=3, ge=2, le=100)
    qps_per_pair: int = Field(default=8, ge=1, le=64)
    seed: int = Field(default=0, ge=0, description="Seed of the flows' UDP source ports")


def run_traffic(sim: Simulator, spec: TrafficSpec) -> dict[str, Any]:
    """Run ``spec`` on ``sim`` now; return the measurements (see the module docstring).

    ValueError names a host that does not exist or a pattern with fewer than two hosts.
    """
    fab = sim.fabric
    hosts = list(spec.hosts) or [n.id for n in fab.topology.hosts()]
    unknown = [h for h in hosts if h not in fab.topology.node_by_id
               or not fab.topology.node_by_id[h].is_host]
    if unknown:
        raise ValueError(f"validation hosts {', '.join(unknown)} are not hosts of this fabric")
    if len(hosts) < 2:
        raise ValueError("validation traffic needs at least two hosts")
    src, dst, share = _pairs(sim, hosts, spec)
    line = fab.port_speed_bps[fab.nic_ports]
    demand = line[src] * share
    flows = sim.workload.flows
    rng = np.random.default_rng(spec.seed)
    idx = flows.append(src, dst, -1, roce_sports(rng, len(src)))
    sim.route_flows(idx)
    tel = sim.telemetry
    before = _counters(sim)
    sent = np.zeros(fab.n_nics)
    pause_sum = np.zeros(fab.n_channels + 1)
    on_ticks = 0
    for _ in range(spec.bursts):
        for k in range(spec.burst_ticks + 1):
            on = k < spec.burst_ticks
            flows.fixed_demand_bps[idx] = demand if on else 0.0
            obs = sim.step()
            if on and k > 0:
                sent += np.bincount(src, obs.goodput_bps[idx], minlength=fab.n_nics)
                pause_sum += obs.pause_share
                on_ticks += 1
    flows.active[idx] = False
    flows.fixed_demand_bps[idx] = 0.0
    after = _counters(sim)
    nics = np.unique(src)
    nic_share = sent[nics] / max(on_ticks, 1) / line[nics]
    switch_tx = ~fab.node_is_host[fab.ch_tx_node()]
    pause = np.where(np.append(switch_tx, False), pause_sum / max(on_ticks, 1), 0.0)
    worst = int(np.argmax(pause[:-1])) if fab.n_channels else 0
    sw_ports = ~fab.node_is_host[fab.port_node]
    out_pkts = float((after["out_pkts"] - before["out_pkts"])[sw_ports].sum())
    marked = float((after["ecn_marked_pkts"] - before["ecn_marked_pkts"])[sw_ports].sum())
    drops = sum(int((after[n] - before[n]).sum()) for n in _DROPS)
    w = int(np.argmin(nic_share))
    return {
        "pattern": spec.pattern, "hosts": hosts, "nics": len(nics),
        "seconds": on_ticks * sim.config.tick_s,
        "busbw_share": float(nic_share.mean()), "worst_nic_share": float(nic_share[w]),
        "worst_nic": fab.port_ids[fab.nic_ports[nics[w]]],
        "drops": drops, "retransmits": int(after["rdma_retransmits"].sum()
                                           - before["rdma_retransmits"].sum()),
        "pause_share_max": float(pause[worst]),
        "worst_pause_port": fab.port_ids[fab.ch_tx_port[worst]],
        "ecn_marked_share": marked / out_pkts if out_pkts else 0.0,
        "pfc_priority": tel.priorities[0],
    }


def _pairs(sim: Simulator, hosts: list[str], spec: TrafficSpec) -> tuple[
        np.ndarray, np.ndarray, float]:
    """Source NICs, destination NICs and each flow's share of its sender's line rate."""
    fab = sim.fabric
    nics = [[int(fab.port_nic[p]) for p in fab.node_ports(fab.node_index(h))] for h in hosts]
    rails = min(len(n) for n in nics)
    src: list[int] = []
    dst: list[int] = []
    n = len(hosts)
    peers = [[(i + 1) % n] for i in range(n)] if spec.pattern == "ring" else \
        [[j for j in range(n) if j != i] for i in range(n)]
    for i, targets in enumerate(peers):
        for j in targets:
            for r in range(rails):
                src += [nics[i][r]] * spec.qps_per_pair
                dst += [nics[j][r]] * spec.qps_per_pair
    share = 1.0 / (len(peers[0]) * spec.qps_per_pair)
    return np.array(src, np.int32), np.array(dst, np.int32), share


def _counters(sim: Simulator) -> dict[str, np.ndarray]:
    tel = sim.telemetry
    out = {n: tel.counter(n).astype(np.int64) for n in (*_DROPS, "out_pkts", "ecn_marked_pkts")}
    out["rdma_retransmits"] = tel.nic_counters[2].astype(np.int64)
    return out


__all__ = ["TrafficSpec", "run_traffic"]
