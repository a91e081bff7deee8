"""The fabric's counters, states and gauges, and their frames.

Counters are unsigned 64-bit and wrap like the hardware's; fractional
increments are carried in a residual so that every counter stays an integer
that never goes backwards (except when its device reboots, which zeroes it).
Values are kept metric-major (one row per metric) so that a tick updates whole
rows; frames are cut per device from port-major views.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.core.runs import run_of
from fabricops.simulator.fabric import Fabric
from fabricops.simulator.frame_pool import FramePool, Matrices

F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
U16 = npt.NDArray[np.uint16]
Ports = npt.NDArray[np.integer[Any]]
B = npt.NDArray[np.bool_]

PORT_COUNTERS = (
    "in_octets", "out_octets", "in_pkts", "out_pkts", "in_errors", "in_fcs_errors",
    "in_discards", "out_discards", "carrier_transitions", "ecn_marked_pkts",
)
PORT_GAUGES = (
    "queue_depth_bytes", "queue_watermark_bytes", "rx_power_dbm", "tx_power_dbm",
    "temperature_c",
)
NIC_COUNTERS = ("cnp_sent", "cnp_handled", "rdma_retransmits", "out_of_sequence")
NIC_GAUGES = ("rdma_tx_rate_bps",)
OPER_UP, OPER_DOWN = 1, 2


def pfc_names(priorities: tuple[int, ...]) -> tuple[str, ...]:
    """Concrete PFC counter names for the lossless priorities."""
    return tuple(f"pfc_{d}_pause{{prio={p}}}" for d in ("rx", "tx") for p in priorities)


_Cut = tuple[int, int, int]  # see Telemetry._cuts


class Telemetry:
    """Every metric of every port and NIC, updated in place each tick."""

    def __init__(self, fabric: Fabric, priorities: tuple[int, ...] = (3,)) -> None:
        self.fabric = fabric
        self.priorities = priorities
        self.counter_names = PORT_COUNTERS + pfc_names(priorities)
        self._row = {n: i for i, n in enumerate(self.counter_names)}
        self._nrow = {n: i for i, n in enumerate(NIC_COUNTERS)}
        self.port_counters = np.zeros((len(self.counter_names), fabric.n_ports), np.uint64)
        self._port_resid = np.zeros(self.port_counters.shape)
        self.nic_counters = np.zeros((len(NIC_COUNTERS), fabric.n_nics), np.uint64)
        self._nic_resid = np.zeros(self.nic_counters.shape)
        self.oper_status = np.full(fabric.n_ports, OPER_UP, np.uint64)
        self.port_gauges = np.zeros((len(PORT_GAUGES), fabric.n_ports))
        self.nic_gauges = np.zeros((len(NIC_GAUGES), fabric.n_nics))
        self._seq = np.zeros(fabric.n_nodes, np.uint64)
        self.silent = np.zeros(fabric.n_ports, bool)  # ports left out of frames (dead NICs)
        self._templates = self._frame_templates()
        self.pool = FramePool()
        self._switch_ports = _as_slice(np.flatnonzero(~fabric.node_is_host[fabric.port_node]))
        self._nic_ports = _as_slice(np.asarray(fabric.nic_ports, np.int64))
        self._bounds = [
            (r.start, r.stop, int(fabric.port_nic[r.start]) if fabric.node_is_host[n] else -1)
            for n, r in ((n, fabric.node_ports(n)) for n in range(fabric.n_nodes))
        ]

    def counter(self, name: str) -> U64:
        """The live row of a port counter (read-only use)."""
        row: U64 = self.port_counters[self._row[name]]
        return row

    def gauge(self, name: str) -> F64:
        row: F64 = self.port_gauges[PORT_GAUGES.index(name)]
        return row

    def add(self, name: str, amount: F64, at: Ports | None = None) -> I64:
        """Add a non-negative (possibly fractional) amount per port, or to the distinct
        ports ``at``; return the whole part."""
        return _accumulate(self.port_counters, self._port_resid, self._row[name],
                           _spread(amount, at, self.fabric.n_ports))

    def add_whole(self, name: str, amount: I64, at: Ports | None = None) -> None:
        """Add integer amounts per port, or to the distinct ports ``at`` (nothing to add:
        the counter is left alone)."""
        if amount.any():
            whole = _spread(amount, at, self.fabric.n_ports)
            self.port_counters[self._row[name]] += whole.astype(np.uint64)

    def add_nic(self, name: str, amount: F64) -> I64:
        return _accumulate(self.nic_counters, self._nic_resid, self._nrow[name], amount)

    def reset_node(self, node: int) -> None:
        """Zero every counter of a node, as its reboot does."""
        ports = self.fabric.node_ports(node)
        sl = slice(ports.start, ports.stop)
        self.port_counters[:, sl] = 0
        self._port_resid[:, sl] = 0.0
        nics = self.fabric.port_nic[sl]
        nics = nics[nics >= 0]
        self.nic_counters[:, nics] = 0
        self._nic_resid[:, nics] = 0.0

    def _frame_templates(self) -> list[Frame]:
        """Per node, its frame with every value 0: checked once here, since every tick's
        frame of the node has this layout (``frames`` cuts them with ``Frame.again``)."""
        port_ids = np.array(
            [CATALOGUE.id_of(n) for n in (*self.counter_names, "oper_status", *PORT_GAUGES)],
            np.uint16,
        )
        nic_ids = np.array([CATALOGUE.id_of(n) for n in (*NIC_COUNTERS, *NIC_GAUGES)], np.uint16)
        both = np.concatenate((port_ids, nic_ids))
        fab = self.fabric
        widest = max((len(fab.node_ports(n)) for n in range(fab.n_nodes)), default=0)
        zeros = np.zeros(widest * len(both), np.uint64)  # shared by every template
        templates = []
        layouts: dict[tuple[bool, int], tuple[npt.NDArray[np.uint32], U16]] = {}
        for node in range(fab.n_nodes):
            ports = fab.node_ports(node)
            host = bool(fab.node_is_host[node])
            n = len(ports)
            layout = layouts.get((host, n))
            if layout is None:  # nodes of one kind and port count share their columns
                ids = both if host else port_ids
                layout = layouts[host, n] = _read_only(
                    np.repeat(np.arange(n, dtype=np.uint32), len(ids)), np.tile(ids, n))
            idx, metric = layout
            templates.append(Frame(fab.node_ids[node], 0, Source.SIM, 0,
                                   fab.port_ids[ports.start:ports.stop], idx, metric,
                                   zeros[:len(idx)]))
        return templates

    def _port_parts(self, ports: slice | npt.NDArray[np.int64]) -> tuple[U64, ...]:
        """The metric-major rows of ``ports``: counters, oper_status, gauges as bits."""
        return (self.port_counters[:, ports], self.oper_status[None, ports],
                self.port_gauges.view(np.uint64)[:, ports])

    def _matrices(self, into: Matrices | None = None) -> Matrices:
        """Switch ports x (counters, oper_status, gauges), and NICs x (the same, then NIC
        counters and gauges): row-major, one copy each (into ``into``, if given), left
        read-only (frames hold views of them)."""
        for matrix in into or ():
            matrix.flags.writeable = True
        switch = _rows(self._port_parts(self._switch_ports), into and into[0])
        hosts = _rows((*self._port_parts(self._nic_ports), self.nic_counters,
                       self.nic_gauges.view(np.uint64)), into and into[1])
        switch.flags.writeable = hosts.flags.writeable = False
        return switch, hosts

    def _whole_tick(self, ts_ns: int, seqs: list[int]) -> tuple[Matrices, list[Frame]]:
        """Every node's whole frame, and the (read-only) matrices their values view."""
        matrices = self._matrices()
        flat = [m.reshape(-1) for m in matrices]
        raws: list[U64] = []
        for host, a, count, size in self._runs:  # a row view each, made by numpy
            raws.extend(flat[host][a:a + count * size].reshape(count, size))
        return matrices, Frame.again_each(self._templates, ts_ns, seqs, raws)

    def mark_reported(self, reporting: B) -> None:
        """Advance the sequence number of every node that reports this tick."""
        self._seq[reporting] += np.uint64(1)

    def frames(self, ts_ns: int, reporting: B) -> list[Frame]:
        """One frame per node that is reporting, in node order. Pure: same tick, same frames.

        Each frame's values are a view of this tick's matrices (an earlier tick's,
        refilled, only where nothing holds those: :mod:`.frame_pool`). A port marked
        ``silent`` (a dead NIC) is left out of its node's frame, as a host agent
        no longer lists a NIC that fell off its bus.
        """
        fab = self.fabric
        seqs = self._seq.tolist()
        with_silent = set(fab.port_node[self.silent].tolist()) if self.silent.any() else ()
        if not with_silent and reporting.all():  # the usual tick: every node, whole
            return self.pool.frames(lambda: self._whole_tick(ts_ns, seqs), self._matrices,
                                    ts_ns, seqs)
        flat = [m.reshape(-1) for m in self._matrices()]
        cuts = self._cuts
        out: list[Frame] = []
        add = out.append
        for node in np.flatnonzero(reporting).tolist():
            host, a, b = cuts[node]
            like = self._templates[node]
            if node in with_silent:
                start, stop, _ = self._bounds[node]
                block = flat[host][a:b].reshape(stop - start, -1)
                out.extend(_without(like.device, ts_ns, seqs[node], like.entities, block,
                                    like.metric, ~self.silent[start:stop]))
                continue
            add(like.again(ts_ns, seqs[node], flat[host][a:b]))
        return out

    @cached_property
    def _runs(self) -> list[tuple[int, int, int, int]]:
        """``_cuts`` as runs of nodes whose samples follow each other in one matrix in
        blocks of one size: (matrix, start, nodes, samples a node). The usual fabric
        has two: its switches and its hosts."""
        runs: list[tuple[int, int, int, int]] = []
        for host, a, b in self._cuts:
            if runs:
                last_host, start, count, size = runs[-1]
                if host == last_host and a == start + count * size and b - a == size:
                    runs[-1] = (host, start, count + 1, size)
                    continue
            runs.append((host, a, 1, b - a))
        return runs

    @cached_property
    def _cuts(self) -> list[_Cut]:
        """Per node, where its samples lie in the flat switch port (0) or host (1) matrix
        of ``frames`` (a node's rows are contiguous in either)."""
        switch_row = np.full(self.fabric.n_ports, -1, np.int64)
        switch_row[self._switch_ports] = np.arange(len(switch_row[self._switch_ports]))
        cuts: list[_Cut] = []
        for like, (start, stop, nic_start) in zip(self._templates, self._bounds, strict=True):
            host = int(nic_start >= 0)
            first = nic_start if host else int(switch_row[start])
            size = like.n_samples
            a = first * (size // (stop - start)) if stop > start else 0
            cuts.append((host, a, a + size))
        return cuts


def _read_only(idx: npt.NDArray[np.uint32], metric: U16
               ) -> tuple[npt.NDArray[np.uint32], U16]:
    idx.flags.writeable = metric.flags.writeable = False
    return idx, metric


def _as_slice(index: npt.NDArray[np.int64]) -> slice | npt.NDArray[np.int64]:
    """``index`` as a slice where it is a run of consecutive numbers (a view, no copy)."""
    run = run_of(index)
    return index if run is None else run


def _rows(parts: tuple[U64, ...], out: U64 | None = None, block: int = 4096) -> U64:
    """The row-major (columns x parts' rows) matrix of ``parts`` stacked, in one copy
    (into ``out``, if given), ``block`` columns at a time (what a block reads stays in
    cache: 1.5x faster)."""
    n = parts[0].shape[1]
    if out is None:
        out = np.empty((n, sum(p.shape[0] for p in parts)), np.uint64)
    for lo in range(0, n, block):
        hi, at = min(n, lo + block), 0
        for part in parts:
            out[lo:hi, at:at + part.shape[0]] = part[:, lo:hi].T
            at += part.shape[0]
    return out


def _without(device: str, ts_ns: int, seq: int, entities: tuple[str, ...], block: U64,
             metric: npt.NDArray[np.uint16], keep: B) -> list[Frame]:
    """The frame of a node without its silent ports (none if nothing is left)."""
    if not keep.any():
        return []
    per = block.shape[1]
    kept = np.flatnonzero(keep)
    return [Frame(
        device=device, ts_ns=ts_ns, source=Source.SIM, seq=seq,
        entities=tuple(entities[i] for i in kept.tolist()),
        entity_idx=np.repeat(np.arange(len(kept), dtype=np.uint32), per),
        metric=metric[:per * len(kept)], raw=np.ascontiguousarray(block[kept]).reshape(-1),
    )]


def _spread(amount: npt.NDArray[np.generic], at: Ports | None, n: int) -> npt.NDArray[Any]:
    """``amount`` per port: as given, or placed at the distinct ports ``at`` (0 elsewhere;
    one scatter, then whole-row arithmetic, is cheaper than arithmetic at ``at``)."""
    if at is None:
        return amount
    out = np.zeros(n, amount.dtype)
    out[at] = amount
    return out


def _accumulate(counters: U64, resid: F64, row: int, amount: F64) -> I64:
    if not (amount > 0.0).any():  # nothing to add: the residues stay as they are
        return np.zeros(len(amount), np.int64)
    total = np.maximum(amount, 0.0)
    total += resid[row]
    whole = np.floor(total)
    np.subtract(total, whole, out=resid[row])
    inc: I64 = whole.astype(np.int64)
    counters[row] += inc.view(np.uint64)  # whole >= 0
    return inc
