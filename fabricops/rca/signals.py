"""Per-port signals derived from a Snapshot, with slow per-entity baselines.

``Signals.update(snapshot)`` turns rates and levels into ratios an engineer
reads (FCS error ratio, share of time paused, ECN ratio, utilization, ...),
keeps baselines (EWMA, frozen while a value is far from normal, so a fault does
not become the new normal) and recent-history accumulators (carrier
transitions, receive-power trend). All arrays are indexed by port, except the
per-switch ECMP imbalance. Missing values stay NaN; features read them as 0
and report them separately as missing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fabricops.core.topology import NodeRole
from fabricops.rca.view import PortIndex, Snapshot

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
OPER_DOWN = 2.0
_TIER = {NodeRole.HOST: 0, NodeRole.LEAF: 1, NodeRole.SWITCH: 1, NodeRole.SPINE: 2,
         NodeRole.AGG: 2, NodeRole.CORE: 3}


def _nz(x: F64) -> F64:
    """A contiguous copy of ``x`` with NaN and infinities as 0 (what ``np.nan_to_num``
    gives, faster on a strided column of a snapshot)."""
    out: F64 = np.array(x, dtype=np.float64)
    out[~np.isfinite(out)] = 0.0
    return out


@dataclass
class PortSignals:
    """One step's signals, per port (see module docstring)."""

    oper_down: B
    util_tx: F64
    util_rx: F64
    fcs_ratio: F64
    fcs_rate: F64
    pause_rx: F64  # share of time this port's egress was paused by its peer
    pause_tx: F64  # share of time this port paused its peer
    ecn_ratio: F64
    queue: F64
    discards: F64
    cnp_ratio: F64  # NIC: CNPs sent per packet received
    retrans_ratio: F64  # NIC: packets resent per packet sent
    ooo_ratio: F64  # NIC: out-of-sequence per packet received
    flaps: F64  # carrier transitions over the last few seconds
    rx_drop_db: F64  # receive power below its baseline
    rx_slope: F64  # receive-power trend, dB/s (negative: falling)
    ecn_excess: F64  # ECN ratio above this port's baseline
    pause_excess: F64  # pause_rx above baseline
    missing: B  # the port's node reports but this port does not
    node_missing: B  # the port's node stopped reporting
    imbalance: F64  # per node: ECMP uplink imbalance above its baseline
    rx_sustained: F64  # receive utilization averaged over the last few seconds

    @property
    def silent(self) -> B:
        """Per port: its data is not fresh (the port stopped reporting, or its node)."""
        out: B = self.missing | self.node_missing
        return out


