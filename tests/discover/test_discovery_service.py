"""The Discovery component with a fake source: a device is asked over its protocols in
turn until one answers; one that answers over none is a finding and the others are used;
progress and metrics move."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from fabricops.core.inventory import inventory_from_dict
from fabricops.discover.fakes import FakeLldpSource
from fabricops.discover.service import Discovery, DiscoveryConfig
from tests.discover.test_links_and_tiers import NAME, rep


def test_a_silent_device_is_a_finding_and_the_rest_is_used() -> None:
    inventory = inventory_from_dict({"targets": [
        {"device": d, "protocol": p, "address": "127.0.0.1:161"}
        for d in ("leaf-0", "spine-0", "spine-1") for p in ("snmp", "gnmi")]})
    reports = {"leaf-0": rep("leaf-0", ["eth1", "eth2"], ("eth1", "host-0", NAME, "nic0"),
                             ("eth2", "spine-0", NAME, "eth1")),
               "spine-0": rep("spine-0", ["eth1"], ("eth1", "leaf-0", NAME, "eth2"))}
    snmp = FakeLldpSource(reports, errors={"spine-1": TimeoutError("no answer in 2 tries")})
    gnmi = FakeLldpSource({})
    registry = CollectorRegistry()
    progress: list[tuple[int, int, str]] = []
    result = Discovery(DiscoveryConfig(), inventory, registry,
                       sources={"snmp": snmp, "gnmi": gnmi}).run(
        lambda *a: progress.append(a))
    assert sorted(snmp.fetched) == ["leaf-0", "spine-0", "spine-1"]
    assert gnmi.fetched == ["spine-1"], "gNMI is asked only where SNMP did not answer"
    assert (snmp.opened, snmp.closed) == (1, 1)
    kinds = [f.kind.name for f in result.findings]
    assert kinds == ["UNREACHABLE"] + ["SPEED_UNKNOWN"] * 4, "reports carry no speeds"
    assert "snmp: TimeoutError: no answer in 2 tries" in result.findings[0].detail
    assert "gnmi: KeyError" in result.findings[0].detail
    assert len(result.topology.links) == 2
    assert progress[-1][:2] == (3, 3)
    assert registry.get_sample_value("fabricops_discover_devices_total",
                                     {"protocol": "snmp", "outcome": "failed"}) == 1
    assert registry.get_sample_value("fabricops_discover_links") == 2


def test_a_device_silent_over_snmp_is_read_over_gnmi() -> None:
    inventory = inventory_from_dict({"targets": [
        {"device": d, "protocol": p, "address": "127.0.0.1:161"}
        for d in ("leaf-0", "spine-0") for p in ("snmp", "gnmi")]})
    reports = {"leaf-0": rep("leaf-0", ["eth1", "eth2"], ("eth1", "host-0", NAME, "nic0"),
                             ("eth2", "spine-0", NAME, "eth1")),
               "spine-0": rep("spine-0", ["eth1"], ("eth1", "leaf-0", NAME, "eth2"))}
    snmp = FakeLldpSource(reports, errors={"spine-0": TimeoutError("no answer in 2 tries")})
    gnmi = FakeLldpSource(reports)
    registry = CollectorRegistry()
    result = Discovery(DiscoveryConfig(), inventory, registry,
                       sources={"snmp": snmp, "gnmi": gnmi}).run()
    assert gnmi.fetched == ["spine-0"]
    assert [f.kind.name for f in result.findings if f.kind.name != "SPEED_UNKNOWN"] == []
    assert len(result.topology.links) == 2
    assert result.names == {"leaf-0": "leaf-0", "spine-0": "spine-0"}
    assert registry.get_sample_value("fabricops_discover_devices_total",
                                     {"protocol": "gnmi", "outcome": "ok"}) == 1
