"""INT exporter of the simulated fabric: Telemetry Report v2.0 packets with INT-MD stacks.

After each tick (``on_tick``), for every workload flow that is new or whose
path changed since it was last reported (up to ``path_change_reports_per_tick``,
as an INT sink's flow table with change detection reports them), for a random
sample of the other live workload flows, and for every probe flow, the flow's
sink switch (the last switch on its path) sends one report whose INT-MD stack
holds one hop per switch on the path, as if the INT source (the first switch)
had stamped a packet of the flow and every switch had pushed its metadata. A
flow whose path is cut by a down link, or whose sink is not reporting, yields
no report (its packet was lost).

Per hop, from the tick just simulated:
- node id: switch ordinal + 1 (``node_names`` maps it back to the switch name);
- ingress / egress port: the interface number of the port name (``eth12`` ->
  12; 0xFFFF if the name has no trailing number);
- hop latency: ``pipeline_latency_ns`` + the egress queue drained at the
  egress channel's current capacity (``queue_bytes * 8 / capacity_bps``), ns;
- queue id ``queue_id``, occupancy in 80-byte cells (24 bits);
- ingress / egress timestamps: the tick's timestamp plus the hop latencies
  accumulated along the path (ns since the Unix epoch);
- egress tx utilization: served / nominal capacity of the egress channel, in
  parts per million (``TX_UTIL_SCALE``).
Flow addresses follow the simulator's convention: NIC ordinal + 10.0.0.1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray
from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.intreport import (
    CELL_BYTES,
    INVALID,
    ROCEV2_UDP_PORT,
    TX_UTIL_SCALE,
    Instruction,
    IntBatch,
    ReportFlag,
)
from fabricops.core.probes import ProbeFlow
from fabricops.simulator.agents.int_senders import DatagramSender, ListSender, UdpSender
from fabricops.simulator.agents.int_wire import WireOptions, encode_packets
from fabricops.simulator.fabric import Fabric
from fabricops.simulator.observe import TickObservation
from fabricops.simulator.routing import Router, flow_keys, mix64
from fabricops.simulator.workload import Workload

__all__ = ["DatagramSender", "IntExporter", "IntExporterConfig", "ListSender", "UdpSender"]

I64 = NDArray[np.int64]
IP_BASE: Final = 0x0A000001
DEFAULT_INSTRUCTIONS: Final = int(
    Instruction.NODE_ID | Instruction.L1_PORTS | Instruction.HOP_LATENCY | Instruction.QUEUE
    | Instruction.INGRESS_TS | Instruction.EGRESS_TS | Instruction.TX_UTIL)
_U32_TOP: Final = 0xFFFFFFFE
_IFNUM = re.compile(r"(\d+)$")


class IntExporterConfig(BaseModel):
    """What the INT exporter reports, and where it sends it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    collector_host: str = "127.0.0.1"
    collector_port: int = Field(default=32766, ge=1, le=65535)
    sample_flows_per_tick: int = Field(default=16, ge=0, description="Workload flows reported")
    path_change_reports_per_tick: int = Field(
        default=1024, ge=0, description="New or re-routed flows reported at once (0: none); "
        "the rest wait for the next tick")
    probe_flows: tuple[ProbeFlow, ...] = Field(default=(), description="Reported every tick")
    instructions: int = Field(default=DEFAULT_INSTRUCTIONS, ge=0, le=0xFFFF,
                              description="INT-MD instruction bitmap")
    pipeline_latency_ns: int = Field(default=600, ge=0)
    queue_id: int = Field(default=3, ge=0, le=254)
    max_reports_per_packet: int = Field(default=1, ge=1, le=64)
    seed: int = Field(default=0, ge=0, description="Seeds the choice of sampled flows")
    wire: WireOptions = Field(default_factory=WireOptions)


