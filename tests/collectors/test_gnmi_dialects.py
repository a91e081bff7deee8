"""Each dialect's replayed stream, over real gRPC, through the real collector.

The replays (``gnmi_replays/``) are written from each vendor's published YANG
models and documentation. Per dialect, at least 95 % of the leaf updates
become samples or are reported as deliberately unsupported, by the
collector's own counters, and every leaf is accounted for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, get_args

import pytest
from prometheus_client import CollectorRegistry
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.collection import gnmi_endpoints
from fabricops.collectors.gnmi import GnmiCollector
from fabricops.collectors.gnmi_config import GnmiCollectorConfig, GnmiEndpoint
from fabricops.collectors.gnmi_dialects import PROFILES, ProfileResolver
from fabricops.collectors.gnmi_dialects.rules import LeafTarget, Unsupported
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.inventory import GnmiProfile, inventory_from_dict
from fabricops.core.openconfig import parse_path
from fabricops.core.sinks import ListSink
from tests.collectors.gnmi_replay import ReplayTarget, load_replay

DEV = "dut"
DIALECTS = ["openconfig", "arista_eos", "cisco_iosxr", "cisco_nxos", "junos", "srlinux",
            "sonic", "cumulus"]
EXPECTED: dict[str, dict[tuple[str, str], float]] = {  # a few samples each replay must give
    "openconfig": {("Ethernet1", "in_octets"): 98817263551, ("Ethernet1", "rx_power_dbm"): -2.31,
                   ("Ethernet1", "pfc_tx_pause{prio=3}"): 43, ("Ethernet2", "oper_status"): 7,
                   ("Ethernet3", "oper_status"): 6, ("Ethernet1", "queue_depth_bytes"): 12000},
    "arista_eos": {("Ethernet1", "in_fcs_errors"): 3, ("Ethernet1", "out_pkts"): 66100221,
                   ("Ethernet1", "oper_status"): 1, ("Ethernet2", "in_octets"): 5,
                   ("Ethernet1", "pfc_rx_pause{prio=3}"): 42},
    "cisco_iosxr": {("HundredGigE0/0/0/0", "in_octets"): 987654321,
                    ("HundredGigE0/0/0/0", "in_fcs_errors"): 3,
                    ("HundredGigE0/0/0/0", "oper_status"): 1,
                    ("HundredGigE0/0/0/1", "in_octets"): 4242,
                    ("Optics0/0/0/0", "rx_power_dbm"): -2.31,
                    ("Optics0/0/0/0", "tx_power_dbm"): 1.5},
    "cisco_nxos": {("eth1/1", "in_octets"): 123456789, ("eth1/1", "in_fcs_errors"): 1,
                   ("eth1/1", "out_discards"): 2, ("eth1/1", "oper_status"): 1,
                   ("eth1/2", "oper_status"): 2, ("eth1/2", "in_pkts"): 5},
    "junos": {("et-0/0/0", "in_octets"): 5000000, ("et-0/0/0", "queue_depth_bytes"): 1200,
              ("et-0/0/0", "queue_watermark_bytes"): 40000, ("et-0/0/1", "in_fcs_errors"): 2,
              ("et-0/0/1", "out_octets"): 8000000, ("et-0/0/1", "oper_status"): 1},
    "srlinux": {("ethernet-1/1", "in_discards"): 16, ("ethernet-1/1", "oper_status"): 1,
                ("ethernet-1/1", "rx_power_dbm"): -2.31, ("ethernet-1/1", "temperature_c"): 41,
                ("ethernet-1/1", "pfc_rx_pause{prio=3}"): 10,
                ("ethernet-1/1", "queue_watermark_bytes"): 40000},
    "sonic": {("Ethernet0", "in_octets"): 98817263551, ("Ethernet0", "pfc_rx_pause{prio=3}"): 17,
              ("Ethernet0", "pfc_tx_pause{prio=3}"): 42, ("Ethernet0", "queue_depth_bytes"): 12000,
              ("Ethernet0", "oper_status"): 1, ("Ethernet0", "rx_power_dbm"): -2.31},
    "cumulus": {("swp1", "ecn_marked_pkts"): 17, ("swp1", "queue_watermark_bytes"): 64000,
                ("swp1", "pfc_tx_pause{prio=3}"): 9, ("swp1", "tx_power_dbm"): 1.05,
                ("swp1", "in_octets"): 1000},
}


def wait(condition: Callable[[], object], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


@contextmanager
def collecting(endpoint: GnmiEndpoint, **config: Any) -> Iterator[tuple[GnmiCollector, ListSink]]:
    sink = ListSink()
    cfg = GnmiCollectorConfig(targets=(endpoint,), backoff_initial_s=0.05, backoff_max_s=0.2,
                              **config)
    collector = GnmiCollector(cfg, sink, registry=CollectorRegistry())
    collector.start()
    try:
        yield collector, sink
    finally:
        collector.stop()


def counter(collector: GnmiCollector, name: str, **labels: str) -> float:
    value = collector.registry.get_sample_value(name, {"device": DEV, **labels})
    return value or 0.0


def family_total(collector: GnmiCollector, name: str) -> float:
    return sum(s.value for m in collector.registry.collect() for s in m.samples
               if s.name == name and s.labels.get("device") == DEV)


def samples_of(frames: Iterable[Frame]) -> dict[tuple[str, str], float]:
    """(port, metric name) -> value over ``frames``, the last value of each."""
    out: dict[tuple[str, str], float] = {}
    for frame in frames:
        names = [frame.entities[i].removeprefix(f"{DEV}:") for i in frame.entity_idx.tolist()]
        for entity, metric, value in zip(names, frame.metric.tolist(), frame.values().tolist(),
                                         strict=True):
            out[(entity, CATALOGUE.by_id(metric).name)] = value
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_dialects_stream_maps_or_names_every_leaf(dialect: str) -> None:
    replay = load_replay(dialect)
    target = ReplayTarget(replay.responses).start()
    endpoint = GnmiEndpoint(device=DEV, address=target.address, profile=replay.profile,
                            sample_interval_s=1)
    try:
        with collecting(endpoint) as (collector, sink):
            wait(lambda: collector.status()[DEV].synced)
            status = collector.status()[DEV]
            explained = collector.explain()[0]
    finally:
        target.stop()
    leaves = counter(collector, "fabricops_gnmi_leaves_total")
    mapped = counter(collector, "fabricops_gnmi_leaves_mapped_total")
    unsupported = family_total(collector, "fabricops_gnmi_leaves_unsupported_total")
    unmapped = family_total(collector, "fabricops_gnmi_leaves_unmapped_total")
    bad = counter(collector, "fabricops_gnmi_errors_total", reason="bad_value") + \
        counter(collector, "fabricops_gnmi_errors_total", reason="bad_encoding")
    notifications = [gnmi_pb2.SubscribeResponse.FromString(r) for r in replay.responses]
    sent = sum(len(n.update.update) for n in notifications if n.HasField("update"))
    assert counter(collector, "fabricops_gnmi_updates_total") == sent  # all before the sync
    assert leaves >= 30
    assert (mapped + unsupported) / leaves >= 0.95
    assert leaves == mapped + unsupported + unmapped + bad  # none vanish
    assert (explained.leaves, explained.mapped) == (leaves, mapped)
    assert sum(explained.unsupported.values()) == unsupported
    assert status.up
    assert status.last_error is None
    got = samples_of(sink.frames)
    for key, value in EXPECTED[dialect].items():
        assert got[key] == pytest.approx(value), key
    request = target.requests[0].subscribe
    profile = PROFILES[replay.profile]
    assert gnmi_pb2.Encoding.Name(request.encoding) == profile.encoding
    assert request.prefix.target == (profile.target or DEV)
    assert len(request.subscription) == len(profile.paths)


def test_a_delete_of_a_port_publishes_it_not_present() -> None:
    replay = load_replay("arista_eos")
    target = ReplayTarget(replay.responses).start()
    endpoint = GnmiEndpoint(device=DEV, address=target.address, profile="arista_eos")
    try:
        with collecting(endpoint) as (collector, sink):
            wait(lambda: collector.status()[DEV].synced)
    finally:
        target.stop()
    assert counter(collector, "fabricops_gnmi_ports_gone_total") == 1
    last = [f for f in sink.frames if f"{DEV}:Ethernet2" in f.entities][-1]
    ethernet2 = {k: v for k, v in samples_of([last]).items() if k[0] == "Ethernet2"}
    # the replay's counters and its delete share one timestamp: one instant, one frame,
    # in which the delete (the later notification) sets the port's state
    assert ethernet2 == {("Ethernet2", "oper_status"): 6, ("Ethernet2", "in_octets"): 5,
                         ("Ethernet2", "out_octets"): 6}


def test_a_target_whose_leaves_all_fail_to_map_is_down_with_the_reason() -> None:
    replay = load_replay("junos")
    target = ReplayTarget(replay.responses).start()
    endpoint = GnmiEndpoint(device=DEV, address=target.address, profile="srlinux")
    try:
        with collecting(endpoint) as (collector, sink):
            wait(lambda: collector.status()[DEV].synced)
            status = collector.status()[DEV]
            up = counter(collector, "fabricops_gnmi_target_up")
    finally:
        target.stop()
    assert not sink.frames
    assert not status.up
    assert up == 0
    assert status.last_error is not None
    assert "none of the last 62 leaf updates mapped to a metric (profile srlinux)" in \
        status.last_error
    assert counter(collector, "fabricops_gnmi_errors_total", reason="unmapped_only") == 1
    paths = {s.labels["path"] for m in collector.registry.collect() for s in m.samples
             if s.name == "fabricops_gnmi_leaves_unmapped_total"}
    assert "/interfaces/interface/state/counters/in-octets" in paths
    assert "/junos/system/linecard/interface/interface/ingress-stats/if-octets" in paths


def test_the_inventory_picks_profile_paths_encoding_and_target() -> None:
    inv = inventory_from_dict({"targets": [
        {"device": "sw1", "protocol": "gnmi", "address": "10.0.0.1:57400",
         "gnmi": {"profile": "sonic"}},
        {"device": "sw2", "protocol": "gnmi", "address": "10.0.0.2:57400",
         "gnmi": {"profile": "arista_eos", "encoding": "JSON", "target": "t2",
                  "paths": ["eos_native:/Smash/counters/ethIntf"]}}]})
    sonic, arista = gnmi_endpoints(inv)
    assert (sonic.profile, sonic.target_name, sonic.encoding_name) == \
        ("sonic", "COUNTERS_DB", "JSON_IETF")
    assert sonic.subscribed_paths == PROFILES["sonic"].paths
    assert (arista.target_name, arista.encoding_name) == ("t2", "JSON")
    assert arista.subscribed_paths == ("eos_native:/Smash/counters/ethIntf",)


def test_every_inventory_profile_has_tables() -> None:
    assert sorted(PROFILES) == sorted(get_args(GnmiProfile))
    for profile in PROFILES.values():
        resolver = ProfileResolver(profile)
        assert profile.paths
        assert resolver.resolve(()) is None


@pytest.mark.parametrize(("profile", "path", "named"), [
    ("openconfig", "/interfaces/interface/state/counters/in-octets", None),
    ("openconfig", "/openconfig-interfaces:interfaces/interface[name=e1]/state/"
                   "openconfig-interfaces:counters/in-octets", "e1:in_octets"),
    ("junos", "/interfaces/interface[name='et-0/0/0']/state/counters/in-octets",
     "et-0/0/0:in_octets"),
    ("sonic", "/COUNTERS/Ethernet8/SAI_PORT_STAT_PFC_9_RX_PKTS", None),
    ("sonic", "/COUNTERS/Ethernet8/SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US", "gap"),
    ("srlinux", "/qos/interfaces/interface[interface-id=ethernet-1/1]/pfc/"
                "pfc-priority[index=x]/pfc-pause-frames-received", None),
    ("cisco_iosxr", "/optics-oper/optics-ports/optics-port[name=Optics0/0/0/1]/optics-info/"
                    "lane-data[lane-index=3]/receive-power", "Optics0/0/0/1:rx_power_dbm"),
])
def test_keys_module_prefixes_and_quotes_decide_what_a_path_names(
        profile: str, path: str, named: str | None) -> None:
    found = ProfileResolver(PROFILES[profile]).resolve(parse_path(path))
    if named is None:
        assert found is None  # a keyless or badly keyed leaf names nothing
    elif named == "gap":
        assert isinstance(found, Unsupported)
    else:
        assert isinstance(found, LeafTarget)
        assert f"{found.interface}:{found.metric.name}" == named
