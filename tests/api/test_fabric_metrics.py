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


def test_every_link_and_switch_has_its_series_before_the_first_frame() -> None:
    _, reg = metrics(small_fabric())
    for link in (UPLINK, HOSTLINK):
        assert value(reg, "fabricops_link_errors_total", link=link) == 0.0
        assert value(reg, "fabricops_link_utilization_ratio", link=link) == 0.0
    for device in ("leaf-0", "spine-0"):
        for direction in ("rx", "tx"):
            assert value(reg, "fabricops_switch_pfc_pauses_total", device=device,
                         direction=direction) == 0.0
        assert value(reg, "fabricops_switch_ecn_marked_packets_total", device=device) == 0.0
        assert value(reg, "fabricops_switch_discards_total", device=device) == 0.0
    assert value(reg, "fabricops_switch_discards_total", device="host-0") is None, "a host"
    assert value(reg, "fabricops_fabric_links", state="unknown") == 2.0


def test_two_frames_one_second_apart_give_link_and_switch_figures() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 0), spine(0, 0), leaf(1, 1), spine(1, 1)))
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) == pytest.approx(0.4), \
        "spine->leaf carries 160 Gb/s of 400"
    assert value(reg, "fabricops_link_utilization_ratio", link=HOSTLINK) == pytest.approx(0.5), \
        "100 Gb/s to a 200G NIC that reports nothing itself"
    assert value(reg, "fabricops_link_errors_total", link=UPLINK) == 6.0, "both ends' counters"
    assert value(reg, "fabricops_link_rx_power_dbm", link=UPLINK) == pytest.approx(-4.0)
    assert value(reg, "fabricops_link_rx_power_dbm", link=HOSTLINK) is None, "no optics reported"
    assert value(reg, "fabricops_switch_pfc_pauses_total", device="leaf-0",
                 direction="rx") == 100.0
    assert value(reg, "fabricops_switch_pfc_pauses_total", device="leaf-0",
                 direction="tx") == 50.0, "priorities are summed"
    assert value(reg, "fabricops_switch_pfc_pauses_total", device="spine-0",
                 direction="rx") == 20.0
    assert value(reg, "fabricops_switch_ecn_marked_packets_total",
                 device="leaf-0") == 550.0, "summed over the switch's ports"
    assert value(reg, "fabricops_switch_discards_total", device="leaf-0") == 8.0
    assert value(reg, "fabricops_fabric_links", state="up") == 2.0
    assert value(reg, "fabricops_fabric_links", state="down") == 0.0
    assert value(reg, "fabricops_fabric_series_dropped") == 0.0


def test_a_link_with_an_end_down_counts_as_down() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 0, oper=2), spine(0, 0)))
    assert value(reg, "fabricops_fabric_links", state="down") == 1.0
    assert value(reg, "fabricops_fabric_links", state="up") == 1.0


def test_a_device_counter_reset_never_makes_an_exported_counter_go_back() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 1000), leaf(1, 1001)))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == 550_550.0
    fm.process(messages(leaf(2, 0)))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == \
        550_550.0, "the value reached before the reset is carried"
    assert value(reg, "fabricops_link_errors_total", link=UPLINK) == 5.0 * 1001
    fm.process(messages(leaf(3, 1)))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == \
        550_550.0 + 550.0
    assert fm.totals.resets > 0
    wrapped = frame("spine-0", 6, {"spine-0:eth1": {"out_octets": 2**64 - 1}})
    fm.process(messages(wrapped, frame("spine-0", 7, {"spine-0:eth1": {"out_octets": 5}})))
    text = generate_latest(reg).decode()
    utils = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("fabricops_link_util")]
    assert utils, text
    assert all(0.0 <= r <= 1.0 for r in utils), text


def test_an_older_or_replayed_sample_and_unknown_ports_change_no_counter() -> None:
    fm, reg = metrics(small_fabric())
    fm.process(messages(leaf(0, 0), leaf(2, 2), leaf(1, 1)))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == 1100.0
    ghost = frame("ghost-9", 3, {"ghost-9:eth1": {"in_errors": 7}})
    stray = frame("leaf-0", 3, {"leaf-0:eth99": {"in_errors": 7}})
    fm.process(messages(ghost, stray))
    assert fm.totals.samples_unknown == 2, "counted, not dropped silently"
    assert value(reg, "fabricops_link_errors_total", link=UPLINK) == 10.0


def test_a_second_protocol_for_the_same_device_is_ignored_then_continues_on_failover() -> None:
    fm, reg = metrics(small_fabric(), stale_s=5)
    fm.process(messages(leaf(0, 0), leaf(1, 1)))
    snmp = Frame.build("leaf-0", T0 + 2 * G, Source.SNMP, 2, ["leaf-0:eth1"],
                       ["ecn_marked_pkts"], [9_000_000])
    fm.process(messages(snmp))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == 550.0
    later = [Frame.build("leaf-0", T0 + t * G, Source.SNMP, t, ["leaf-0:eth1"],
                         ["ecn_marked_pkts"], [9_000_000 + 10 * t]) for t in (20, 21)]
    fm.process(messages(*later))
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == \
        550.0 + 10.0, "the new source's first sample is a baseline, not an increase"


def test_the_bound_keeps_a_fixed_set_of_links_and_switches_and_counts_the_rest() -> None:
    fm, reg = metrics(star(4, 3), max_links=5, max_switches=2)

    def series() -> tuple[set[str], set[str]]:
        text = generate_latest(reg).decode()
        links = set(re.findall(r'^fabricops_link_\w+\{link="([^"]+)"', text, re.M))
        devices = set(re.findall(r'^fabricops_switch_\w+\{device="([^"]+)"', text, re.M))
        return links, devices

    first = series()
    assert first == ({f"host-0-{p}:nic0~sw-0:eth{p}" for p in range(3)}
                     | {f"host-1-{p}:nic0~sw-1:eth{p}" for p in range(2)}, {"sw-0", "sw-1"})
    for s in range(4):
        fm.process(messages(*(frame(f"sw-{s}", t, {
            f"sw-{s}:eth{p}": {"out_octets": t * (s + 1) * G, "pfc_rx_pause{prio=3}": 10 * t}
            for p in range(3)}) for t in (0, 1))))
    assert series() == first, "traffic does not change which series exist"
    assert value(reg, "fabricops_fabric_series_dropped") == 7 + 2


def test_switch_to_switch_links_come_before_host_links_in_the_bound() -> None:
    fm, _ = metrics(small_fabric(), max_links=1)
    assert [fm.index.link_ids[i] for i in fm.links] == [UPLINK]


def test_series_stay_with_their_last_values_when_telemetry_stops() -> None:
    clock = FakeClock()
    fm, reg = metrics(small_fabric(), clock, stale_s=10)
    fm.process(messages(leaf(0, 0), leaf(1, 1)))
    clock.now += 60
    assert value(reg, "fabricops_link_utilization_ratio", link=UPLINK) == pytest.approx(0.4)
    assert value(reg, "fabricops_switch_ecn_marked_packets_total", device="leaf-0") == 550.0


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
