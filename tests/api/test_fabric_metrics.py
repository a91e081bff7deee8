"""Fabric aggregates at /metrics: link and switch figures from counter frames on the bus."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame, Source
from fabricops.core.membus import MemoryBus
from fabricops.core.topology import Link, Node, NodeRole, Port, Topology

T0 = 1_767_225_600_000_000_000
G = 10**9
UPLINK = "leaf-0:eth1~spine-0:eth1"
HOSTLINK = "host-0:nic0~leaf-0:eth2"
TOPIC = topic_name(Topic.TELEMETRY)
Samples = Mapping[str, Mapping[str, float]]


def small_fabric() -> Topology:
    """leaf-0 with a 400G uplink to spine-0 and a 200G host NIC below it."""
    return Topology(
        nodes=(Node(id="leaf-0", role=NodeRole.LEAF,
                    ports=(Port(name="eth1", speed_bps=400 * G),
                           Port(name="eth2", speed_bps=400 * G))),
               Node(id="spine-0", role=NodeRole.SPINE,
                    ports=(Port(name="eth1", speed_bps=400 * G),)),
               Node(id="host-0", role=NodeRole.HOST,
                    ports=(Port(name="nic0", speed_bps=200 * G),))),
        links=(Link(a="leaf-0:eth1", b="spine-0:eth1"), Link(a="leaf-0:eth2", b="host-0:nic0")))


def star(switches: int, ports: int) -> Topology:
    """``switches`` switches, each with ``ports`` 400G ports to hosts of their own."""
    nodes, links = [], []
    for s in range(switches):
        nodes.append(Node(id=f"sw-{s}", role=NodeRole.SWITCH,
                          ports=tuple(Port(name=f"eth{p}", speed_bps=400 * G)
                                      for p in range(ports))))
        for p in range(ports):
            nodes.append(Node(id=f"host-{s}-{p}", role=NodeRole.HOST,
                              ports=(Port(name="nic0", speed_bps=400 * G),)))
            links.append(Link(a=f"sw-{s}:eth{p}", b=f"host-{s}-{p}:nic0"))
    return Topology(nodes=tuple(nodes), links=tuple(links))


def frame(device: str, t_s: float, ports: Samples) -> Frame:
    entities, metrics, values = [], [], []
    for port, samples in ports.items():
        for metric, value in samples.items():
            entities.append(port)
            metrics.append(metric)
            values.append(value)
    return Frame.build(device, T0 + round(t_s * 1e9), Source.GNMI, round(t_s), entities,
                       metrics, values)


def messages(*frames: Frame) -> list[Message]:
    return [Message(TOPIC, 0, i, f.device.encode(), f.encode(), 0) for i, f in enumerate(frames)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def metrics(topology: Topology, clock: FakeClock | None = None,
            **config: int) -> tuple[FabricMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    fm = FabricMetrics(FabricMetricsConfig.model_validate(config), MemoryBus(), topology,
                       registry, monotonic=clock or FakeClock())
    return fm, registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def leaf(t_s: float, k: int, *, oper: int = 1) -> Frame:
    """leaf-0 after ``k`` seconds' worth of known traffic and trouble."""
    return frame("leaf-0", t_s, {
        "leaf-0:eth1": {"out_octets": 10 * G * k, "in_octets": 20 * G * k, "in_errors": 3 * k,
                        "in_fcs_errors": 2 * k, "pfc_rx_pause{prio=3}": 100 * k,
                        "pfc_tx_pause{prio=3}": 40 * k, "pfc_tx_pause{prio=4}": 10 * k,
                        "ecn_marked_pkts": 500 * k, "in_discards": 7 * k, "out_discards": k,
                        "rx_power_dbm": -2.5, "oper_status": oper},
        "leaf-0:eth2": {"out_octets": 12_500_000_000 * k, "in_octets": 5 * G * k,
                        "ecn_marked_pkts": 50 * k, "oper_status": 1}})


def spine(t_s: float, k: int) -> Frame:
    return frame("spine-0", t_s, {
        "spine-0:eth1": {"out_octets": 20 * G * k, "in_octets": 10 * G * k, "in_errors": k,
                         "in_fcs_errors": 0, "pfc_rx_pause{prio=3}": 20 * k,
                         "rx_power_dbm": -4.0, "oper_status": 1}})


def test_two_frames_one_second_apart_give_known_link_and_switch_figures() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 0), spine(0, 0), leaf(1, 1), spine(1, 1)))
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) == pytest.approx(0.4), \
        "spine->leaf carries 160 Gb/s of 400"
    assert value(reg, "fabricops_link_utilization_ratio", link=HOSTLINK) == pytest.approx(0.5), \
        "100 Gb/s to a 200G NIC that reports nothing itself"
    assert value(reg, "fabricops_link_errors_per_second", link=UPLINK) == pytest.approx(6.0)
    assert value(reg, "fabricops_link_rx_power_dbm", link=UPLINK) == pytest.approx(-4.0)
    assert value(reg, "fabricops_link_rx_power_dbm", link=HOSTLINK) is None, "no optics reported"
    assert value(reg, "fabricops_switch_pfc_pauses_per_second", switch="leaf-0",
                 direction="rx") == pytest.approx(100.0)
    assert value(reg, "fabricops_switch_pfc_pauses_per_second", switch="leaf-0",
                 direction="tx") == pytest.approx(50.0), "priorities are summed"
    assert value(reg, "fabricops_switch_pfc_pauses_per_second", switch="spine-0",
                 direction="rx") == pytest.approx(20.0)
    assert value(reg, "fabricops_switch_ecn_marked_packets_per_second",
                 switch="leaf-0") == pytest.approx(550.0), "summed over the switch's ports"
    assert value(reg, "fabricops_switch_discards_per_second", switch="leaf-0") == \
        pytest.approx(8.0)
    assert value(reg, "fabricops_switch_ecn_marked_packets_per_second", switch="host-0") is None
    assert value(reg, "fabricops_fabric_links", state="up") == 2.0
    assert value(reg, "fabricops_fabric_links", state="down") == 0.0
    assert value(reg, "fabricops_fabric_series_dropped") == 0.0


