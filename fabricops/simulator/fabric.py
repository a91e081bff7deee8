"""A topology compiled into arrays for the time-stepped model.

Ports are numbered in topology order (node by node), so the ports of one node
form a contiguous slice. Every link becomes two directed *channels*:
channel ``2*i`` carries link ``i`` from its ``a`` end to its ``b`` end, channel
``2*i+1`` the other way. Index ``n_channels`` is a dummy channel with infinite
capacity, used to pad paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from fabricops.core.entities import port_id
from fabricops.core.topology import Topology

I32 = npt.NDArray[np.int32]
Ix = npt.NDArray[np.intp]  # index arrays the tick gathers and scatters with, every tick
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Fabric:
    """Index arrays of one topology. Built once by ``compile_fabric``; read-only."""

    topology: Topology
    node_ids: tuple[str, ...]
    node_is_host: B
    node_port_start: I32  # first port of each node; ports of node n: [start[n], start[n+1])
    port_ids: tuple[str, ...]
    port_node: I32
    port_speed_bps: F64
    port_tx_ch: I32  # channel this port transmits on, -1 if not cabled
    port_rx_ch: I32  # channel this port receives from, -1 if not cabled
    link_ids: tuple[str, ...]
    ch_tx_port: I32
    ch_rx_port: I32
    ch_capacity_bps: F64
    nic_ports: I32  # port index of every NIC, in NIC order
    port_nic: I32  # NIC ordinal of a port, -1 for switch ports
    nic_rail: I32
    switch_nodes: I32  # node index of every switch, in switch order
    node_switch: I32  # switch ordinal of a node, -1 for hosts

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def n_ports(self) -> int:
        return len(self.port_ids)

    @property
    def n_links(self) -> int:
        return len(self.link_ids)

    @property
    def n_channels(self) -> int:
        return len(self.ch_tx_port)

    @property
    def n_nics(self) -> int:
        return len(self.nic_ports)

    @property
    def dummy_channel(self) -> int:
        return self.n_channels

    def ch_tx_node(self) -> I32:
        """Per channel, the node that sends on it (read-only)."""
        return self._ch_tx_node

    def ch_rx_node(self) -> I32:
        """Per channel, the node that receives from it (read-only)."""
        return self._ch_rx_node

    # Arrays every tick uses that depend on the fabric alone: computed once, read-only.
    # Those it indexes with are of the platform's index type (``Ix``): numpy converts
    # any other integer type on every gather and scatter.
    @cached_property
    def _ch_tx_node(self) -> I32:
        return _frozen(self.port_node[self.ch_tx_port])

    @cached_property
    def _ch_rx_node(self) -> I32:
        return _frozen(self.port_node[self.ch_rx_port])

    @cached_property
    def ch_rx_ports(self) -> Ix:
        """``ch_rx_port`` as an index array."""
        return _frozen(self.ch_rx_port.astype(np.intp))

    @cached_property
    def port_tx_slot(self) -> Ix:
        """Per port, the channel it sends on, or the dummy channel."""
        slot = np.where(self.port_tx_ch >= 0, self.port_tx_ch, self.n_channels)
        return _frozen(slot.astype(np.intp))

    @cached_property
    def port_peer(self) -> Ix:
        """Per port, the port at the other end of its link (0 where none)."""
        rx = self.port_rx_ch
        peer = np.where(rx >= 0, self.ch_tx_port[np.maximum(rx, 0)], 0)
        return _frozen(peer.astype(np.intp))

    @cached_property
    def port_link(self) -> Ix:
        """Per port, its link (0 where none)."""
        return _frozen((np.maximum(self.port_rx_ch, 0) // 2).astype(np.intp))

    @cached_property
    def port_speed_floor(self) -> F64:
        """Per port, its speed in bit/s, at least 1 (a divisor)."""
        return _frozen(np.maximum(self.port_speed_bps, 1.0))

    @cached_property
    def slot_into_switch(self) -> B:
        """Per channel and the dummy: True where a switch receives (PFC can pause it)."""
        return _frozen(np.append(~self.node_is_host[self._ch_rx_node], False))

    @cached_property
    def slot_from_host(self) -> B:
        """Per channel and the dummy (True): True where a host sends."""
        return _frozen(np.append(self.node_is_host[self._ch_tx_node], True))

    def node_index(self, node: str) -> int:
        return self._node_index[node]

    def port_index(self, port: str) -> int:
        return self._port_index[port]

    def link_index(self, link: str) -> int:
        return self._link_index[link]

    def node_ports(self, node: int) -> range:
        end = self.node_port_start[node + 1] if node + 1 < self.n_nodes else self.n_ports
        return range(int(self.node_port_start[node]), int(end))

    def rail_peers(self, nic: int) -> I32:
        """The NICs on ``nic``'s rail of other hosts, in NIC order: those it can reach."""
        members = self._rail_members[int(self.nic_rail[nic])]
        host = self.port_node[self.nic_ports]
        peers: I32 = members[host[members] != host[nic]]
        return peers

    @cached_property
    def _rail_members(self) -> dict[int, I32]:
        return {int(r): np.flatnonzero(self.nic_rail == r).astype(np.int32)
                for r in np.unique(self.nic_rail)}

    def __post_init__(self) -> None:
        self._node_index.update((n, i) for i, n in enumerate(self.node_ids))
        self._port_index.update((p, i) for i, p in enumerate(self.port_ids))
        self._link_index.update((k, i) for i, k in enumerate(self.link_ids))

    _node_index: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _port_index: dict[str, int] = field(init=False, repr=False, default_factory=dict)
    _link_index: dict[str, int] = field(init=False, repr=False, default_factory=dict)


