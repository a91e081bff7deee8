"""Topology builders for AI-training RoCE fabrics: leaf-spine, fat-tree, rail-optimized.

Every builder is keyword-only and returns a validated ``Topology`` whose ``kind`` is the
builder's name and whose ``params`` are the arguments it used (all but ``name``), so
``build(topo.kind, **topo.params)`` rebuilds the same fabric. Impossible sizes raise
``BuilderError`` naming the bad parameter.

Naming: hosts ``host-000``, ``host-001``, ... (zero-padded to a common width of at least
3 digits); a host's ports are NICs ``nic0``.. with ``Port.rail`` equal to the NIC index.
Switch ports are ``eth1``, ``eth2``, ... numbered by position: down-facing ports first,
then up-facing ports. Only cabled ports exist, so a partly filled leaf has gaps in its
host-facing numbers while its uplinks keep their positions (``eth{down+1}`` onward).
Every link has its lower-tier end as ``a`` (host NIC, then leaf, then agg).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from fabricops.core.entities import port_id
from fabricops.core.topology import Link, Node, NodeRole, Port, Topology

DEFAULT_SPEED_BPS = 400_000_000_000


class BuilderError(ValueError):
    """Builder parameters that cannot make a fabric; the message names the parameter."""


class _Fabric:
    """Collects nodes, ports and links, then freezes them into a ``Topology``."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[NodeRole, int | None, int | None]] = {}
        self._ports: dict[str, list[Port]] = {}
        self._links: list[Link] = []

    def node(
        self, node_id: str, role: NodeRole, *, pod: int | None = None, rail: int | None = None
    ) -> str:
        """Add a node without ports; return its id."""
        self._nodes[node_id] = (role, pod, rail)
        self._ports[node_id] = []
        return node_id

    def port(self, node_id: str, ifname: str, speed_bps: int, *, rail: int | None = None) -> str:
        """Add a port to ``node_id``; return its port id."""
        self._ports[node_id].append(Port(name=ifname, speed_bps=speed_bps, rail=rail))
        return port_id(node_id, ifname)

    def link(self, lower: str, upper: str) -> None:
        """Cable two port ids, the lower-tier one first."""
        self._links.append(Link(a=lower, b=upper))

    def topology(self, kind: str, name: str | None, params: dict[str, Any]) -> Topology:
        """The validated topology (builders add each node's ports in number order)."""
        nodes = tuple(
            Node(id=n, role=role, pod=pod, rail=rail, ports=tuple(self._ports[n]))
            for n, (role, pod, rail) in self._nodes.items()
        )
        return Topology(
            name=name or kind, kind=kind, params=params, nodes=nodes, links=tuple(self._links)
        )


def _eth(index: int) -> str:
    """Switch port name for a 0-based position: 0 -> eth1."""
    return f"eth{index + 1}"


def _check_params(params: dict[str, Any]) -> None:
    """Raise BuilderError unless every size/speed is a positive int and oversubscription > 0."""
    for key, value in params.items():
        if key == "oversubscription":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and math.isfinite(value) and value > 0
            want = "a positive finite number"
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            want = "a positive integer"
        if not ok:
            raise BuilderError(f"{key}={value!r} is not valid: it must be {want}")


def _host_count(gpus: int, per_host: int, per_host_name: str) -> int:
    """Hosts needed for ``gpus`` GPUs with one NIC per GPU."""
    if gpus % per_host:
        raise BuilderError(f"gpus={gpus} is not a multiple of {per_host_name}={per_host}")
    return gpus // per_host


def _split(leaf_radix: int, oversubscription: float) -> tuple[int, int]:
    """(down, up) ports of a leaf: down/up is about ``oversubscription``; both > 0."""
    down = round(leaf_radix * oversubscription / (oversubscription + 1))
    up = leaf_radix - down
    if down == 0:
        raise BuilderError(
            f"leaf_radix={leaf_radix} with oversubscription={oversubscription} "
            "leaves 0 host-facing ports per leaf; raise leaf_radix or oversubscription"
        )
    if up == 0:
        raise BuilderError(
            f"oversubscription={oversubscription} with leaf_radix={leaf_radix} "
            "leaves 0 uplinks per leaf; lower oversubscription or raise leaf_radix"
        )
    return down, up


