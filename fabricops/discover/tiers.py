"""Links into a topology document: tiers, pods and rails read from the graph. Pure.

Hosts are the nodes ``links`` marks as hosts (not inventoried, or announcing
themselves as stations). A switch's tier is its hop count to the nearest host:
1 leaf; with at most 2 tiers, 2 spine; with 3, 2 agg and 3 core; with 4 or
more, 2 agg, 3 spine, 4+ core. A switch with no path to a host gets role
``switch`` and a ``NO_TIER`` finding. With 3 tiers or more, a pod is a
connected group of the switches below the top tier (its hosts join it); with 2
tiers and switches in several unconnected planes, each plane is a rail and a
pod is a group of leaves serving the same hosts. Groups are numbered in the
natural order of their first member (``leaf-2`` before ``leaf-10``). Ports are
the cabled ones, in natural order; a port whose speed was not reported gets
its peer's, or ``default_speed_bps`` when neither end reports one (a finding).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

from fabricops.core.topology import Link, Node, NodeRole, Port, Topology
from fabricops.discover.links import Resolution
from fabricops.discover.model import Finding, FindingKind

_ROLES = {2: (NodeRole.LEAF, NodeRole.SPINE), 3: (NodeRole.LEAF, NodeRole.AGG, NodeRole.CORE),
          4: (NodeRole.LEAF, NodeRole.AGG, NodeRole.SPINE, NodeRole.CORE)}
_RANK = {NodeRole.HOST: 0, NodeRole.LEAF: 1, NodeRole.AGG: 2, NodeRole.SPINE: 3,
         NodeRole.CORE: 4, NodeRole.SWITCH: 5}


def natural(text: str) -> tuple[object, ...]:
    """Sort key that orders digit runs by value: ``eth2`` before ``eth10``."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def _node(port: str) -> str:
    return port.partition(":")[0]


def hops_to_hosts(nodes: list[str], hosts: set[str], links: Iterable[tuple[str, str]]
                  ) -> dict[str, float]:
    """Each node's hop count to its nearest host (inf if none), over ``links``."""
    index = {n: i for i, n in enumerate(nodes)}
    src = len(nodes)
    rows, cols = [], []
    for a, b in links:
        rows.append(index[_node(a)])
        cols.append(index[_node(b)])
    for h in hosts:
        rows.append(src)
        cols.append(index[h])
    graph = coo_matrix((np.ones(len(rows)), (np.array(rows, np.int64), np.array(cols, np.int64))),
                       shape=(src + 1, src + 1)).tocsr()
    dist = shortest_path(graph, directed=False, unweighted=True, indices=src)
    return {n: float(dist[i]) - 1 for n, i in index.items()}


def _roles(res: Resolution, findings: list[Finding]) -> dict[str, NodeRole]:
    nodes = sorted(res.nodes, key=natural)
    hosts = {n for n in nodes if res.nodes[n].host}
    hops = hops_to_hosts(nodes, hosts, res.links)
    finite = [int(h) for n, h in hops.items() if n not in hosts and np.isfinite(h)]
    tiers = _ROLES[min(max(max(finite, default=2), 2), 4)]
    roles: dict[str, NodeRole] = {}
    for n in nodes:
        if n in hosts:
            roles[n] = NodeRole.HOST
        elif not np.isfinite(hops[n]) or hops[n] < 1:
            roles[n] = NodeRole.SWITCH
            findings.append(Finding(FindingKind.NO_TIER, n))
        else:
            roles[n] = tiers[min(int(hops[n]), len(tiers)) - 1]
    return roles