class Signals:
    """Derive PortSignals step by step; keeps the baselines between steps."""

    def __init__(self, index: PortIndex, *, baseline_alpha: float = 0.05) -> None:
        self.index = index
        self.alpha = baseline_alpha
        n = index.n_ports
        self.rx_base = np.full(n, np.nan)
        self.rx_prev = np.full(n, np.nan)
        self.rx_slope = np.zeros(n)
        self.flaps = np.zeros(n)
        self.rx_avg = np.zeros(n)
        self.ecn_base = np.zeros(n)
        self.pause_base = np.zeros(n)
        self.imb_base = np.full(index.n_nodes, np.nan)
        self.last_ts = -1
        topo = index.topology
        tier = np.array([_TIER.get(node.role, 1) for node in topo.nodes])
        peer_node = np.where(index.peer >= 0, index.port_node[np.maximum(index.peer, 0)], -1)
        self.uplink = (index.peer >= 0) & (tier[np.maximum(peer_node, 0)] > tier[index.port_node])
        self.quanta_s = 65535 * 512 / np.maximum(index.speed_bps, 1.0)

    def update(self, snap: Snapshot) -> PortSignals:
        ix = self.index
        dt = 1.0 if self.last_ts < 0 else max((snap.ts_ns - self.last_ts) / 1e9, 1e-3)
        self.last_ts = snap.ts_ns
        col = snap.col
        speed = ix.speed_bps
        util_tx = _nz(col("out_octets") * 8.0 / speed)
        util_rx = _nz(col("in_octets") * 8.0 / speed)
        fcs = _nz(col("in_fcs_errors"))
        rx_pkts = _nz(col("in_pkts")) + fcs
        tx_pkts = _nz(col("out_pkts"))
        half = self.quanta_s / 2.0
        pause_rx = np.clip(_nz(col("pfc_rx_pause")) * half, 0.0, 1.0)
        pause_tx = np.clip(_nz(col("pfc_tx_pause")) * half, 0.0, 1.0)
        ecn = _nz(col("ecn_marked_pkts")) / np.maximum(tx_pkts, 1.0)
        oper_down = col("oper_status") == OPER_DOWN
        self.rx_avg = 0.7 * self.rx_avg + 0.3 * util_rx
        self.flaps = self.flaps * 0.8 ** dt + _nz(col("carrier_transitions")) * dt
        rx = col("rx_power_dbm")
        rx_ok = np.isfinite(rx) & ~oper_down & (rx > -30.0)
        slope = np.where(rx_ok & np.isfinite(self.rx_prev), (rx - self.rx_prev) / dt, 0.0)
        self.rx_slope = 0.6 * self.rx_slope + 0.4 * slope
        self.rx_prev = np.where(rx_ok, rx, np.nan)
        base = self.rx_base
        fresh = rx_ok & ~np.isfinite(base)
        base[fresh] = rx[fresh]
        drop = np.where(rx_ok, base - rx, 0.0)
        calm = rx_ok & (np.abs(drop) < 0.15) & (self.rx_slope > -0.03)
        base[calm] += self.alpha * (rx[calm] - base[calm])
        ecn_excess = ecn - self.ecn_base
        pause_excess = pause_rx - self.pause_base
        quiet_e = ecn_excess < 0.05
        self.ecn_base[quiet_e] += self.alpha * ecn_excess[quiet_e]
        quiet_p = pause_excess < 0.05
        self.pause_base[quiet_p] += self.alpha * pause_excess[quiet_p]
        node_missing = ~snap.node_fresh[ix.port_node] & snap.seen
        missing = ~snap.port_fresh & snap.node_fresh[ix.port_node] & snap.seen
        return PortSignals(
            oper_down=oper_down, util_tx=util_tx, util_rx=util_rx,
            fcs_ratio=fcs / np.maximum(rx_pkts, 1.0), fcs_rate=fcs,
            pause_rx=pause_rx, pause_tx=pause_tx, ecn_ratio=ecn,
            queue=_nz(col("queue_depth_bytes")),
            discards=_nz(col("out_discards")) / np.maximum(tx_pkts, 1.0),
            cnp_ratio=_nz(col("cnp_sent")) / np.maximum(rx_pkts, 1.0),
            retrans_ratio=_nz(col("rdma_retransmits")) / np.maximum(tx_pkts, 1.0),
            ooo_ratio=_nz(col("out_of_sequence")) / np.maximum(rx_pkts, 1.0),
            flaps=self.flaps.copy(), rx_drop_db=np.maximum(drop, 0.0),
            rx_slope=self.rx_slope.copy(), ecn_excess=ecn_excess, pause_excess=pause_excess,
            missing=missing, node_missing=node_missing,
            imbalance=self._imbalance(util_tx), rx_sustained=self.rx_avg.copy(),
        )

    def _imbalance(self, util_tx: F64) -> F64:
        """Per node: coefficient of variation of uplink utilization, above its baseline."""
        ix = self.index
        up = self.uplink
        node = ix.port_node[up]
        u = util_tx[up]
        n = np.bincount(node, minlength=ix.n_nodes).astype(float)
        s = np.bincount(node, weights=u, minlength=ix.n_nodes)
        s2 = np.bincount(node, weights=u * u, minlength=ix.n_nodes)
        mean = s / np.maximum(n, 1.0)
        var = np.maximum(s2 / np.maximum(n, 1.0) - mean**2, 0.0)
        busy = (n >= 2) & (mean > 0.05)
        cv = np.where(busy, np.sqrt(var) / np.maximum(mean, 1e-9), np.nan)
        base = self.imb_base
        first = np.isfinite(cv) & ~np.isfinite(base)
        base[first] = cv[first]
        excess = np.where(np.isfinite(cv), cv - base, 0.0)
        calm = np.isfinite(cv) & (excess < 0.15)
        base[calm] += self.alpha * excess[calm]
        out: F64 = _nz(excess)
        return out


def unstable_nodes(ix: PortIndex, sig: PortSignals, flapping: float = 0.05) -> B:
    """Per node: flows moving there, or along a path through there, are no sign of a
    hash fault. The ends of a link that is down or changing state, and a node with a
    silent port: ECMP groups that lose or regain a member re-hash their flows."""
    shaky_port = sig.oper_down | (sig.flaps > flapping)
    peer = ix.peer[shaky_port]
    shaky = ix.port_node[np.concatenate((np.flatnonzero(shaky_port), peer[peer >= 0]))]
    silent = ix.port_node[sig.silent]
    out: B = np.bincount(np.concatenate((shaky, silent)), minlength=ix.n_nodes) > 0
    return out


def missing_entities(ix: PortIndex, sig: PortSignals) -> list[str]:
    """What stopped reporting: the nodes that did, then the ports that did on nodes that
    still report (what a diagnosis names as ``missing``)."""
    nodes = np.unique(ix.port_node[sig.node_missing])
    ports = np.flatnonzero(sig.missing)
    return ([ix.node_ids[n] for n in nodes.tolist()] + [ix.port_ids[p] for p in ports.tolist()])