def _frozen(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
    arr.flags.writeable = False
    return arr


def compile_fabric(topo: Topology) -> Fabric:
    """Turn a validated topology into index arrays."""
    node_ids = tuple(n.id for n in topo.nodes)
    is_host = np.array([n.is_host for n in topo.nodes], dtype=bool)
    counts = np.array([len(n.ports) for n in topo.nodes], dtype=np.int32)
    start = np.zeros(len(node_ids), dtype=np.int32)
    start[1:] = np.cumsum(counts)[:-1]
    port_ids = tuple(port_id(n.id, p.name) for n in topo.nodes for p in n.ports)
    port_node = np.repeat(np.arange(len(node_ids), dtype=np.int32), counts)
    speed = np.array([p.speed_bps for n in topo.nodes for p in n.ports], dtype=np.float64)
    index = {p: i for i, p in enumerate(port_ids)}
    a = np.array([index[link.a] for link in topo.links], dtype=np.int32)
    b = np.array([index[link.b] for link in topo.links], dtype=np.int32)
    ch_tx = np.empty(2 * len(a), dtype=np.int32)
    ch_rx = np.empty(2 * len(a), dtype=np.int32)
    ch_tx[0::2], ch_rx[0::2] = a, b
    ch_tx[1::2], ch_rx[1::2] = b, a
    port_tx = np.full(len(port_ids), -1, dtype=np.int32)
    port_rx = np.full(len(port_ids), -1, dtype=np.int32)
    port_tx[ch_tx] = np.arange(len(ch_tx), dtype=np.int32)
    port_rx[ch_rx] = np.arange(len(ch_rx), dtype=np.int32)
    nic_ports = np.flatnonzero(is_host[port_node]).astype(np.int32)
    port_nic = np.full(len(port_ids), -1, dtype=np.int32)
    port_nic[nic_ports] = np.arange(len(nic_ports), dtype=np.int32)
    rails = [p.rail for n in topo.nodes if n.is_host for p in n.ports]
    switch_nodes = np.flatnonzero(~is_host).astype(np.int32)
    node_switch = np.full(len(node_ids), -1, dtype=np.int32)
    node_switch[switch_nodes] = np.arange(len(switch_nodes), dtype=np.int32)
    return Fabric(
        topology=topo,
        node_ids=node_ids,
        node_is_host=is_host,
        node_port_start=start,
        port_ids=port_ids,
        port_node=port_node,
        port_speed_bps=speed,
        port_tx_ch=port_tx,
        port_rx_ch=port_rx,
        link_ids=tuple(link.id for link in topo.links),
        ch_tx_port=ch_tx,
        ch_rx_port=ch_rx,
        ch_capacity_bps=np.minimum(speed[ch_tx], speed[ch_rx]),
        nic_ports=nic_ports,
        port_nic=port_nic,
        nic_rail=np.array([-1 if r is None else r for r in rails], dtype=np.int32),
        switch_nodes=switch_nodes,
        node_switch=node_switch,
    )