def _spine_count(n_lower: int, up: int, spine_radix: int, what: str) -> int:
    """Smallest divisor of ``up`` whose spines have enough ports for ``n_lower`` leaves."""
    if n_lower > spine_radix:
        raise BuilderError(
            f"spine_radix={spine_radix} is too small to reach every leaf: "
            f"{n_lower} {what} each need at least one port on every spine"
        )
    bound = math.ceil(n_lower * up / spine_radix)
    return next(s for s in range(bound, up + 1) if up % s == 0)


def _add_hosts(f: _Fabric, n_hosts: int, per_pod: int | None = None) -> list[str]:
    """Add ``host-000``..; host h is in pod ``h // per_pod`` when ``per_pod`` is given."""
    width = max(3, len(str(n_hosts - 1)))
    return [
        f.node(f"host-{h:0{width}d}", NodeRole.HOST, pod=h // per_pod if per_pod else None)
        for h in range(n_hosts)
    ]


def _nic(f: _Fabric, host: str, r: int, speed_bps: int) -> str:
    """Add NIC ``nic{r}`` (rail r) to ``host``; return its port id."""
    return f.port(host, f"nic{r}", speed_bps, rail=r)


def _mesh(
    f: _Fabric, lowers: list[str], uppers: list[str], *, first_up: int, per_pair: int, speed: int
) -> None:
    """Cable every lower switch to every upper one with ``per_pair`` parallel links.

    Lower switch i uses ``eth{first_up+1}``.. in order (for upper j, for link m); upper
    switch j uses port ``i*per_pair + m`` (0-based), so its ports are all down-facing.
    """
    for i, lower in enumerate(lowers):
        for j, upper in enumerate(uppers):
            for m in range(per_pair):
                up_port = f.port(lower, _eth(first_up + j * per_pair + m), speed)
                f.link(up_port, f.port(upper, _eth(i * per_pair + m), speed))


def leaf_spine(
    *,
    gpus: int = 512,
    nics_per_host: int = 8,
    leaf_radix: int = 64,
    spine_radix: int = 64,
    oversubscription: float = 1.0,
    nic_speed_bps: int = DEFAULT_SPEED_BPS,
    fabric_speed_bps: int = DEFAULT_SPEED_BPS,
    name: str | None = None,
) -> Topology:
    """A 2-tier Clos: ``leaf-{i}`` ToRs fully meshed to ``spine-{j}``.

    One NIC per GPU; all NICs of a host go to one leaf, hosts packed in order. A leaf has
    ``down = round(leaf_radix*o/(o+1))`` host-facing ports (``o`` = oversubscription) and
    ``leaf_radix - down`` uplinks. The spine count is the smallest divisor of the uplink
    count that gives spines enough ports, so every leaf has the same number of parallel
    links to every spine. Leaf-facing NIC ports run at ``nic_speed_bps``, the rest at
    ``fabric_speed_bps``. 512 GPUs -> 64 hosts, 16 leaves, 8 spines, 4 links per pair.
    """
    params: dict[str, Any] = {
        "gpus": gpus, "nics_per_host": nics_per_host, "leaf_radix": leaf_radix,
        "spine_radix": spine_radix, "oversubscription": oversubscription,
        "nic_speed_bps": nic_speed_bps, "fabric_speed_bps": fabric_speed_bps,
    }  # fmt: skip
    _check_params(params)
    n_hosts = _host_count(gpus, nics_per_host, "nics_per_host")
    down, up = _split(leaf_radix, oversubscription)
    hosts_per_leaf = down // nics_per_host
    if hosts_per_leaf == 0:
        raise BuilderError(
            f"leaf_radix={leaf_radix} gives {down} host-facing ports per leaf, "
            f"fewer than nics_per_host={nics_per_host}"
        )
    n_leaves = math.ceil(n_hosts / hosts_per_leaf)
    n_spines = _spine_count(n_leaves, up, spine_radix, "leaves")
    f = _Fabric()
    hosts = _add_hosts(f, n_hosts)
    leaves = [f.node(f"leaf-{i}", NodeRole.LEAF) for i in range(n_leaves)]
    spines = [f.node(f"spine-{j}", NodeRole.SPINE) for j in range(n_spines)]
    for h, host in enumerate(hosts):
        leaf, slot = leaves[h // hosts_per_leaf], (h % hosts_per_leaf) * nics_per_host
        for r in range(nics_per_host):
            f.link(_nic(f, host, r, nic_speed_bps), f.port(leaf, _eth(slot + r), nic_speed_bps))
    per_pair = up // n_spines
    _mesh(f, leaves, spines, first_up=down, per_pair=per_pair, speed=fabric_speed_bps)
    return f.topology("leaf_spine", name, params)


def _cable_cores(
    f: _Fabric, pod: int, aggs: list[str], cores: list[str], half: int, speed: int
) -> None:
    """Agg m's uplink c (after its k/2 down ports) to core m*k/2+c, core port eth{pod+1}."""
    for m, agg in enumerate(aggs):
        for c in range(half):
            up_port = f.port(agg, _eth(half + c), speed)
            f.link(up_port, f.port(cores[m * half + c], _eth(pod), speed))


def fat_tree(
    *,
    k: int = 8,
    nics_per_host: int = 1,
    oversubscription: float = 1.0,
    link_speed_bps: int = DEFAULT_SPEED_BPS,
    nic_speed_bps: int = DEFAULT_SPEED_BPS,
    name: str | None = None,
) -> Topology:
    """A 3-tier k-ary fat-tree: k pods of k/2 leaves and k/2 aggs, (k/2)^2 cores.

    With ``oversubscription`` o != 1 a leaf splits its k ports as ``leaf_spine`` does
    (``down = round(k*o/(o+1))`` host-facing, ``up = k - down`` uplinks), so a pod has
    ``up`` aggs and the fabric ``up*k/2`` cores; aggs and cores keep k ports. The text
    below describes o = 1, where down = up = k/2.

    Leaf ``leaf-{p}-{i}``: ports eth1..eth{k/2} face hosts, uplink m (eth{k/2+m+1}) goes to
    ``agg-{p}-{m}`` (its port eth{i+1}). Agg m's uplink c (eth{k/2+c+1}) goes to
    ``core-{m*k/2+c}``, whose port for pod p is eth{p+1}. Hosts fill each pod's (k/2)^2
    host-facing ports in order: pod-local host h's NIC r uses pod slot s = h*nics_per_host
    + r, i.e. leaf s // (k/2), port eth{s % (k/2) + 1}; so every host-facing port is used
    once and all NICs of a host are in one pod. Requires k even and nics_per_host dividing
    (k/2)^2. Leaves, aggs and hosts carry their pod. Host-facing ports run at
    ``nic_speed_bps``, switch-to-switch links at ``link_speed_bps``.
    """
    params: dict[str, Any] = {
        "k": k, "nics_per_host": nics_per_host, "oversubscription": oversubscription,
        "link_speed_bps": link_speed_bps, "nic_speed_bps": nic_speed_bps,
    }  # fmt: skip
    _check_params(params)
    if k % 2:
        raise BuilderError(f"k={k} must be even: a fat-tree switch splits its k ports in halves")
    half = k // 2
    down, up = (half, half) if oversubscription == 1 else _split(k, oversubscription)
    if (half * down) % nics_per_host:
        raise BuilderError(
            f"nics_per_host={nics_per_host} must divide {half * down}, "
            "the host-facing ports of a pod"
        )
    per_pod, pods = half * down // nics_per_host, range(k)
    f = _Fabric()
    hosts = _add_hosts(f, k * per_pod, per_pod=per_pod)
    leaves = [[f.node(f"leaf-{p}-{i}", NodeRole.LEAF, pod=p) for i in range(half)] for p in pods]
    aggs = [[f.node(f"agg-{p}-{i}", NodeRole.AGG, pod=p) for i in range(up)] for p in pods]
    cores = [f.node(f"core-{j}", NodeRole.CORE) for j in range(up * half)]
    for h, host in enumerate(hosts):
        pod, local = divmod(h, per_pod)
        for r in range(nics_per_host):
            leaf, slot = divmod(local * nics_per_host + r, down)
            port = f.port(leaves[pod][leaf], _eth(slot), nic_speed_bps)
            f.link(_nic(f, host, r, nic_speed_bps), port)
    for p in pods:
        _mesh(f, leaves[p], aggs[p], first_up=down, per_pair=1, speed=link_speed_bps)
        _cable_cores(f, p, aggs[p], cores, half, link_speed_bps)
    return f.topology("fat_tree", name, params)


def rail_optimized(
    *,
    gpus: int = 16384,
    rails: int = 8,
    leaf_radix: int = 64,
    spine_radix: int = 64,
    oversubscription: float = 1.0,
    nic_speed_bps: int = DEFAULT_SPEED_BPS,
    fabric_speed_bps: int = DEFAULT_SPEED_BPS,
    name: str | None = None,
) -> Topology:
    """A rail-optimized ("rail-only") 2-tier fabric: one leaf-spine plane per rail.

    ``gpus // rails`` hosts with ``rails`` NICs each. Hosts form groups of ``down`` (the
    leaf's host-facing port count, split as in ``leaf_spine``); group g has one leaf per
    rail, ``leaf-{g}-{r}`` (pod g, rail r), and NIC r of the group's i-th host uses its
    port eth{i+1}. Rail r has its own spines ``spine-{r}-{j}`` (rail r): the smallest
    divisor of the uplink count with enough ports, each leaf of rail r linked to each of
    them with the same number of parallel links. Rails share no switch, so traffic
    between different rails is not routable in the fabric: it must cross inside a host
    (e.g. NVLink). 16,384 GPUs -> 2048 hosts, 64 groups, 512 leaves, 256 spines.
    """
    params: dict[str, Any] = {
        "gpus": gpus, "rails": rails, "leaf_radix": leaf_radix, "spine_radix": spine_radix,
        "oversubscription": oversubscription,
        "nic_speed_bps": nic_speed_bps, "fabric_speed_bps": fabric_speed_bps,
    }  # fmt: skip
    _check_params(params)
    n_hosts = _host_count(gpus, rails, "rails")
    down, up = _split(leaf_radix, oversubscription)
    n_groups = math.ceil(n_hosts / down)
    n_spines = _spine_count(n_groups, up, spine_radix, "leaves per rail")
    f = _Fabric()
    hosts = _add_hosts(f, n_hosts, per_pod=down)
    leaves = [
        [f.node(f"leaf-{g}-{r}", NodeRole.LEAF, pod=g, rail=r) for r in range(rails)]
        for g in range(n_groups)
    ]
    for h, host in enumerate(hosts):
        g, slot = divmod(h, down)
        for r in range(rails):
            port = f.port(leaves[g][r], _eth(slot), nic_speed_bps)
            f.link(_nic(f, host, r, nic_speed_bps), port)
    for r in range(rails):
        spines = [f.node(f"spine-{r}-{j}", NodeRole.SPINE, rail=r) for j in range(n_spines)]
        rail_leaves = [row[r] for row in leaves]
        per_pair = up // n_spines
        _mesh(f, rail_leaves, spines, first_up=down, per_pair=per_pair, speed=fabric_speed_bps)
    return f.topology("rail_optimized", name, params)


BUILDERS: dict[str, Callable[..., Topology]] = {
    "leaf_spine": leaf_spine,
    "fat_tree": fat_tree,
    "rail_optimized": rail_optimized,
}


def build(kind: str, **params: Any) -> Topology:
    """Run the builder named ``kind``; BuilderError names an unknown kind or parameter."""
    builder = BUILDERS.get(kind)
    if builder is None:
        known = ", ".join(sorted(BUILDERS))
        raise BuilderError(f"unknown topology kind {kind!r}; known kinds: {known}")
    accepted = inspect.signature(builder).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise BuilderError(
            f"{kind} does not take parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(accepted)}"
        )
    return builder(**params)
