"""Which NICs a host has, and what each is called in the topology.

``find_ports(root)`` lists the RDMA ports below ``<root>/sys/class/infiniband``
(device, port number, its network interface from ``device/net``), in natural
order (``mlx5_2`` before ``mlx5_10``). ``name_nics`` (pure) gives each its
entity id, ``<host>:<nic>``, by the first rule that applies:

1. ``names``: an explicit map from RDMA device, ``device/port`` or interface
   to a NIC name (``nic3``) or a full entity id (``host-017:nic3``);
2. LLDP and the topology: the switch port the interface sees over LLDP,
   looked up in the topology, gives the host port cabled to it;
3. order: the k-th RDMA port is ``nic<k>``.

A neighbour that the topology does not know, or that is cabled to another
host, is reported (``unmatched``) and the next rule applies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from fabricops.core.topology import Topology

INFINIBAND: Final = Path("sys/class/infiniband")
NET: Final = Path("sys/class/net")
_DIGITS: Final = re.compile(r"(\d+)")


class NoRdmaDevicesError(RuntimeError):
    """The root holds no RDMA device; the message names the directory looked in."""


@dataclass(frozen=True)
class RdmaPort:
    """One RDMA port: device (``mlx5_0``), port number, and its interface (or None)."""

    device: str
    port: int
    netdev: str | None

    @property
    def label(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass(frozen=True)
class NamedNic:
    """An RDMA port with its entity id, its LLDP switch port, and the rule that named it."""

    rdma: RdmaPort
    entity: str
    switch_port: str | None
    named_by: str  # "config", "lldp", "order"


def natural_key(name: str) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in _DIGITS.split(name))


def find_ports(root: Path) -> list[RdmaPort]:
    """Every RDMA port below ``root``; NoRdmaDevicesError if there is none."""
    base = root / INFINIBAND
    devices = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: natural_key(p.name)) \
        if base.is_dir() else []
    found: list[RdmaPort] = []
    for dev in devices:
        ports_dir = dev / "ports"
        numbers = sorted(int(p.name) for p in ports_dir.iterdir() if p.name.isdigit()) \
            if ports_dir.is_dir() else []
        net_dir = dev / "device" / "net"
        netdevs = sorted((p.name for p in net_dir.iterdir()), key=natural_key) \
            if net_dir.is_dir() else []
        for k, number in enumerate(numbers):
            netdev = netdevs[k] if k < len(netdevs) else None
            found.append(RdmaPort(dev.name, number, netdev))
    if not found:
        raise NoRdmaDevicesError(f"no RDMA devices found under {base} (is the NIC driver, "
                                 f"e.g. mlx5_ib or bnxt_re, loaded?)")
    return found


def name_nics(host: str, ports: list[RdmaPort], *, names: Mapping[str, str] | None = None,
              lldp: Mapping[str, tuple[str, str]] | None = None,
              topology: Topology | None = None) -> tuple[list[NamedNic], list[str]]:
    """Each port's entity id (see the module docstring), and the LLDP neighbours unmatched."""
    names = names or {}
    lldp = lldp or {}
    peer = topology.peer_of if topology is not None else {}
    out: list[NamedNic] = []
    unmatched: list[str] = []
    for k, rp in enumerate(ports):
        seen = lldp.get(rp.netdev) if rp.netdev else None
        switch_port = f"{seen[0]}:{seen[1]}" if seen else None
        explicit = next((names[key] for key in (rp.label, rp.device, rp.netdev or "")
                         if key in names), None)
        if explicit is not None:
            entity = explicit if ":" in explicit else f"{host}:{explicit}"
            out.append(NamedNic(rp, entity, switch_port, "config"))
            continue
        if switch_port is not None and topology is not None:
            cabled = peer.get(switch_port)
            if cabled is not None and cabled.startswith(f"{host}:"):
                out.append(NamedNic(rp, cabled, switch_port, "lldp"))
                continue
            unmatched.append(f"{rp.netdev} sees {switch_port}, cabled in the topology to "
                             f"{cabled or 'nothing'}")
        out.append(NamedNic(rp, f"{host}:nic{k}", switch_port, "order"))
    return out, unmatched