def _components(members: list[str], links: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Connected groups of ``members`` over ``links``, numbered in natural order."""
    if not members:
        return {}
    index = {n: i for i, n in enumerate(members)}
    pairs = [(index[_node(a)], index[_node(b)]) for a, b in links
             if _node(a) in index and _node(b) in index]
    rows = [p[0] for p in pairs]
    cols = [p[1] for p in pairs]
    graph = coo_matrix((np.ones(len(rows)), (np.array(rows, np.int64), np.array(cols, np.int64))),
                       shape=(len(members),) * 2)
    _, label = connected_components(graph, directed=False)
    first: dict[int, str] = {}
    for n in sorted(members, key=natural):
        first.setdefault(int(label[index[n]]), n)
    order = {lab: k for k, lab in enumerate(sorted(first, key=lambda x: natural(first[x])))}
    return {n: order[int(label[index[n]])] for n in members}


def _groups(roles: dict[str, NodeRole], links: list[tuple[str, str]]
            ) -> tuple[dict[str, int], dict[str, int]]:
    """(pod, rail) of nodes, where the graph gives them (see the module docstring)."""
    switches = [n for n, r in roles.items() if r is not NodeRole.HOST]
    top = max((_RANK[r] for n, r in roles.items() if n in switches
               and r is not NodeRole.SWITCH), default=0)
    hosts_of: dict[str, set[str]] = {}
    for a, b in links:
        for x, y in ((a, b), (b, a)):
            if roles[_node(x)] is NodeRole.HOST:
                hosts_of.setdefault(_node(y), set()).add(_node(x))
    pods: dict[str, int] = {}
    rails: dict[str, int] = {}
    if top >= _RANK[NodeRole.CORE]:
        below = [n for n in switches if _RANK[roles[n]] < top]
        pods = _components(below, links)
    elif switches:
        planes = _components(switches, links)
        if len(set(planes.values())) > 1:
            rails = planes
            sets = {n: frozenset(hosts_of.get(n, ())) for n in switches
                    if roles[n] is NodeRole.LEAF}
            keys = sorted(set(sets.values()), key=lambda s: natural(min(s, key=natural))
                          if s else ())
            number = {s: i for i, s in enumerate(keys)}
            pods = {n: number[s] for n, s in sets.items() if s}
    host_pods: dict[str, set[int]] = {}
    for switch, hosts in hosts_of.items():
        if switch in pods:
            for h in hosts:
                host_pods.setdefault(h, set()).add(pods[switch])
    pods.update({h: found.pop() for h, found in host_pods.items() if len(found) == 1})
    return pods, rails


def build_topology(res: Resolution, *, name: str = "fabric",
                   default_speed_bps: int = 400_000_000_000) -> tuple[Topology, list[Finding]]:
    """The topology document of ``res``, and the findings made while building it."""
    findings: list[Finding] = []
    roles = _roles(res, findings)
    pods, rails = _groups(roles, res.links)
    oriented = [(a, b) if _RANK[roles[_node(a)]] <= _RANK[roles[_node(b)]] else (b, a)
                for a, b in res.links]
    speeds = dict(res.speeds)
    for a, b in oriented:
        for end, other in ((a, b), (b, a)):
            if end not in speeds and other in speeds:
                speeds[end] = speeds[other]
    ports: dict[str, list[str]] = {n: [] for n in roles}
    for a, b in oriented:
        for end in (a, b):
            ports[_node(end)].append(end.partition(":")[2])
            if end not in speeds:
                findings.append(Finding(FindingKind.SPEED_UNKNOWN, end))
    nic_rail = {a: rails[_node(b)] for a, b in oriented
                if roles[_node(a)] is NodeRole.HOST and _node(b) in rails}
    nodes = []
    for n in sorted(roles, key=lambda x: (_RANK[roles[x]], natural(x))):
        node_ports = tuple(
            Port(name=p, speed_bps=speeds.get(f"{n}:{p}", default_speed_bps),
                 rail=nic_rail.get(f"{n}:{p}"))
            for p in sorted(ports[n], key=natural))
        nodes.append(Node(id=n, role=roles[n], pod=pods.get(n), rail=rails.get(n),
                          ports=node_ports))
    links = tuple(Link(a=a, b=b) for a, b in sorted(oriented, key=lambda x: natural(x[0])))
    topo = Topology(name=name, kind="custom", params={"discovered_from": "lldp"},
                    nodes=tuple(nodes), links=links)
    return topo, findings
