"""Detection: threshold rules over one step's signals, each naming an entity and a fault type.

A ``Symptom`` is a rule that fired on an entity, with the signal and its
value. ``detect`` returns every symptom of a step; the RCA only looks for a
root cause while some symptom is active (so a quiet fabric yields no
diagnosis), and ``rules_diagnosis`` is the rules-alone baseline: the symptom
of the highest severity names the root and the fault type directly.

When many switches stop reporting at once (more than ``outage_share`` of them
and more than ``outage_min``: a collector, its host or the management network
went down, not that many switches), ``set_aside_outage`` takes their silence
out of a step's symptoms: it is not analysed as that many switch faults, and
scoring every candidate near them (all of them, at 100k GPUs some 20 s a
step) is not done for it. Their silence still lowers every diagnosis's
confidence, as any missing device does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fabricops.rca.features import Candidates, PathStats
from fabricops.rca.signals import PortSignals
from fabricops.rca.view import PortIndex

STOPPED: Final = "stopped_reporting"  # the rule of a switch that stopped reporting
OPER_DOWN: Final = "oper_down"  # the rule of a port that sees its link down
FLAPPING: Final = "carrier_transitions"  # the rule of a port whose link changes state
OWN_ENDS: Final = frozenset({STOPPED, OPER_DOWN, FLAPPING})
"""Rules whose symptom can only be its own candidate's fault or, for a link, a fault of
what is at its ends (a switch, a NIC): the RCA scores those, not the other links of
those nodes (a leaf going down would bring every link of every spine it was on)."""


class RuleConfig(BaseModel):
    """Thresholds of the detection rules; defaults fit a 400G RoCE fabric at 1 s sampling."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fcs_ratio: float = Field(default=1e-7, gt=0, description="FCS errors per frame received")
    fcs_min_per_s: float = Field(default=5.0, ge=0)
    flaps: float = Field(default=0.5, gt=0, description="Recent carrier transitions")
    rx_drop_db: float = Field(default=0.12, gt=0, description="Receive power below baseline")
    rx_slope_db_s: float = Field(default=-0.04, lt=0)
    pause_share: float = Field(default=0.1, gt=0, le=1, description="Share of time a port pauses")
    pause_excess: float = Field(default=0.1, gt=0, le=1)
    ecn_low_queue: float = Field(default=1e-3, gt=0, le=1,
                                 description="ECN ratio on a queue below Kmin")
    ecn_kmin_bytes: float = Field(default=1e5, gt=0)
    fan_in: int = Field(default=3, ge=2, description="Senders into one NIC at line rate "
                        "beyond those it usually has")
    incast_util: float = Field(default=0.95, gt=0, le=1,
                               description="Receive utilization of a NIC that, with a queue "
                                           "past ecn_kmin_bytes on its switch port, is an "
                                           "incast without waiting for it to last")
    polar_log_p: float = Field(default=6.0, gt=0,
                               description="-log10 chance that QPs agree on uplinks by luck")
    rehashed_flows: int = Field(default=2, ge=1,
                                description="Flows moved between stable uplinks, after which "
                                "no QP pair disagrees")
    retrans_ratio: float = Field(default=1e-4, gt=0, description="Retransmits per packet sent")
    outage_share: float = Field(
        default=0.2, gt=0, le=1,
        description="Switches that stop reporting at once, as a share of all: more than "
        "this (and than outage_min) is a collection outage, not as many switch faults")
    outage_min: int = Field(default=8, ge=1, description="See outage_share")


@dataclass(frozen=True)
class Symptom:
    """One rule that fired on one entity (candidate index into Candidates)."""

    candidate: int
    rule: str
    fault_type: str
    value: float
    severity: float