def test_a_link_with_an_end_down_counts_as_down() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 0, oper=2), spine(0, 0)))
    assert value(reg, "fabricops_fabric_links", state="down") == 1.0
    assert value(reg, "fabricops_fabric_links", state="up") == 1.0


def test_a_counter_reset_or_a_silent_port_gives_no_negative_or_huge_rate() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 1000), leaf(1, 1001)))
    assert value(reg, "fabricops_switch_ecn_marked_packets_per_second", switch="leaf-0") == \
        pytest.approx(550.0)
    fm.process(messages(leaf(2, 0)))
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) is None, \
        "a reset leaves the rate unknown"
    assert value(reg, "fabricops_switch_pfc_pauses_per_second", switch="leaf-0",
                 direction="rx") is None
    assert value(reg, "fabricops_link_rx_power_dbm", link=UPLINK) == -2.5, "levels still known"
    fm.process(messages(leaf(3, 1)))
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) == pytest.approx(0.4)
    only_uplink = frame("leaf-0", 4, {"leaf-0:eth1": {"out_octets": 20 * G,
                                                      "in_octets": 40 * G}})
    fm.process(messages(only_uplink, leaf(5, 3)))
    assert value(reg, "fabricops_link_utilization_ratio", link=HOSTLINK) == pytest.approx(0.5), \
        "a port missing from one frame is rated over its own interval"
    wrapped = frame("spine-0", 6, {"spine-0:eth1": {"out_octets": 2**64 - 1}})
    fm.process(messages(wrapped, frame("spine-0", 7, {"spine-0:eth1": {"out_octets": 5}})))
    text = generate_latest(reg).decode()
    rates = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith(("fabricops_link_util", "fabricops_switch_"))]
    assert rates, text
    assert all(0.0 <= r <= 1e9 for r in rates), text


def test_beyond_the_bound_the_busiest_links_and_switches_are_kept_and_the_rest_counted() -> None:
    fm, reg = metrics(star(4, 3), max_links=5, max_switches=2)
    before, after = [], []
    for s in range(4):
        ports_0 = {f"sw-{s}:eth{p}": {"out_octets": 0, "pfc_rx_pause{prio=3}": 0}
                   for p in range(3)}
        ports_1 = {f"sw-{s}:eth{p}": {"out_octets": (s * 3 + p + 1) * G,
                                      "pfc_rx_pause{prio=3}": 10 * (4 - s)} for p in range(3)}
        before.append(frame(f"sw-{s}", 0, ports_0))
        after.append(frame(f"sw-{s}", 1, ports_1))
    fm.process(messages(*before, *after))
    text = generate_latest(reg).decode()
    links = {line.split('"')[1] for line in text.splitlines()
             if line.startswith("fabricops_link_utilization_ratio{")}
    assert links == {f"host-{s}-{p}:nic0~sw-{s}:eth{p}"
                     for s, p in ((3, 2), (3, 1), (3, 0), (2, 2), (2, 1))}, "the five busiest"
    switches = set(re.findall(r'^fabricops_switch_\w+\{.*switch="([^"]+)"', text, re.M))
    assert switches == {"sw-0", "sw-1"}, "the two switches pausing most"
    assert value(reg, "fabricops_fabric_series_dropped") == 7 + 2
    assert value(reg, "fabricops_fabric_links", state="up") == 0.0, "no states reported"


def test_series_are_withdrawn_when_telemetry_stops() -> None:
    clock = FakeClock()
    fm, reg = metrics(small_fabric(), clock, stale_s=10)
    fm.process(messages(leaf(0, 0), leaf(1, 1)))
    clock.now += 9
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) is not None
    clock.now += 2
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) is None
    assert value(reg, "fabricops_fabric_links", state="up") == 0.0


def test_frames_on_the_bus_reach_the_gauges_and_bad_records_are_set_aside() -> None:
    bus = MemoryBus()
    bus.start()
    registry = CollectorRegistry()
    fm = FabricMetrics(FabricMetricsConfig(), bus, small_fabric(), registry)
    bus.publish(TOPIC, b"leaf-0", [b"not a frame"])
    BusFrameSink(bus).publish_frames([leaf(0, 0), leaf(1, 1)])
    fm.start()
    try:
        deadline = time.monotonic() + 10
        while value(registry, "fabricops_fabric_metrics_frames_total") != 2.0 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        fm.stop()
        bus.stop()
    assert value(registry, "fabricops_fabric_metrics_rejected_total") == 1.0
    assert value(registry, "fabricops_link_utilization_ratio", link=UPLINK) == \
        pytest.approx(0.4), "spine->leaf read at the leaf: 160 Gb/s of 400"


def test_a_frame_with_part_of_a_ports_metrics_does_not_skew_the_others() -> None:
    fm, reg = metrics(small_fabric())
    state_only = frame("leaf-0", 1.5, {"leaf-0:eth1": {"oper_status": 1}})
    fm.process(messages(leaf(0, 0), leaf(1, 1), state_only, leaf(2, 2)))
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) == pytest.approx(0.4)
