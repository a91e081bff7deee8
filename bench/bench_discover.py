"""Discovery: CPU time of links + tiers on large fabrics, beside building them; and the
wall time of discovering a k=8 fat-tree over real SNMP and gNMI.

Graph part: every switch's LLDP report (every port, every neighbour, port ids of
the four styles the simulator sends) is made up front; the figure is
``time.process_time`` of ``resolve`` + ``build_topology``. The baseline, measured
in the same run, is the builder making the same fabric (a validated ``Topology``):
what producing a topology document of that size costs at all.

Wire part: the simulated fabric's agents run in this process, so only wall time
is shown (their CPU would be counted with the client's).

    python bench/bench_discover.py [--k 32] [--gpus 16384]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from fabricops.core.topology import Topology
from fabricops.discover.links import resolve
from fabricops.discover.model import DeviceReport, LocalPort, Neighbor
from fabricops.discover.service import Discovery, DiscoveryConfig
from fabricops.discover.tiers import build_topology
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.builders import fat_tree, rail_optimized
from fabricops.simulator.engine import Simulator

_STYLES = (5, 7, 3, 1)  # interfaceName, local, macAddress, interfaceAlias


def _port_id(node: int, position: int, name: str, host: bool) -> tuple[int, str]:
    style = 5 if host else _STYLES[node % 4]
    if style == 7:
        return style, str(position + 1)
    if style == 3:
        raw = bytes((2,)) + node.to_bytes(3, "big") + (position + 1).to_bytes(2, "big")
        return style, ":".join(f"{b:02x}" for b in raw)
    return style, name


def reports_of(topo: Topology) -> list[DeviceReport]:
    """The LLDP report of every switch of ``topo`` (hosts are not inventoried)."""
    ids: dict[str, tuple[int, str]] = {}
    for i, node in enumerate(topo.nodes):
        for k, port in enumerate(node.ports):
            ids[f"{node.id}:{port.name}"] = _port_id(i, k, port.name, node.is_host)
    out = []
    for node in topo.switches():
        ports = {p.name: LocalPort(name=p.name, id_subtype=ids[f"{node.id}:{p.name}"][0],
                                   port_id=ids[f"{node.id}:{p.name}"][1],
                                   speed_bps=p.speed_bps) for p in node.ports}
        seen = []
        for p in node.ports:
            peer = topo.peer_of[f"{node.id}:{p.name}"]
            far = peer.partition(":")[0]
            sub, pid = ids[peer]
            seen.append(Neighbor(local_port=p.name, chassis_subtype=7, chassis_id=far,
                                 port_subtype=sub, port_id=pid, sys_name=far,
                                 station=topo.node_by_id[far].is_host))
        out.append(DeviceReport(label=node.id, sys_name=node.id, chassis_subtype=7,
                                chassis_id=node.id, ports=ports, neighbors=seen))
    return out


def _cpu(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.process_time()
    result = fn()
    return time.process_time() - t0, result


def graph_part(name: str, make: Callable[[], Topology]) -> None:
    base_s, built = _cpu(make)
    assert isinstance(built, Topology)
    reports = reports_of(built)
    cpu_s, out = _cpu(lambda: build_topology(resolve(reports))[0])
    assert isinstance(out, Topology)
    same = {lk.id for lk in out.links} == {lk.id for lk in built.links}
    print(f"{name:<34}{len(reports):>7,} switches {len(built.links):>8,} links  "
          f"discover {cpu_s:6.2f} s CPU  builder {base_s:6.2f} s  "
          f"x{cpu_s / base_s:4.1f}  links {'identical' if same else 'DIFFER'}")


def wire_part() -> None:
    built = fat_tree(k=8)
    fabric = SimulatedFabric(Simulator(built), SimulatedFabricConfig(host_telemetry=True))
    fabric.start()
    try:
        for via in ("snmp", "gnmi"):
            t0 = time.perf_counter()
            result = Discovery(DiscoveryConfig.model_validate({"via": via}),
                               fabric.inventory()).run()
            wall = time.perf_counter() - t0
            same = {lk.id for lk in result.topology.links} == {lk.id for lk in built.links}
            print(f"k=8 fat-tree over {via:<5}{len(result.reports):>5} devices  "
                  f"{wall:6.2f} s wall  links {'identical' if same else 'DIFFER'}")
    finally:
        fabric.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, default=32, help="fat-tree radix")
    parser.add_argument("--gpus", type=int, default=16384, help="rail-optimized GPUs")
    args = parser.parse_args()
    graph_part(f"fat-tree k={args.k}", lambda: fat_tree(k=args.k))
    graph_part(f"rail-optimized {args.gpus:,} GPUs", lambda: rail_optimized(gpus=args.gpus))
    wire_part()


if __name__ == "__main__":
    main()
