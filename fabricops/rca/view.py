"""FabricView: the latest rates, gauges and states of every port, from telemetry only.

The view is built from the topology and fed decoded frames (``telemetry.v2``)
and INT batches (``int.v2``). Each counter sample is turned into a rate against
the previous sample of the same counter of that port (u64 arithmetic, so a
wrap is exact; a counter that goes backwards is a reset and leaves the rate
unknown). A frame may carry only some of a port's metrics (one gNMI
notification per path): what it does not carry keeps its last value. PFC
counters of every priority are summed. ``snapshot(now_ns)`` gives one :class:`Snapshot`: rates and
gauges per port, NaN where the port has been silent past its node's limit: at
least ``stale_s``, longer for a node that samples slowly or arrives late
(:class:`~fabricops.rca.freshness.Freshness`).
A device collected over several protocols (SNMP and gNMI) is read from one:
the first that reports, until it is silent for ``stale_s`` (its counters and
clocks are not interchangeable with another source's); when it fails over,
rates start again from the new source's first sample.

INT reports give flow paths: ``IntPaths`` keeps, per sampled flow, the links it
crossed (its two NIC links and every egress port's link), for path voting, and
notes every flow that left a switch by another port than it did before (a
move: in a stable ECMP fabric flows only move when a link changes state).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.intreport import INVALID, IntBatch
from fabricops.core.topology import Topology
from fabricops.rca.freshness import Freshness

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

COUNTERS: Final = (
    "in_octets", "out_octets", "in_pkts", "out_pkts", "in_errors", "in_fcs_errors",
    "in_discards", "out_discards", "carrier_transitions", "ecn_marked_pkts", "pfc_rx_pause",
    "pfc_tx_pause", "cnp_sent", "cnp_handled", "rdma_retransmits", "out_of_sequence",
)
LEVELS: Final = ("oper_status", "queue_depth_bytes", "queue_watermark_bytes", "rx_power_dbm",
                 "tx_power_dbm", "temperature_c", "rdma_tx_rate_bps")
COLUMNS: Final = COUNTERS + LEVELS
COL: Final = {name: i for i, name in enumerate(COLUMNS)}
N_COUNTERS: Final = len(COUNTERS)
IP_BASE: Final = 0x0A000001  # NIC n of the topology (in order) is 10.0.0.1 + n
_NUMBER = re.compile(r"(\d+)$")


def _column_of_metric() -> npt.NDArray[np.int16]:
    top = max(m.id for m in CATALOGUE.metrics) + 1
    out = np.full(top, -1, np.int16)
    for m in CATALOGUE.metrics:
        if m.family.name in COL:
            out[m.id] = COL[m.family.name]
    return out


@dataclass(frozen=True)
class Snapshot:
    """What the fabric looked like at ``ts_ns``: ports x COLUMNS, NaN = unknown."""

    ts_ns: int
    values: F64
    port_fresh: B  # the port itself reported within its node's limit
    node_fresh: B  # the node sent any frame within its limit
    seen: B  # the port has ever reported

    def col(self, name: str) -> F64:
        out: F64 = self.values[:, COL[name]]
        return out


class PortIndex:
    """Ports, nodes and links of a topology as integer indices."""

    def __init__(self, topo: Topology) -> None:
        self.topology = topo
        self.port_ids = topo.port_ids
        self.port_of = {p: i for i, p in enumerate(self.port_ids)}
        self.node_ids = tuple(n.id for n in topo.nodes)
        self.node_of = {n: i for i, n in enumerate(self.node_ids)}
        port_node, speed = [], []
        for ni, node in enumerate(topo.nodes):
            for port in node.ports:
                port_node.append(ni)
                speed.append(port.speed_bps)
        self.port_node = np.array(port_node, np.int64)
        self.speed_bps = np.array(speed, np.float64)
        self.node_is_host = np.array([n.is_host for n in topo.nodes])
        self.port_is_nic = self.node_is_host[self.port_node]
        self.link_ids = tuple(link.id for link in topo.links)
        self.link_of_id = {lk: i for i, lk in enumerate(self.link_ids)}
        ends = np.array([(self.port_of[lk.a], self.port_of[lk.b]) for lk in topo.links],
                        np.int64).reshape(-1, 2)
        self.link_ports = ends
        self.port_link = np.full(len(self.port_ids), -1, np.int64)
        self.port_link[ends[:, 0]] = np.arange(len(ends))
        self.port_link[ends[:, 1]] = np.arange(len(ends))
        self.peer = np.full(len(self.port_ids), -1, np.int64)
        self.peer[ends[:, 0]], self.peer[ends[:, 1]] = ends[:, 1], ends[:, 0]
        self.nic_ports = np.flatnonzero(self.port_is_nic)
        self.switch_nodes = np.flatnonzero(~self.node_is_host)
        self.n_ports, self.n_nodes, self.n_links = len(self.port_ids), len(self.node_ids), len(ends)
        # INT: node id n is the n-th switch; a port number is the name's trailing number
        self.int_port: dict[tuple[int, int], int] = {}
        for k, ni in enumerate(self.switch_nodes.tolist()):
            for port in topo.nodes[ni].ports:
                m = _NUMBER.search(port.name)
                if m:
                    self.int_port[(k + 1, int(m.group(1)))] = self.port_of[f"{topo.nodes[ni].id}:"
                                                                          f"{port.name}"]


class FabricView:
    """Latest per-port rates and levels, updated frame by frame (see module docstring)."""

    def __init__(self, index: PortIndex, *, stale_s: float = 3.5) -> None:
        self.index = index
        self.stale_ns = int(stale_s * 1e9)
        self.freshness = Freshness(index.n_nodes, stale_ns=self.stale_ns)
        n = index.n_ports
        self._col_of = _column_of_metric()
        self._raw = np.zeros((n, N_COUNTERS), np.uint64)
        self._raw_ok = np.zeros((n, N_COUNTERS), bool)
        self._cell_ts = np.full((n, len(COLUMNS)), -1, np.int64)
        self._port_ts = np.full(n, -1, np.int64)
        self._node_ports = [np.flatnonzero(index.port_node == k) for k in range(index.n_nodes)]
        self._node_ts = np.full(index.n_nodes, -1, np.int64)
        self._values = np.full((n, len(COLUMNS)), np.nan)
        self._entity_cache: dict[tuple[str, ...], npt.NDArray[np.int64]] = {}
        self._source: dict[int, str] = {}
        self.newest_ns = -1
        self.frames_seen = 0
        self.frames_other_source = 0
        self.samples_unknown = 0

    def _ports_of(self, entities: tuple[str, ...]) -> npt.NDArray[np.int64]:
        got = self._entity_cache.get(entities)
        if got is None:
            got = np.array([self.index.port_of.get(e, -1) for e in entities], np.int64)
            self._entity_cache[entities] = got
        return got

    def ingest(self, frames: Iterable[Frame]) -> None:
        """Fold frames in (any order across devices; each device's frames in time order)."""
        for frame in frames:
            self._one(frame)

    def _one(self, frame: Frame) -> None:
        ix = self.index
        node = ix.node_of.get(frame.device)
        if node is None:
            self.samples_unknown += len(frame.raw)
            return
        ts = frame.ts_ns
        pinned = self._source.get(node)
        if pinned is not None and pinned != frame.source and \
                ts - self._node_ts[node] <= self.stale_ns:
            self.frames_other_source += 1
            return
        if pinned is not None and pinned != frame.source:
            self._raw_ok[self._node_ports[node]] = False
        self._source[node] = frame.source
        self.frames_seen += 1
        self.freshness.observe(node, ts, self.newest_ns)
        self._node_ts[node] = max(self._node_ts[node], ts)
        self.newest_ns = max(self.newest_ns, ts)
        port = self._ports_of(frame.entities)[frame.entity_idx]
        mid = frame.metric.astype(np.int64)
        top = len(self._col_of) - 1
        col = np.where(mid <= top, self._col_of[np.minimum(mid, top)], -1).astype(np.int64)
        ok = (port >= 0) & (col >= 0)
        port, col, raw = port[ok], col[ok], frame.raw[ok]
        ports = np.unique(port)
        if ports.size == 0:
            return
        counter = col < N_COUNTERS
        cur = np.zeros((ports.size, N_COUNTERS), np.uint64)
        have = np.zeros((ports.size, N_COUNTERS), bool)
        row = np.searchsorted(ports, port)
        np.add.at(cur, (row[counter], col[counter]), raw[counter])
        have[row[counter], col[counter]] = True
        prev_ts = self._cell_ts[ports, :N_COUNTERS]
        dt = (ts - prev_ts) / 1e9
        prev, prev_ok = self._raw[ports], self._raw_ok[ports]
        newer = have & (prev_ts < ts)
        usable = newer & prev_ok & (prev_ts >= 0) & (cur >= prev)
        delta = (cur - prev).astype(np.float64)
        rate = np.where(usable, delta / np.where(dt > 0, dt, 1.0), np.nan)
        vals = self._values[ports]
        vals[:, :N_COUNTERS] = np.where(newer, rate, vals[:, :N_COUNTERS])
        level = ~counter
        lv = np.full((ports.size, len(COLUMNS) - N_COUNTERS), np.nan)
        lhave = np.zeros(lv.shape, bool)
        lraw = raw[level]
        lcol = col[level] - N_COUNTERS
        is_state = lcol == 0
        lval = np.where(is_state, lraw.astype(np.float64), lraw.view(np.float64))
        lv[row[level], lcol] = lval
        lhave[row[level], lcol] = True
        port_newer = (self._port_ts[ports] <= ts)[:, None]
        vals[:, N_COUNTERS:] = np.where(lhave & port_newer, lv, vals[:, N_COUNTERS:])
        self._values[ports] = vals
        self._raw[ports] = np.where(newer, cur, prev)
        self._raw_ok[ports] = newer | prev_ok
        cell_ts = self._cell_ts[ports]
        cell_ts[:, :N_COUNTERS] = np.where(newer, ts, prev_ts)
        cell_ts[:, N_COUNTERS:] = np.where(lhave & port_newer, ts, cell_ts[:, N_COUNTERS:])
        self._cell_ts[ports] = cell_ts
        self._port_ts[ports] = np.maximum(self._port_ts[ports], ts)

    def snapshot(self, now_ns: int | None = None) -> Snapshot:
        """Values as of ``now_ns`` (default: the newest sample seen)."""
        now = self.newest_ns if now_ns is None else now_ns
        node_limit = self.freshness.limit_ns()
        port_limit = node_limit[self.index.port_node]
        port_fresh = (self._port_ts >= 0) & (now - self._port_ts <= port_limit)
        node_fresh = (self._node_ts >= 0) & (now - self._node_ts <= node_limit)
        cell_fresh = (self._cell_ts >= 0) & (now - self._cell_ts <= port_limit[:, None])
        values = np.where(port_fresh[:, None] & cell_fresh, self._values, np.nan)
        return Snapshot(now, values, port_fresh, node_fresh, self._port_ts >= 0)


class IntPaths:
    """Recently seen flow paths from INT reports, as link indices (for path voting)."""

    def __init__(self, index: PortIndex, *, keep_s: float = 30.0) -> None:
        self.index = index
        self.keep_ns = int(keep_s * 1e9)
        self._paths: dict[tuple[int, int, int], tuple[int, tuple[int, ...]]] = {}
        self._egress: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._moves: list[tuple[int, int, int, tuple[int, ...]]] = []  # ts, old, new, nodes
        self.reports_unnamed = 0

    def ingest(self, batch: IntBatch) -> None:
        ix = self.index
        n_nic = len(ix.nic_ports)
        starts, counts = batch.hop_start.tolist(), batch.hop_count.tolist()
        nodes, egress = batch.node_id.tolist(), batch.egress_port.tolist()
        src = (batch.src_ip.astype(np.int64) - IP_BASE).tolist()
        dst = (batch.dst_ip.astype(np.int64) - IP_BASE).tolist()
        for i, ts in enumerate(batch.ts_ns.tolist()):
            s, d = src[i], dst[i]
            if not (0 <= s < n_nic and 0 <= d < n_nic):
                self.reports_unnamed += 1
                continue
            links = [int(ix.port_link[ix.nic_ports[s]])]
            ports = []
            for h in range(starts[i], starts[i] + counts[i]):
                if egress[h] == INVALID["egress_port"]:
                    continue
                p = ix.int_port.get((nodes[h], egress[h]))
                if p is not None and ix.port_link[p] >= 0:
                    links.append(int(ix.port_link[p]))
                    ports.append(p)
            links.append(int(ix.port_link[ix.nic_ports[d]]))
            key = (s, d, int(batch.sport[i]))
            before = self._egress.get(key)
            if before is not None and tuple(ports) != before:
                old_links = self._paths[key][1] if key in self._paths else ()
                self._note_moves(ts, before, ports, (*old_links, *links))
            self._paths[key] = (ts, tuple(dict.fromkeys(links)))
            self._egress[key] = tuple(ports)

    def _note_moves(self, ts: int, before: tuple[int, ...], after: list[int],
                    links: tuple[int, ...]) -> None:
        ix = self.index
        node_of = ix.port_node
        now = {int(node_of[p]): p for p in after}
        nodes = tuple({int(n) for n in node_of[ix.link_ports[list(links)]].ravel()}) \
            if links else ()
        for p in before:
            q = now.get(int(node_of[p]))
            if q is not None and q != p:
                self._moves.append((ts, p, q, nodes))

    def moves(self, now_ns: int, uplink: B, unstable: B) -> F64:
        """Per node: flows that moved from one uplink to another within ``keep_s``.

        ``unstable`` is per node (an end of a link that is down or flapping, or a
        node with a silent port): a move at such a node, or of a flow whose old or
        new path crosses one, is forgotten for good, since every ECMP group that
        loses or regains a member re-hashes its flows. Moves elsewhere still count
        while a link flaps.
        """
        node_of = self.index.port_node
        kept = [m for m in self._moves
                if now_ns - m[0] <= self.keep_ns and not unstable[node_of[m[1]]]
                and not any(unstable[n] for n in m[3])]
        self._moves = kept
        out = np.zeros(self.index.n_nodes)
        if not kept:
            return out
        old = np.fromiter((m[1] for m in kept), np.int64, len(kept))
        new = np.fromiter((m[2] for m in kept), np.int64, len(kept))
        ok = uplink[old] & uplink[new]
        np.add.at(out, node_of[old[ok]], 1.0)
        return out

    def recent(self, now_ns: int) -> list[tuple[int, int, tuple[int, ...]]]:
        """(src NIC, dst NIC, links) of every flow reported within ``keep_s``."""
        old = [k for k, (ts, _) in self._paths.items() if now_ns - ts > self.keep_ns]
        for k in old:
            del self._paths[k]
            self._egress.pop(k, None)
        return [(k[0], k[1], links) for k, (_, links) in self._paths.items()]

    def hash_agreement(self, uplink: B) -> tuple[F64, F64]:
        """Per node: of flow pairs with the same NICs but different source ports that
        left the node by an uplink, the share that took the same uplink, and how many.

        ECMP spreads such pairs over the uplinks (agreement about 1/uplinks); a
        switch that ignores the source port (hash polarization) sends them all
        the same way (agreement 1).
        """
        ix = self.index
        agree, total = np.zeros(ix.n_nodes), np.zeros(ix.n_nodes)
        groups: dict[tuple[int, int], list[tuple[int, ...]]] = {}
        for (s, d, _), ports in self._egress.items():
            groups.setdefault((s, d), []).append(ports)
        for members in groups.values():
            if len(members) < 2:
                continue
            first: dict[int, int] = {}
            for ports in members:
                for p in ports:
                    if not uplink[p]:
                        continue
                    node = int(ix.port_node[p])
                    if node in first:
                        total[node] += 1
                        agree[node] += first[node] == p
                    else:
                        first[node] = p
        share = np.where(total > 0, agree / np.maximum(total, 1.0), 0.0)
        return share, total

    def fan_in(self) -> F64:
        """Per NIC (in NIC order): distinct sender NICs among recently reported flows to it."""
        senders: dict[int, set[int]] = {}
        for s, d, _ in self._paths:
            senders.setdefault(d, set()).add(s)
        out = np.zeros(len(self.index.nic_ports))
        for d, ss in senders.items():
            out[d] = len(ss)
        return out