def detect(ix: PortIndex, cand: Candidates, sig: PortSignals, paths: PathStats,
           cfg: RuleConfig | None = None) -> list[Symptom]:
    """Every symptom of this step."""
    c = cfg or RuleConfig()
    out: list[Symptom] = []
    sw_of_node, nic_of_port = cand.switch_of_node(ix), cand.nic_of_port(ix)
    link = ix.port_link

    def add(ports: np.ndarray, target: np.ndarray, rule: str, ftype: str, value: np.ndarray,
            sev: float) -> None:
        for p in np.flatnonzero(ports).tolist():
            if target[p] >= 0:
                out.append(Symptom(int(target[p]), rule, ftype, float(value[p]), sev))

    for node in np.unique(ix.port_node[sig.node_missing & ~ix.port_is_nic]).tolist():
        if sw_of_node[node] >= 0:  # once per switch, not once per port
            out.append(Symptom(int(sw_of_node[node]), STOPPED, "switch_down", 1.0, 9.0))
    add(sig.missing & ix.port_is_nic, nic_of_port, "nic_missing", "nic_down",
        sig.missing.astype(float), 8.5)
    add(sig.oper_down, link, OPER_DOWN, "link_down", sig.oper_down.astype(float), 8.0)
    add(sig.flaps >= c.flaps, link, FLAPPING, "link_flap", sig.flaps, 7.0)
    add((sig.fcs_ratio > c.fcs_ratio) & (sig.fcs_rate >= c.fcs_min_per_s), link,
        "fcs_error_ratio", "gray_loss", sig.fcs_ratio, 6.0)
    add((sig.rx_drop_db > c.rx_drop_db) & (sig.rx_slope < c.rx_slope_db_s), link,
        "rx_power_trend", "optic_degradation", sig.rx_drop_db, 6.5)
    nic_pause = ix.port_is_nic & (sig.pause_tx > c.pause_share)
    add(nic_pause, nic_of_port, "nic_pausing", "pfc_storm", sig.pause_tx, 5.0)
    sw_pause = ~ix.port_is_nic & (sig.pause_excess > c.pause_excess) & (sig.util_tx < 0.01)
    add(sw_pause, link, "paused_without_throughput", "pfc_deadlock", sig.pause_rx, 4.5)
    add(~ix.port_is_nic & (sig.ecn_ratio > c.ecn_low_queue) & (sig.queue < c.ecn_kmin_bytes),
        sw_of_node[ix.port_node], "ecn_below_kmin", "ecn_misconfig", sig.ecn_ratio, 3.0)
    fan_in, excess = np.zeros(ix.n_ports), np.zeros(ix.n_ports)
    fan_in[ix.nic_ports] = paths.fan_in
    excess[ix.nic_ports] = paths.fan_in_excess()
    # a NIC at line rate behind a standing queue on its switch port is an incast at once;
    # without the queue, only once the rate has lasted
    facing = np.zeros(ix.n_ports)
    peers = ix.peer[ix.nic_ports]
    facing[ix.nic_ports] = np.where(peers >= 0, sig.queue[np.maximum(peers, 0)], 0.0)
    flooded = (sig.rx_sustained > 0.9) | ((sig.util_rx > c.incast_util)
                                         & (facing > c.ecn_kmin_bytes))
    add(ix.port_is_nic & (excess >= c.fan_in) & flooded, nic_of_port,
        "fan_in", "incast", fan_in, 4.0)
    add(ix.port_is_nic & (sig.retrans_ratio > c.retrans_ratio), nic_of_port,
        "retransmissions", "gray_loss", sig.retrans_ratio, 2.0)
    polar = paths.polar_log_p()
    for node in np.flatnonzero(polar >= c.polar_log_p).tolist():
        if sw_of_node[node] >= 0:
            out.append(Symptom(int(sw_of_node[node]), "same_uplink_for_every_qp",
                               "hash_polarization", float(polar[node]), 3.5))
    # flows moved with no link event at the switch, and no QP pair there disagrees
    rehashed = (paths.moved >= c.rehashed_flows) & ((paths.agree >= 1.0) | (paths.agree_n == 0))
    for node in np.flatnonzero(rehashed & (polar < c.polar_log_p)).tolist():
        if sw_of_node[node] >= 0:
            out.append(Symptom(int(sw_of_node[node]), "flows_rehashed_onto_one_uplink",
                               "hash_polarization", float(paths.moved[node]), 3.4))
    return out


def rules_diagnosis(symptoms: list[Symptom]) -> list[tuple[int, str, float]]:
    """Rules-alone baseline: candidates ranked by their strongest symptom's severity."""
    best: dict[int, tuple[float, float, str]] = {}
    for s in symptoms:
        key = (s.severity, s.value, s.fault_type)
        if s.candidate not in best or key[:2] > best[s.candidate][:2]:
            best[s.candidate] = key
    ranked = sorted(best.items(), key=lambda kv: kv[1][:2], reverse=True)
    return [(cand, ft, sev) for cand, (sev, _, ft) in ranked]


def set_aside_outage(symptoms: list[Symptom], n_switches: int,
                     cfg: RuleConfig | None = None) -> tuple[list[Symptom], int]:
    """The symptoms without the switches' silence if so many stopped at once that it is
    a collection outage (see the module docstring); and how many switches that was (0:
    nothing set aside)."""
    c = cfg or RuleConfig()
    silent = {s.candidate for s in symptoms if s.rule == STOPPED}
    if len(silent) <= max(c.outage_min, c.outage_share * n_switches):
        return symptoms, 0
    return [s for s in symptoms if s.rule != STOPPED], len(silent)