class IntSource(Protocol):
    """What the exporter reads of a simulator (``Simulator`` is one)."""

    fabric: Fabric
    router: Router
    workload: Workload
    last: TickObservation | None
    oper_up: NDArray[np.bool_]
    reporting: NDArray[np.bool_]

    @property
    def ts_ns(self) -> int: ...

    def effective_paths(self) -> tuple[NDArray[np.intp], NDArray[np.int32]]: ...


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.reports = Counter("fabricops_int_exporter_reports", "INT reports built",
                               registry=registry)
        self.hops = Counter("fabricops_int_exporter_hop_records", "INT hop records built",
                            registry=registry)
        self.packets = Counter("fabricops_int_exporter_packets", "Report packets sent",
                               registry=registry)
        self.send_errors = Counter("fabricops_int_exporter_send_errors",
                                   "Report packets the socket refused", registry=registry)
        self.changes = Counter("fabricops_int_exporter_path_changes",
                               "Flows reported because they are new or their path changed",
                               registry=registry)
        self.lost = Counter("fabricops_int_exporter_lost_flows",
                            "Flows chosen for a report that had none, by reason",
                            ["reason"], registry=registry)


class IntExporter:
    """Builds and sends each tick's INT reports; ``on_tick`` runs on the simulator's thread."""

    def __init__(self, config: IntExporterConfig, source: IntSource,
                 sender: DatagramSender | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.source = source
        self.sender = sender or UdpSender(config.collector_host, config.collector_port)
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)
        fab = source.fabric
        self.node_names: dict[int, str] = {
            i + 1: fab.node_ids[n] for i, n in enumerate(fab.switch_nodes.tolist())}
        self._ifnum = np.array([_interface_number(p) for p in fab.port_ids], np.int64)
        self._rng = np.random.default_rng(config.seed)
        self._seq = np.zeros(len(fab.switch_nodes) + 2, np.int64)
        self._reported = np.zeros(0, np.uint64)  # per flow: signature of its last reported path
        self._started = np.zeros(0, bool)  # per flow: it has sent a packet (so can carry INT)
        self._probes = self._resolve(config.probe_flows)

    def start(self) -> None:
        self.sender.start()

    def stop(self) -> None:
        self.sender.stop()

    def set_probe_flows(self, probes: Sequence[ProbeFlow]) -> None:
        """Replace the probe flows; ValueError names a port that is not a NIC."""
        self._probes = self._resolve(tuple(probes))

    def on_tick(self, sim: IntSource | None = None) -> int:
        """Build and send the reports of the tick just simulated; return packets sent."""
        batch = self.build_batch(sim or self.source)
        if batch.n_reports == 0:
            return 0
        packets = encode_packets(batch, self.config.wire)
        sent = self.sender.send(packets)
        m = self._metrics
        m.reports.inc(batch.n_reports)
        m.hops.inc(batch.n_hops)
        m.packets.inc(sent)
        m.send_errors.inc(len(packets) - sent)
        return sent

    def build_batch(self, src: IntSource) -> IntBatch:
        """The reports of the last tick of ``src`` (sampled flows first, then probes)."""
        if src.last is None:
            return IntBatch.empty()
        sampled = self._sampled(src)
        probes = self._probe_paths(src)
        paths = np.vstack(_same_width((sampled[3], probes[3]), src.fabric.dummy_channel))
        flows = [np.concatenate((a, b)) for a, b in zip(sampled[:3], probes[:3], strict=True)]
        return self._batch(src, src.last, paths, *flows)

    def _sampled(self, src: IntSource) -> tuple[I64, I64, I64, NDArray[np.int32]]:
        """New or re-routed flows first (capped), then a random sample of the others; a flow
        that has never sent a packet (an incast's senders before it starts) carries no INT."""
        fl, cfg = src.workload.flows, self.config
        epath, dead = src.effective_paths()
        if len(self._reported) < len(fl.sport):  # flows were added: unseen until reported
            self._reported = np.pad(self._reported, (0, len(fl.sport) - len(self._reported)))
            self._started = np.pad(self._started, (0, len(fl.sport) - len(self._started)))
        if src.last is not None:
            rate = src.last.rate_bps[:len(self._started)]
            self._started[:len(rate)] |= rate > 0
        live = np.flatnonzero(fl.active & self._started & (dead < 0)
                              & (epath[:, 0] != src.fabric.dummy_channel))
        sig = path_signature(epath[live], fl.sport[live])
        moved = np.flatnonzero(self._reported[live] != sig)
        if len(moved) > cfg.path_change_reports_per_tick:
            moved = np.sort(self._rng.choice(moved, size=cfg.path_change_reports_per_tick,
                                             replace=False))
        self._metrics.changes.inc(len(moved))
        rest = np.delete(np.arange(len(live)), moved)
        k = min(cfg.sample_flows_per_tick, len(rest))
        extra = self._rng.choice(rest, size=k, replace=False) if k else rest[:0]
        chosen = np.sort(np.concatenate((moved, extra)))
        self._reported[live[chosen]] = sig[chosen]
        pick = live[chosen]
        return (fl.src_nic[pick].astype(np.int64), fl.dst_nic[pick].astype(np.int64),
                fl.sport[pick].astype(np.int64), epath[pick])

    def _probe_paths(self, src: IntSource) -> tuple[I64, I64, I64, NDArray[np.int32]]:
        s, d, port = self._probes
        if len(s) == 0:
            return s, d, port, np.zeros((0, 1), np.int32)
        src_ip, dst_ip = (x.astype(np.uint64) + np.uint64(IP_BASE) for x in (s, d))
        sport = port.astype(np.uint64)
        paths, ok = src.router.route(
            s.astype(np.int32), d.astype(np.int32),
            flow_keys(src_ip, dst_ip, sport, with_l4=True),
            flow_keys(src_ip, dst_ip, sport, with_l4=False))
        up = np.append(src.oper_up, True)[paths // 2]
        ok &= up.all(axis=1)
        self._metrics.lost.labels("path_cut").inc(int(np.count_nonzero(~ok)))
        return s[ok], d[ok], port[ok], paths[ok]

    def _batch(self, src: IntSource, obs: TickObservation, paths: NDArray[np.int32],
               s: I64, d: I64, sport: I64) -> IntBatch:
        """Reports of flows with these paths, sorted by sink; flows whose sink is down dropped."""
        fab, cfg = src.fabric, self.config
        hop = (paths[:, 1:] != fab.dummy_channel) & (paths[:, :-1] != fab.dummy_channel)
        count = hop.sum(axis=1)
        in_ch, out_ch = paths[:, :-1][hop], paths[:, 1:][hop]
        switch = fab.node_switch[fab.port_node[fab.ch_rx_port[in_ch]]].astype(np.int64)
        hop_cols = self._hop_values(src, obs, in_ch, out_ch, switch, count)
        n, some = len(count), count > 0
        last = (np.cumsum(count) - 1)[some]
        sink, ts = np.full(n, -1, np.int64), np.zeros(n, np.int64)
        sink[some], ts[some] = switch[last], hop_cols["egress_ts_ns"][last]
        keep = some & src.reporting[fab.switch_nodes[np.maximum(sink, 0)]]
        self._metrics.lost.labels("sink_down").inc(int(np.count_nonzero(~keep)))
        order = np.flatnonzero(keep)[np.argsort(sink[keep], kind="stable")]
        cols: dict[str, Any] = {
            "ts_ns": ts, "sink": sink + 1, "seq": self._sequence(sink, order),
            "src_ip": s + IP_BASE, "dst_ip": d + IP_BASE, "sport": sport,
            "dport": np.full(n, ROCEV2_UDP_PORT), "proto": np.full(n, 17),
            "flags": np.full(n, int(ReportFlag.TRACKED_FLOW)),
            "instructions": np.full(n, cfg.instructions), "hop_count": count,
        }
        for name, bit in _HOP_BITS.items():
            if not cfg.instructions & bit:
                hop_cols[name] = np.full(len(in_ch), INVALID[name])
        return IntBatch.from_columns(cols | hop_cols).take(order)

    def _hop_values(self, src: IntSource, obs: TickObservation, in_ch: I64, out_ch: I64,
                    switch: I64, count: I64) -> dict[str, NDArray[Any]]:
        fab, cfg = src.fabric, self.config
        queue = obs.queue_bytes[out_ch]
        drain = queue * 8.0 / np.maximum(obs.capacity_bps[out_ch], 1.0) * 1e9
        lat = np.minimum(cfg.pipeline_latency_ns + np.ceil(drain), _U32_TOP).astype(np.int64)
        util = obs.served_bps[out_ch] / np.maximum(fab.ch_capacity_bps[out_ch], 1.0)
        done = np.cumsum(lat)
        first = np.repeat(np.cumsum(count) - count, count)
        ingress = src.ts_ns + done - lat - (done[first] - lat[first]) if len(lat) else lat
        return {
            "node_id": switch + 1,
            "ingress_port": self._ifnum[fab.ch_rx_port[in_ch]],
            "egress_port": self._ifnum[fab.ch_tx_port[out_ch]],
            "hop_latency_ns": lat, "queue_id": np.full(len(lat), cfg.queue_id),
            "queue_occupancy": np.minimum(np.ceil(queue / CELL_BYTES), 0xFFFFFE),
            "ingress_ts_ns": ingress, "egress_ts_ns": ingress + lat,
            "egress_tx_util": np.minimum(np.round(util * TX_UTIL_SCALE), _U32_TOP),
        }

    def _sequence(self, sink: I64, order: I64) -> I64:
        """Per report, its packet's sequence number: reports of a sink, in ``order``,
        fill packets of ``max_reports_per_packet``, numbered per sink."""
        seq = np.zeros(len(sink), np.int64)
        sinks, first, n = np.unique(sink[order], return_index=True, return_counts=True)
        per = self.config.max_reports_per_packet
        j = np.arange(len(order)) - np.repeat(first, n)
        seq[order] = (np.repeat(self._seq[sinks], n) + j // per) & 0x3FFFFF
        self._seq[sinks] += -(-n // per)
        return seq

    def _resolve(self, probes: tuple[ProbeFlow, ...]) -> tuple[I64, I64, I64]:
        fab = self.source.fabric
        nics: list[list[int]] = [[], [], []]
        for src_port, dst_port, sport in probes:
            for port in (src_port, dst_port):
                if port not in fab.port_ids or fab.port_nic[fab.port_index(port)] < 0:
                    raise ValueError(f"probe flow port {port!r} is not a NIC of the fabric")
            if not 0 <= sport <= 0xFFFF:
                raise ValueError(f"probe flow source port {sport} is not a UDP port")
            nics[0].append(int(fab.port_nic[fab.port_index(src_port)]))
            nics[1].append(int(fab.port_nic[fab.port_index(dst_port)]))
            nics[2].append(sport)
        s, d, p = (np.array(x, np.int64) for x in nics)
        return s, d, p


_HOP_BITS: Final = {
    "node_id": Instruction.NODE_ID, "ingress_port": Instruction.L1_PORTS,
    "egress_port": Instruction.L1_PORTS, "hop_latency_ns": Instruction.HOP_LATENCY,
    "queue_id": Instruction.QUEUE, "queue_occupancy": Instruction.QUEUE,
    "ingress_ts_ns": Instruction.INGRESS_TS, "egress_ts_ns": Instruction.EGRESS_TS,
    "egress_tx_util": Instruction.TX_UTIL,
}


def _interface_number(port_id: str) -> int:
    match = _IFNUM.search(port_id.rpartition(":")[2])
    return int(match.group(1)) if match and int(match.group(1)) < 0xFFFF else 0xFFFF


def path_signature(paths: NDArray[np.integer[Any]], sport: NDArray[np.uint64]
                   ) -> NDArray[np.uint64]:
    """Per flow: a 64-bit digest of its source port and path (never 0, the "unseen" mark)."""
    h = mix64(sport.astype(np.uint64))
    for col in paths.T:
        h = mix64(h ^ col.astype(np.uint64))
    out: NDArray[np.uint64] = np.maximum(h, np.uint64(1))
    return out


def _same_width(paths: tuple[NDArray[np.int32], ...], dummy: int) -> list[NDArray[np.int32]]:
    width = max(p.shape[1] for p in paths)
    return [np.hstack((p, np.full((len(p), width - p.shape[1]), dummy, np.int32)))
            for p in paths]
