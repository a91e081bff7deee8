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

A batch of frames is folded in rounds: the first frame of every device, then
the second, and so on; a round's frames touch disjoint ports, so each round
is one set of array operations, with the result of folding the frames one
by one (a batch where a device reports another's ports is folded one by one).
INT flow paths are :mod:`fabricops.rca.flow_paths`.
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
from fabricops.core.identity_memo import IdentityMemo
from fabricops.core.runs import run_of
from fabricops.core.topology import Topology
from fabricops.rca.frame_layout import FrameLayout
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


def _sum_into(out: npt.NDArray[np.uint64], index: npt.NDArray[np.int64],
              values: npt.NDArray[np.uint64]) -> None:
    """``out[index] += values`` with repeated indices summed (PFC priorities into one
    counter), wrapping as u64; without ``np.add.at`` where no index repeats."""
    repeated = np.bincount(index, minlength=len(out))[index] > 1
    if not repeated.any():
        out[index] = values
        return
    out[index[~repeated]] = values[~repeated]
    np.add.at(out, index[repeated], values[repeated])


_Taken = tuple[Frame, int, bool]  # a frame, its node, whether its source took over


class FabricView:
    """Latest per-port rates and levels, updated frame by frame (see module docstring)."""

    FOLD_SAMPLES = 1 << 16  # samples folded by one set of array operations, at most
    MAX_TABLES = 1 << 15  # entity tables and sample-port columns kept, at most

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
        self._layouts: IdentityMemo[FrameLayout] = IdentityMemo(self.MAX_TABLES)
        self._source: dict[int, str] = {}
        self.newest_ns = -1
        self.frames_seen = 0
        self.frames_other_source = 0
        self.samples_unknown = 0

    def _ports_of(self, entities: tuple[str, ...]) -> npt.NDArray[np.int64]:
        got = self._entity_cache.get(entities)
        if got is None:
            if len(self._entity_cache) >= self.MAX_TABLES:
                self._entity_cache.clear()
            got = np.array([self.index.port_of.get(e, -1) for e in entities], np.int64)
            self._entity_cache[entities] = got
        return got

    def _layout(self, frame: Frame) -> FrameLayout:
        """Where ``frame``'s samples go (see :mod:`fabricops.rca.frame_layout`), found by
        the identity of its columns where a decoder shares them between a device's
        frames (see ``IdentityMemo``)."""
        columns = (frame.entities, frame.entity_idx, frame.metric)
        hit = self._layouts.get(*columns)
        if hit is not None:
            return hit
        return self._layouts.put(columns, FrameLayout.of(
            self._ports_of(frame.entities)[frame.entity_idx], frame.metric, self._col_of,
            N_COUNTERS, COL["oper_status"], self.index.port_node))

    def ingest(self, frames: Iterable[Frame]) -> None:
        """Fold frames in (any order across devices; each device's frames in time order)."""
        taken = [t for t in (self._admit(f) for f in frames) if t is not None]
        if not taken:
            return
        ts = np.fromiter((f.ts_ns for f, _, _ in taken), np.int64, len(taken))
        fronts = np.maximum.accumulate(np.r_[np.int64(self.newest_ns), ts])
        self.freshness.observe_many(np.fromiter((n for _, n, _ in taken), np.int64,
                                                len(taken)), ts, fronts[:-1])
        self.newest_ns = int(fronts[-1])
        lays = [self._layout(f) for f, _, _ in taken]
        if any(lay.owners and lay.owners != (node,)
               for lay, (_, node, _) in zip(lays, taken, strict=True)):
            for item, lay in zip(taken, lays, strict=True):  # a device reports another's
                self._fold([item], [lay])
            return
        nth: dict[int, int] = {}
        rounds: list[tuple[list[_Taken], list[FrameLayout]]] = []
        for item, lay in zip(taken, lays, strict=True):
            k = nth[item[1]] = nth.get(item[1], -1) + 1
            if k == len(rounds):
                rounds.append(([], []))
            rounds[k][0].append(item)
            rounds[k][1].append(lay)
        for items, round_lays in rounds:  # in parts that stay in cache
            start, size = 0, 0
            for i, lay in enumerate(round_lays):
                size += lay.n_samples
                if size >= self.FOLD_SAMPLES or i == len(round_lays) - 1:
                    self._fold(items[start:i + 1], round_lays[start:i + 1])
                    start, size = i + 1, 0

    def _admit(self, frame: Frame) -> _Taken | None:
        """The frame's node, and whether its source took over, or None if it is not
        folded (unknown device, or another source while the pinned one reports)."""
        ix = self.index
        node = ix.node_of.get(frame.device)
        if node is None:
            self.samples_unknown += len(frame.raw)
            return None
        ts = frame.ts_ns
        pinned = self._source.get(node)
        if pinned is not None and pinned != frame.source and \
                ts - self._node_ts[node] <= self.stale_ns:
            self.frames_other_source += 1
            return None
        self._source[node] = frame.source
        self.frames_seen += 1
        self._node_ts[node] = max(self._node_ts[node], ts)
        return frame, node, pinned is not None and pinned != frame.source

    def _fold(self, items: list[_Taken], lays: list[FrameLayout]) -> None:
        """Fold frames whose ports are disjoint (see the module docstring)."""
        for _, node, failover in items:
            if failover:  # rates start again from the new source's first sample
                self._raw_ok[self._node_ports[node]] = False
        sizes = [len(lay.ports) for lay in lays]
        ports = np.concatenate([lay.ports for lay in lays])
        if ports.size == 0:
            return
        first = np.cumsum([0, *sizes[:-1]])  # each frame's first row
        ts_r = np.repeat(np.array([f.ts_ns for f, _, _ in items], np.int64), sizes)
        ts = ts_r[:, None]  # a port's samples share their frame's time
        # every frame's values in one array, taken from by one index (not frame by frame)
        raws = np.concatenate([f.raw for f, _, _ in items])
        at = np.cumsum([0, *[lay.n_samples for lay in lays[:-1]]])  # each frame's first sample
        n_counts = [len(lay.counter_cell) for lay in lays]
        cell = np.concatenate([lay.counter_cell for lay in lays]) + np.repeat(
            first * N_COUNTERS, n_counts)
        counts = raws[np.concatenate([lay.counter_take for lay in lays]) + np.repeat(at, n_counts)]
        cur = np.zeros((ports.size, N_COUNTERS), np.uint64)
        have = np.zeros((ports.size, N_COUNTERS), bool)
        if any(lay.counter_repeats for lay in lays):
            _sum_into(cur.reshape(-1), cell, counts)
        else:
            cur.reshape(-1)[cell] = counts
        have.reshape(-1)[cell] = True
        # one run of consecutive ports (a round of whole devices, in port order): the
        # state's rows are read and written in place, as views; else gathered and put back
        run = run_of(ports)
        rows: slice | npt.NDArray[np.int64] = ports if run is None else run
        prev_ts = self._cell_ts[rows, :N_COUNTERS]
        dt = (ts - prev_ts) / 1e9
        prev, prev_ok = self._raw[rows], self._raw_ok[rows]
        newer = have & (prev_ts < ts)
        usable = newer & prev_ok & (prev_ts >= 0) & (cur >= prev)
        rate = (cur - prev).astype(np.float64)  # the deltas, divided in place
        np.copyto(dt, 1.0, where=dt <= 0)
        np.divide(rate, dt, out=rate)
        rate[~usable] = np.nan
        vals = self._values[rows]
        np.copyto(vals[:, :N_COUNTERS], rate, where=newer)
        lv = np.full((ports.size, len(COLUMNS) - N_COUNTERS), np.nan)
        lhave = np.zeros(lv.shape, bool)
        n_levels = [len(lay.level_row) for lay in lays]
        lrow = np.concatenate([lay.level_row for lay in lays]) + np.repeat(first, n_levels)
        lcol = np.concatenate([lay.level_col for lay in lays])
        lraw = raws[np.concatenate([lay.level_take for lay in lays]) + np.repeat(at, n_levels)]
        is_state = np.concatenate([lay.level_state for lay in lays])
        lv[lrow, lcol] = np.where(is_state, lraw.astype(np.float64), lraw.view(np.float64))
        lhave[lrow, lcol] = True
        lnew = lhave & (self._port_ts[rows] <= ts_r)[:, None]
        np.copyto(vals[:, N_COUNTERS:], lv, where=lnew)
        np.copyto(prev, cur, where=newer)
        prev_ok |= newer
        cell_ts = self._cell_ts[rows]
        np.copyto(cell_ts[:, :N_COUNTERS], ts, where=newer)
        np.copyto(cell_ts[:, N_COUNTERS:], ts, where=lnew)
        if run is None:  # gathered copies: put them back
            self._values[ports], self._raw[ports], self._raw_ok[ports] = vals, prev, prev_ok
            self._cell_ts[ports] = cell_ts
        self._port_ts[rows] = np.maximum(self._port_ts[rows], ts_r)

    def snapshot(self, now_ns: int | None = None) -> Snapshot:
        """Values as of ``now_ns`` (default: the newest sample seen)."""
        now = self.newest_ns if now_ns is None else now_ns
        node_limit = self.freshness.limit_ns()
        port_limit = node_limit[self.index.port_node]
        port_fresh = (self._port_ts >= 0) & (now - self._port_ts <= port_limit)
        node_fresh = (self._node_ts >= 0) & (now - self._node_ts <= node_limit)
        cell_fresh = fresh_cells(self._cell_ts, now, port_limit)
        values = np.where(port_fresh[:, None] & cell_fresh, self._values, np.nan)
        return Snapshot(now, values, port_fresh, node_fresh, self._port_ts >= 0)


def fresh_cells(cell_ts: npt.NDArray[np.int64], now: int, limit: F64) -> B:
    """``(cell_ts >= 0) & (now - cell_ts <= limit[:, None])``: for integer ages,
    ``age <= floor(limit)``, so one threshold per row instead of an age per cell."""
    whole = np.floor(limit)
    if not 0 <= now < 2**62 or not (np.abs(whole) < 2.0**62).all():  # NaN, inf, far from now
        out: B = (cell_ts >= 0) & (now - cell_ts <= limit[:, None])
        return out
    oldest = np.maximum(now - whole.astype(np.int64), 0)
    return np.asarray(cell_ts >= oldest[:, None])

