"""The INT exporter sends real report packets on loopback; the receiver's reports follow
the simulator's paths hop by hop."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from fabricops.collectors.int_receiver import IntListSink, IntReceiver, IntReceiverConfig
from fabricops.core.faults import FaultType
from fabricops.core.intreport import IntBatch
from fabricops.simulator.agents.int_exporter import IntExporter, IntExporterConfig, ListSender
from fabricops.simulator.builders import leaf_spine
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.routing import flow_keys
from fabricops.simulator.workload import JobSpec

STREAM = {"compute_s": 0.0, "comm_bytes_per_nic": 1e15}
PROBES = (("host-000:nic0", "host-007:nic0", 50000), ("host-003:nic5", "host-001:nic5", 61000))


@pytest.fixture
def sim() -> Simulator:
    sim = Simulator(leaf_spine(gpus=64), SimConfig(seed=4))
    sim.add_job(JobSpec(hosts=8, placement="random", **STREAM))  # type: ignore[arg-type]
    sim.step()
    return sim


@pytest.fixture
def receiver() -> Iterator[tuple[IntReceiver, IntListSink]]:
    sink = IntListSink()
    rx = IntReceiver(IntReceiverConfig(max_wait_ms=5), sink)
    rx.start()
    yield rx, sink
    rx.stop()


def wait_for(done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def expected_hops(sim: Simulator, path: np.ndarray) -> list[tuple[str, int, int, int]]:
    """(switch, ingress interface number, egress interface number, egress channel) per hop."""
    fab = sim.fabric
    chans = [int(c) for c in path if c != fab.dummy_channel]
    out = []
    for here, nxt in itertools.pairwise(chans):
        node = fab.node_ids[fab.port_node[fab.ch_rx_port[here]]]
        ingress = fab.port_ids[fab.ch_rx_port[here]].rpartition("eth")[2]
        egress = fab.port_ids[fab.ch_tx_port[nxt]].rpartition("eth")[2]
        out.append((node, int(ingress), int(egress), nxt))
    return out


def received_hops(batch: IntBatch, names: dict[int, str], i: int) -> list[tuple[str, int, int]]:
    hops = range(int(batch.hop_start[i]), int(batch.hop_start[i] + batch.hop_count[i]))
    return [(names[int(batch.node_id[h])], int(batch.ingress_port[h]),
             int(batch.egress_port[h])) for h in hops]


def export_once(sim: Simulator, rx: IntReceiver, sink: IntListSink,
                **config: object) -> tuple[IntExporter, IntBatch]:
    exporter = IntExporter(IntExporterConfig(collector_port=rx.port, **config), sim)  # type: ignore[arg-type]
    exporter.start()
    try:
        sent = exporter.on_tick(sim)
    finally:
        exporter.stop()
    wait_for(lambda: rx.registry.get_sample_value(
        "fabricops_int_receiver_packets_total") == sent)
    return exporter, sink.batch()


def test_reports_of_sampled_flows_follow_their_paths(
        sim: Simulator, receiver: tuple[IntReceiver, IntListSink]) -> None:
    rx, sink = receiver
    exporter, got = export_once(sim, rx, sink, sample_flows_per_tick=10_000)
    fl, obs = sim.workload.flows, sim.last
    assert obs is not None
    assert got.n_reports == int(fl.active.sum()) > 0
    assert set(got.hop_count.tolist()) == {1, 3}
    index = {(int(s) + 0x0A000001, int(d) + 0x0A000001, int(p)): f
             for f, (s, d, p) in enumerate(zip(fl.src_nic, fl.dst_nic, fl.sport, strict=True))}
    for i in range(got.n_reports):
        flow = index[(int(got.src_ip[i]), int(got.dst_ip[i]), int(got.sport[i]))]
        want = expected_hops(sim, sim.paths[flow])
        assert received_hops(got, exporter.node_names, i) == [w[:3] for w in want]
        assert exporter.node_names[int(got.sink[i])] == want[-1][0]
        hops = slice(int(got.hop_start[i]), int(got.hop_start[i] + got.hop_count[i]))
        cells = [math.ceil(obs.queue_bytes[w[3]] / 80) for w in want]
        assert got.queue_occupancy[hops].tolist() == cells
        assert got.ts_ns[i] == got.egress_ts_ns[hops][-1] > sim.ts_ns


def test_probe_flows_are_reported_along_their_routed_paths(
        sim: Simulator, receiver: tuple[IntReceiver, IntListSink]) -> None:
    rx, sink = receiver
    exporter, got = export_once(sim, rx, sink, sample_flows_per_tick=0,
                                path_change_reports_per_tick=0, probe_flows=PROBES)
    assert got.n_reports == len(PROBES)
    fab = sim.fabric
    for _i, (src, dst, sport) in enumerate(PROBES):
        nics = np.array([fab.port_nic[fab.port_index(p)] for p in (src, dst)], np.int32)
        ips = nics.astype(np.uint64) + np.uint64(0x0A000001)
        port = np.array([sport], np.uint64)
        path, ok = sim.router.route(
            nics[:1], nics[1:], flow_keys(ips[:1], ips[1:], port, with_l4=True),
            flow_keys(ips[:1], ips[1:], port, with_l4=False))
        assert ok[0]
        row = int(np.flatnonzero((got.src_ip == ips[0]) & (got.sport == sport))[0])
        want = [w[:3] for w in expected_hops(sim, path[0])]
        assert received_hops(got, exporter.node_names, row) == want
        assert got.dport[row] == 4791
        assert got.proto[row] == 17


def test_flows_cut_by_a_down_link_send_no_report(sim: Simulator) -> None:
    fab = sim.fabric
    from_switch = np.flatnonzero(~fab.node_is_host[fab.ch_tx_node()])
    load = np.bincount(sim.paths.ravel(), minlength=fab.n_channels + 1)
    busy = from_switch[np.argmax(load[from_switch])]
    port = fab.port_ids[fab.ch_tx_port[busy]]
    sim.control.shut_port(port)
    sim.step()
    sender = ListSender()
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=10_000), sim, sender)
    batch = exporter.build_batch(sim)
    assert 0 < batch.n_reports < int(sim.workload.flows.active.sum())
    egress = {(exporter.node_names[int(n)], int(e)) for n, e in
              zip(batch.node_id, batch.egress_port, strict=True)}
    node, _, eth = port.partition(":")
    assert (node, int(eth.removeprefix("eth"))) not in egress
    assert exporter.on_tick(sim) == len(sender.datagrams) == batch.n_reports


def flow_ids(batch: IntBatch) -> set[tuple[int, int, int]]:
    return set(zip(batch.src_ip.tolist(), batch.dst_ip.tolist(), batch.sport.tolist(),
                   strict=True))


def test_new_and_rerouted_flows_are_reported_at_once_and_only_then(sim: Simulator) -> None:
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=0), sim, ListSender())
    live = int(sim.workload.flows.active.sum())
    assert exporter.build_batch(sim).n_reports == live  # every flow is new to the sink
    sim.step()
    assert exporter.build_batch(sim).n_reports == 0  # nothing moved
    leaf = sim.fabric.node_switch[sim.fabric.node_ids.index("leaf-0")]
    before = sim.paths.copy()
    sim.add_fault(FaultSpec(type=FaultType.HASH_POLARIZATION, entity="leaf-0",
                            start_s=sim.time_s))
    sim.step()
    moved = np.flatnonzero((sim.paths != before).any(axis=1) & sim.workload.flows.active)
    assert sim.router.l3_only[leaf]
    assert moved.size > 0
    fl = sim.workload.flows
    want = {(int(fl.src_nic[f]) + 0x0A000001, int(fl.dst_nic[f]) + 0x0A000001, int(fl.sport[f]))
            for f in moved.tolist()}
    assert flow_ids(exporter.build_batch(sim)) == want


def test_rerouted_flows_beyond_the_cap_wait_for_the_next_tick(sim: Simulator) -> None:
    exporter = IntExporter(IntExporterConfig(sample_flows_per_tick=0,
                                             path_change_reports_per_tick=5), sim, ListSender())
    live = int(sim.workload.flows.active.sum())
    seen: set[tuple[int, int, int]] = set()
    for _ in range(-(-live // 5)):
        batch = exporter.build_batch(sim)
        assert batch.n_reports == 5 or batch.n_reports == live % 5
        assert not flow_ids(batch) & seen
        seen |= flow_ids(batch)
    assert len(seen) == live
    assert exporter.build_batch(sim).n_reports == 0


def test_probe_ports_must_be_nics(sim: Simulator) -> None:
    exporter = IntExporter(IntExporterConfig(), sim, ListSender())
    with pytest.raises(ValueError, match="'leaf-0:eth1' is not a NIC"):
        exporter.set_probe_flows([("leaf-0:eth1", "host-001:nic0", 1)])
