"""Reports into links, tiers and a topology document; what cannot be used is counted."""

from __future__ import annotations

from fabricops.core.topology import NodeRole
from fabricops.discover.links import resolve
from fabricops.discover.model import DeviceReport, FindingKind, LocalPort, Neighbor
from fabricops.discover.tiers import build_topology

NAME, ALIAS, MAC, LOCAL = 5, 1, 3, 7


def rep(name: str, ports: list[str], *seen: tuple[str, str, int, str], station: bool = False,
        chassis: str | None = None) -> DeviceReport:
    """A switch report: ``seen`` = (local port, neighbour name, port subtype, port id)."""
    neighbors = [Neighbor(local_port=lp, chassis_subtype=7, chassis_id=f"C-{far}",
                          port_subtype=sub, port_id=pid, sys_name=far,
                          station=far.startswith("host"), bridge=not far.startswith("host"))
                 for lp, far, sub, pid in seen]
    return DeviceReport(label=name, device=None, sys_name=name, chassis_subtype=7,
                        chassis_id=chassis or f"C-{name}", station=station,
                        ports={p: LocalPort(name=p) for p in ports}, neighbors=neighbors)


def kinds(findings: list) -> list[str]:  # type: ignore[type-arg]
    return sorted(f.kind.name for f in findings)


def test_both_ends_one_end_and_reverse_resolution() -> None:
    leaf = rep("leaf-0", ["eth1", "eth2", "eth3"],
               ("eth1", "host-0", NAME, "nic0"),
               ("eth2", "spine-0", LOCAL, "77"),  # not advertised: resolved from spine's side
               ("eth3", "spine-0", NAME, "eth2"))  # spine says nothing on eth2
    spine = rep("spine-0", ["eth1", "eth2"], ("eth1", "leaf-0", ALIAS, "eth2"))
    res = resolve([leaf, spine])
    assert sorted(res.links) == [("leaf-0:eth1", "host-0:nic0"),
                                 ("leaf-0:eth2", "spine-0:eth1"),
                                 ("leaf-0:eth3", "spine-0:eth2")]
    assert kinds(res.findings) == ["ONE_SIDED"]
    assert res.confirmed == 2
    assert res.one_sided == 1
    assert res.nodes["host-0"].host
    assert not res.nodes["host-0"].inventoried


def test_disagreeing_ends_keep_the_link_both_ends_confirm() -> None:
    leaf1 = rep("leaf-1", ["eth5"], ("eth5", "spine-0", NAME, "eth1"))
    leaf2 = rep("leaf-2", ["eth5"], ("eth5", "spine-0", NAME, "eth1"))
    spine = rep("spine-0", ["eth1"], ("eth1", "leaf-2", NAME, "eth5"))
    res = resolve([leaf1, leaf2, spine])
    assert res.links == [("leaf-2:eth5", "spine-0:eth1")]
    assert kinds(res.findings) == ["CONFLICT"]


def test_unusable_neighbours_are_findings() -> None:
    leaf = rep("leaf 1!", ["eth1", "eth2", "eth3"],
               ("eth1", "spine-0", MAC, "02:00:00:00:00:99"),  # no such port, spine silent
               ("eth2", "sw-unknown", NAME, "eth4"),  # a switch nobody inventoried
               ("eth3", "host-1", MAC, "02:00:00:00:00:01"))  # host port by MAC, no desc
    spine = rep("spine-0", ["eth1"])
    res = resolve([leaf, spine, DeviceReport(label="10.0.0.9:161", answered=False)])
    assert kinds(res.findings) == ["NOT_INVENTORIED", "RENAMED", "UNRESOLVED_PORT",
                                   "UNRESOLVED_PORT"]
    assert "leaf-1-" in res.nodes
    assert res.links == [("leaf-1-:eth2", "sw-unknown:eth4")]
    assert not res.nodes["sw-unknown"].host, "it announces bridge: a switch"
    assert not res.nodes["sw-unknown"].inventoried


def test_tiers_pods_and_an_island_switch() -> None:
    reports = []
    for p in range(2):
        for i in range(2):
            leaf, agg = f"leaf-{p}-{i}", f"agg-{p}-{i}"
            reports.append(rep(leaf, ["eth1", "eth2", "eth3"],
                               ("eth1", f"host-{p}{i}", NAME, "nic0"),
                               ("eth2", f"agg-{p}-0", NAME, f"eth{i + 1}"),
                               ("eth3", f"agg-{p}-1", NAME, f"eth{i + 1}")))
            reports.append(rep(agg, ["eth1", "eth2", "eth3"],
                               ("eth1", f"leaf-{p}-0", NAME, f"eth{i + 2}"),
                               ("eth2", f"leaf-{p}-1", NAME, f"eth{i + 2}"),
                               ("eth3", f"core-{i}", NAME, f"eth{p + 1}")))
    for c in range(2):
        reports.append(rep(f"core-{c}", ["eth1", "eth2"], ("eth1", f"agg-0-{c}", NAME, "eth3"),
                           ("eth2", f"agg-1-{c}", NAME, "eth3")))
    reports.append(rep("lonely", ["eth1"]))
    res = resolve(reports)
    topo, findings = build_topology(res, name="t")
    roles = {n.id: (n.role, n.pod) for n in topo.nodes}
    assert roles["leaf-1-0"] == (NodeRole.LEAF, 1)
    assert roles["agg-0-1"] == (NodeRole.AGG, 0)
    assert roles["core-1"] == (NodeRole.CORE, None)
    assert roles["host-10"] == (NodeRole.HOST, 1)
    assert roles["lonely"] == (NodeRole.SWITCH, None)
    assert kinds(findings) == ["NO_TIER"] + ["SPEED_UNKNOWN"] * (2 * len(topo.links))
    assert all(topo.node_by_id[link.a.partition(":")[0]].role is NodeRole.HOST or
               topo.node_by_id[link.b.partition(":")[0]].role is not NodeRole.HOST
               for link in topo.links), "the lower tier is end a"
    assert not [f for f in res.findings if f.kind is FindingKind.ONE_SIDED]
