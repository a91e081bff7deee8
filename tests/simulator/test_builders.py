"""Topology builders: sizes, naming, cabling and parameter errors."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from fabricops.core.entities import split_port
from fabricops.core.topology import NodeRole, Topology, topology_from_dict
from fabricops.simulator.builders import (
    BUILDERS,
    BuilderError,
    build,
    fat_tree,
    leaf_spine,
    rail_optimized,
)


def _role_count(topo: Topology, role: NodeRole) -> int:
    return sum(1 for n in topo.nodes if n.role is role)


def _pair_counts(topo: Topology, lower: NodeRole, upper: NodeRole) -> Counter[tuple[str, str]]:
    """Parallel link count per (lower node, upper node) pair of the given roles."""
    counts: Counter[tuple[str, str]] = Counter()
    for link in topo.links:
        (na, _), (nb, _) = topo.port_by_id[link.a], topo.port_by_id[link.b]
        if na.role is lower and nb.role is upper:
            counts[na.id, nb.id] += 1
    return counts


def _assert_wiring(topo: Topology) -> None:
    """Every port cabled once, NICs on leaves, links lower tier first, eth names from 1."""
    assert set(topo.peer_of) == set(topo.port_ids)
    assert len(topo.port_ids) == 2 * len(topo.links)
    tier = {NodeRole.HOST: 0, NodeRole.LEAF: 1, NodeRole.AGG: 2, NodeRole.SPINE: 3}
    tier[NodeRole.CORE] = 3
    for link in topo.links:
        (na, _), (nb, _) = topo.port_by_id[link.a], topo.port_by_id[link.b]
        assert tier[na.role] < tier[nb.role], link
    for nic in topo.nics():
        leaf = topo.port_by_id[topo.attachment(nic)][0]
        assert leaf.role is NodeRole.LEAF
    for host in topo.hosts():
        assert [(p.name, p.rail) for p in host.ports] == [
            (f"nic{r}", r) for r in range(len(host.ports))
        ]
    for switch in topo.switches():
        numbers = [int(p.name.removeprefix("eth")) for p in switch.ports]
        assert all(p.name.startswith("eth") for p in switch.ports)
        assert numbers == sorted(numbers)
        assert numbers[0] >= 1


def test_leaf_spine_512_gpus_counts() -> None:
    topo = leaf_spine(gpus=512)
    assert topo.kind == "leaf_spine"
    assert topo.params["gpus"] == 512
    assert topo.params["nics_per_host"] == 8
    assert _role_count(topo, NodeRole.HOST) == 64
    assert _role_count(topo, NodeRole.LEAF) == 16
    assert _role_count(topo, NodeRole.SPINE) == 8
    assert len(topo.links) == 512 + 16 * 32
    pairs = _pair_counts(topo, NodeRole.LEAF, NodeRole.SPINE)
    assert len(pairs) == 16 * 8
    assert set(pairs.values()) == {4}
    _assert_wiring(topo)


def test_leaf_spine_host_naming_and_packing() -> None:
    topo = leaf_spine(gpus=512)
    hosts = [n.id for n in topo.hosts()]
    assert hosts[:2] == ["host-000", "host-001"]
    assert hosts[-1] == "host-063"
    assert topo.attachment("host-000:nic0") == "leaf-0:eth1"
    assert topo.attachment("host-001:nic7") == "leaf-0:eth16"
    assert topo.attachment("host-004:nic0") == "leaf-1:eth1"
    for host in topo.hosts():
        leaves = {split_port(topo.attachment(f"{host.id}:{p.name}"))[0] for p in host.ports}
        assert len(leaves) == 1
    leaf0 = topo.node_by_id["leaf-0"]
    assert [p.name for p in leaf0.ports] == [f"eth{i}" for i in range(1, 65)]
    assert topo.peer_of["leaf-0:eth33"].startswith("spine-0:")
    assert topo.node_by_id["spine-0"].ports[-1].name == "eth64"


def test_host_names_widen_past_three_digits() -> None:
    topo = leaf_spine(gpus=1200, nics_per_host=1)
    names = [n.id for n in topo.hosts()]
    assert names[0] == "host-0000"
    assert names[-1] == "host-1199"
    assert len({len(n) for n in names}) == 1


def test_oversubscription_three_splits_48_16() -> None:
    topo = leaf_spine(gpus=512, oversubscription=3)
    leaf0 = topo.node_by_id["leaf-0"]
    down = [p for p in leaf0.ports if topo.port_by_id[topo.peer_of[f"leaf-0:{p.name}"]][0].is_host]
    assert len(down) == 48
    assert len(leaf0.ports) - len(down) == 16
    assert [p.name for p in leaf0.ports[48:]] == [f"eth{i}" for i in range(49, 65)]
    pairs = _pair_counts(topo, NodeRole.LEAF, NodeRole.SPINE)
    assert len(set(pairs.values())) == 1
    n_leaves = _role_count(topo, NodeRole.LEAF)
    assert n_leaves == 11  # 64 hosts, 6 per leaf
    _assert_wiring(topo)


def test_leaf_spine_partial_last_leaf_keeps_uplink_positions() -> None:
    topo = leaf_spine(gpus=40, nics_per_host=8)
    leaf = topo.node_by_id["leaf-1"]
    assert [p.name for p in leaf.ports][:8] == [f"eth{i}" for i in range(1, 9)]
    assert leaf.ports[8].name == "eth33"
    _assert_wiring(topo)


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_counts(k: int) -> None:
    topo = fat_tree(k=k)
    half = k // 2
    assert topo.kind == "fat_tree"
    assert topo.params["k"] == k
    assert sum(1 for _ in topo.nics()) == k**3 // 4
    assert sum(1 for _ in topo.switches()) == 5 * k * k // 4
    assert _role_count(topo, NodeRole.LEAF) == k * half
    assert _role_count(topo, NodeRole.AGG) == k * half
    assert _role_count(topo, NodeRole.CORE) == half * half
    assert len(topo.links) == 3 * k**3 // 4
    assert {len(switch.ports) for switch in topo.switches()} == {k}
    _assert_wiring(topo)


def test_fat_tree_structure() -> None:
    k, half = 8, 4
    topo = fat_tree(k=k)
    assert set(_pair_counts(topo, NodeRole.LEAF, NodeRole.AGG).values()) == {1}
    for link in topo.links:
        (na, _), (nb, _) = topo.port_by_id[link.a], topo.port_by_id[link.b]
        if na.role is NodeRole.LEAF and nb.role is NodeRole.AGG:
            assert na.pod == nb.pod
        if na.role is NodeRole.AGG and nb.role is NodeRole.CORE:
            m = int(na.id.rsplit("-", 1)[1])
            c = int(split_port(link.a)[1].removeprefix("eth")) - half - 1
            assert nb.id == f"core-{m * half + c}"
            assert split_port(link.b)[1] == f"eth{(na.pod or 0) + 1}"
    assert all(n.pod is not None for n in topo.nodes if n.role is not NodeRole.CORE)


def test_fat_tree_multi_nic_hosts_stay_in_one_pod() -> None:
    topo = fat_tree(k=4, nics_per_host=2)
    assert sum(1 for _ in topo.hosts()) == 8
    for host in topo.hosts():
        pods = {topo.port_by_id[topo.attachment(f"{host.id}:{p.name}")][0].pod for p in host.ports}
        assert pods == {host.pod}
    _assert_wiring(topo)


def test_rail_optimized_rails_and_planes() -> None:
    topo = rail_optimized(gpus=8 * 96, rails=8)
    assert _role_count(topo, NodeRole.LEAF) == 3 * 8
    for host in topo.hosts():
        for port in host.ports:
            leaf = topo.port_by_id[topo.attachment(f"{host.id}:{port.name}")][0]
            assert leaf.rail == port.rail
            assert leaf.pod == host.pod
            assert leaf.id == f"leaf-{host.pod}-{port.rail}"
    pairs = _pair_counts(topo, NodeRole.LEAF, NodeRole.SPINE)
    leaves = [n for n in topo.nodes if n.role is NodeRole.LEAF]
    spines = [n for n in topo.nodes if n.role is NodeRole.SPINE]
    for leaf in leaves:
        for spine in spines:
            linked = pairs[leaf.id, spine.id] > 0
            assert linked == (leaf.rail == spine.rail)
    assert len(set(pairs.values())) == 1
    _assert_wiring(topo)


def test_rail_optimized_16k_gpus() -> None:
    start = time.thread_time()  # CPU time of this thread: other processes' load does not count
    topo = rail_optimized(gpus=16384)
    elapsed = time.thread_time() - start
    assert sum(1 for _ in topo.hosts()) == 2048
    assert _role_count(topo, NodeRole.LEAF) == 512
    assert _role_count(topo, NodeRole.SPINE) == 256
    assert len({n.pod for n in topo.nodes if n.role is NodeRole.LEAF}) == 64
    spines_per_rail = Counter(n.rail for n in topo.nodes if n.role is NodeRole.SPINE)
    assert spines_per_rail == dict.fromkeys(range(8), 32)
    assert len(topo.links) == 32768
    assert elapsed < 5.0


def test_build_dispatch_and_round_trip() -> None:
    assert set(BUILDERS) == {"leaf_spine", "fat_tree", "rail_optimized"}
    topo = build("fat_tree", k=4, name="lab")
    assert topo.name == "lab"
    assert build(topo.kind, **topo.params).model_dump() == fat_tree(k=4).model_dump()
    again = topology_from_dict(topo.model_dump(mode="json"))
    assert again.links == topo.links


def test_build_unknown_kind_lists_known() -> None:
    with pytest.raises(BuilderError, match=r"'torus'.*fat_tree, leaf_spine, rail_optimized"):
        build("torus")


def test_build_unknown_parameter_is_named() -> None:
    with pytest.raises(BuilderError, match="radix"):
        build("fat_tree", radix=8)


@pytest.mark.parametrize(
    ("kind", "params", "named"),
    [
        ("leaf_spine", {"gpus": 500}, "nics_per_host"),
        ("leaf_spine", {"gpus": 0}, "gpus"),
        ("leaf_spine", {"leaf_radix": 8}, "nics_per_host"),
        ("leaf_spine", {"oversubscription": 200}, "oversubscription"),
        ("leaf_spine", {"oversubscription": 0}, "oversubscription"),
        ("leaf_spine", {"gpus": 8 * 4 * 20, "spine_radix": 16}, "spine_radix"),
        ("leaf_spine", {"nic_speed_bps": 4e11}, "nic_speed_bps"),
        ("fat_tree", {"k": 5}, "k=5"),
        ("fat_tree", {"k": 4, "nics_per_host": 3}, "nics_per_host"),
        ("rail_optimized", {"gpus": 100, "rails": 8}, "rails"),
        ("rail_optimized", {"gpus": 8 * 32 * 70}, "spine_radix"),
        ("rail_optimized", {"leaf_radix": 1}, "leaf_radix"),
    ],
)
def test_builder_errors_name_the_parameter(
    kind: str, params: dict[str, object], named: str
) -> None:
    with pytest.raises(BuilderError, match=named):
        build(kind, **params)
