"""Discovery over real SNMP and gNMI against the simulator's agents reproduces the
builder's topology, and finds every miswire injected into the true cabling."""

from __future__ import annotations

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.discover.cabling_diff import DiffKind, diff_cabling
from fabricops.discover.gnmi_rows import leaves_of, report_from_gnmi
from fabricops.discover.inventory import discovery_inventory
from fabricops.discover.service import Discovery, DiscoveryConfig
from fabricops.simulator.builders import fat_tree, rail_optimized
from fabricops.simulator.faults import MiswireSpec
from tests.discover.fabric import link_ids, serving, shape

pytestmark = pytest.mark.integration


def test_k8_fat_tree_over_snmp_gives_every_link_tier_and_pod() -> None:
    built = fat_tree(k=8)
    with serving(built) as fabric:
        seen: list[tuple[int, int]] = []
        result = Discovery(DiscoveryConfig(via="snmp"), fabric.inventory()).run(
            lambda done, total, _: seen.append((done, total)))
    found = result.topology
    assert link_ids(found) == link_ids(built)
    assert len(found.links) == 384
    assert shape(found) == shape(built)
    assert result.findings == []
    assert seen[-1] == (80, 80), "progress reached every switch"
    speeds = {p.speed_bps for n in found.nodes for p in n.ports}
    assert speeds == {400_000_000_000}


def test_rail_optimized_over_gnmi_gives_every_link_tier_rail_and_group() -> None:
    built = rail_optimized(gpus=256, rails=8, leaf_radix=16, spine_radix=16)
    with serving(built) as fabric:
        result = Discovery(DiscoveryConfig(via="gnmi"), fabric.inventory()).run()
    found = result.topology
    assert link_ids(found) == link_ids(built)
    assert shape(found) == shape(built)
    nic_rails = {f"{n.id}:{p.name}": p.rail for n in found.nodes if n.is_host for p in n.ports}
    assert nic_rails == {f"{n.id}:{p.name}": p.rail for n in built.nodes if n.is_host
                         for p in n.ports}
    assert result.findings == []


@pytest.mark.parametrize("via", ["snmp", "gnmi"])
def test_every_injected_miswire_is_found_and_nothing_else(via: str) -> None:
    built = fat_tree(k=4)
    links = built.links
    swaps = [(0, 1), (17, 22), (35, 44), (2, 40)]  # host-leaf, leaf-agg, agg-core, mixed tiers
    with serving(built) as fabric:
        for a, b in swaps:
            fabric.cabling.miswire(MiswireSpec(links=(links[a].id, links[b].id)))
        result = Discovery(DiscoveryConfig(via=via), fabric.inventory()).run()
    diffs = diff_cabling(built, result.topology)
    miswired = {d.entity for d in diffs if d.kind is DiffKind.MISWIRED}
    assert miswired == {links[i].id for pair in swaps for i in pair}
    assert [d for d in diffs if d.kind is not DiffKind.MISWIRED] == []
    assert len(result.topology.links) == len(built.links), "the true cabling is all found"
    assert link_ids(fabric.sim.fabric.topology) == link_ids(built), "intended stays as built"


def test_switches_known_only_by_address_are_named_by_sysname() -> None:
    built = fat_tree(k=4)
    with serving(built, snmp={"community_template": "ro-{device}"}) as fabric:
        address = f"127.0.0.1:{fabric.snmp.port}"
        inventory = discovery_inventory({"targets": [
            {"protocol": "snmp", "address": address, "snmp": {"community": f"ro-{s}"}}
            for s in fabric.switches]})
        result = Discovery(DiscoveryConfig(), inventory).run()
    assert link_ids(result.topology) == link_ids(built)
    assert sorted(result.names.values()) == sorted(fabric.switches)


def test_a_switch_missing_from_the_inventory_keeps_its_tier_and_is_reported() -> None:
    built = fat_tree(k=4)
    with serving(built) as fabric:
        inventory = fabric.inventory()
        partial = inventory.model_copy(update={"targets": [
            t for t in inventory.targets if t.device != "core-3"]})
        result = Discovery(DiscoveryConfig(via="snmp"), partial).run()
    assert link_ids(result.topology) == link_ids(built)
    assert shape(result.topology) == shape(built)
    assert {f.kind.name for f in result.findings} == {"NOT_INVENTORIED"}
    assert len(result.findings) == 4, "one per link of core-3, each seen from its agg"


def test_snmpv3_authpriv_discovery_gives_the_same_topology() -> None:
    built = fat_tree(k=4)
    with serving(built) as fabric:
        address = f"127.0.0.1:{fabric.snmp.port}"
        inventory = discovery_inventory({"targets": [
            {"device": s, "protocol": "snmp", "address": address,
             "snmp": {"version": "v3", "user": "fabricops", "auth_key": "fabricops-auth",
                      "priv_key": "fabricops-priv", "context": s}}
            for s in fabric.switches]})
        result = Discovery(DiscoveryConfig(), inventory).run()
    assert link_ids(result.topology) == link_ids(built)
    assert shape(result.topology) == shape(built)
    assert result.findings == []


def test_a_json_ietf_get_of_lldp_reads_the_same_neighbours() -> None:
    built = fat_tree(k=4)
    with serving(built) as fabric, grpc.insecure_channel(fabric.gnmi.address) as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        answers = {}
        for encoding in (gnmi_pb2.PROTO, gnmi_pb2.JSON_IETF):
            response = stub.Get(gnmi_pb2.GetRequest(
                prefix=gnmi_pb2.Path(target="agg-1-0"), encoding=encoding,
                path=[gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="lldp")])]), timeout=10)
            report = report_from_gnmi("agg-1-0", leaves_of(response.notification))
            answers[encoding] = sorted((n.local_port, n.sys_name, n.port_id)
                                       for n in report.neighbors)
    assert answers[gnmi_pb2.PROTO] == answers[gnmi_pb2.JSON_IETF]
    assert [a[1] for a in answers[gnmi_pb2.PROTO]] == ["leaf-1-0", "leaf-1-1", "core-0",
                                                       "core-1"]
