"""INT paths: which switches and egress ports each probed flow crossed, from INT reports.

``IntPathBook(topology)`` names INT node ids and port numbers: node id ``n``
is the ``n``-th switch of the topology (its INT switch-id as provisioned) and a
port number is the trailing number of the port's name (``eth3`` is 3). An id
or number it cannot name is kept as ``node-<id>`` or the bare number, never
dropped. ``records(batch)`` gives one IntPathRecord per (flow, path) of a batch.
"""

from __future__ import annotations

import ipaddress
import re

import numpy as np

from fabricops.core.intreport import IntBatch
from fabricops.core.topology import Topology
from fabricops.store.records import IntPathRecord, join_path, merge_int_paths

_NUMBER = re.compile(r"(\d+)$")


class IntPathBook:
    """Names for INT node ids and port numbers of one topology."""

    def __init__(self, topology: Topology | None) -> None:
        switches = list(topology.switches()) if topology is not None else []
        self.switch_of = {i + 1: n.id for i, n in enumerate(switches)}
        self.port_of: dict[tuple[int, int], str] = {}
        for i, node in enumerate(switches):
            for port in node.ports:
                match = _NUMBER.search(port.name)
                if match:
                    self.port_of[(i + 1, int(match.group(1)))] = port.name

    def hop(self, node_id: int, egress_port: int) -> tuple[str, str | None]:
        switch = self.switch_of.get(node_id, f"node-{node_id}")
        return switch, self.port_of.get((node_id, egress_port), str(egress_port))

    def records(self, batch: IntBatch) -> list[IntPathRecord]:
        """One record per (flow, path) in the batch, with report counts and worst latency."""
        out = []
        ends = batch.hop_start.astype(np.int64) + batch.hop_count
        nodes, egress = batch.node_id.tolist(), batch.egress_port.tolist()
        latency = batch.hop_latency_ns.astype(np.int64)
        latency[latency == 0xFFFFFFFF] = 0  # not reported by that hop
        for i in range(len(batch.ts_ns)):
            lo, hi = int(batch.hop_start[i]), int(ends[i])
            path = join_path([self.hop(nodes[h], egress[h]) for h in range(lo, hi)])
            ts = int(batch.ts_ns[i])
            out.append(IntPathRecord(
                src_ip=str(ipaddress.IPv4Address(int(batch.src_ip[i]))),
                dst_ip=str(ipaddress.IPv4Address(int(batch.dst_ip[i]))),
                sport=int(batch.sport[i]), dport=int(batch.dport[i]), proto=int(batch.proto[i]),
                sink=self.switch_of.get(int(batch.sink[i]), f"node-{int(batch.sink[i])}"),
                path=path, first_ts_ns=ts, last_ts_ns=ts, n_reports=1,
                max_hop_latency_ns=int(latency[lo:hi].max(initial=0))))
        return merge_int_paths(out)
