"""The pre-check: apply an action to a copy of the fabric's load model, refuse overloads.

``LoadTwin`` knows the topology and, from telemetry, the recent transmit
utilization of every port. ``predict`` copies those loads, takes the ports
the action drains or shuts out of service and moves their traffic onto the
equal-cost alternatives ECMP would use: the same switch's other ports towards
neighbours of the same role (the other spines, the other aggregation
switches). Traffic with no alternative left is an overload by definition. A hash fix
(``set_hash`` with ``l4``) takes nothing out of service: it spreads the
switch's traffic over its ports towards each neighbour role in proportion to
their speeds, as hashing on the UDP source port would. Node replacement moves
a host's traffic to a spare: the check is that a free spare exists.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fabricops.core.actions import Action, StepOp
from fabricops.core.topology import NodeRole, Topology

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Prediction:
    """The most loaded remaining port after the action, and its predicted utilization."""

    port: str
    utilization: float
    moved_bps: float

    def describe(self) -> str:
        return (f"{self.port} would run at {self.utilization:.0%} of line rate after moving "
                f"{self.moved_bps / 1e9:.1f} Gb/s")


class LoadTwin:
    """A load model of the fabric (see the module docstring)."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.ports = topology.port_ids
        self.index = {p: i for i, p in enumerate(self.ports)}
        self.speed_bps = np.array([topology.port_by_id[p][1].speed_bps for p in self.ports],
                                  np.float64)
        self.node = [topology.port_by_id[p][0] for p in self.ports]
        self.peer = np.array([self.index.get(topology.peer_of.get(p, ""), -1)
                              for p in self.ports], np.int64)
        self.node_ports: dict[str, list[int]] = {}
        for i, node in enumerate(self.node):
            self.node_ports.setdefault(node.id, []).append(i)

    def predict(self, action: Action, util_tx: F64) -> Prediction | None:
        """Apply ``action`` to a copy of the loads; None if it moves no fabric traffic."""
        load = np.nan_to_num(util_tx, nan=0.0) * self.speed_bps
        out: set[int] = set()
        for step in action.steps:
            i = self.index.get(step.target, -1)
            if i < 0:
                continue
            if step.op is StepOp.SET_WEIGHT and step.params.get("weight") == 0:
                out.add(i)
            elif step.op is StepOp.SHUT_PORT:
                out.update(j for j in (i, int(self.peer[i])) if j >= 0)
        moved_total = 0.0
        touched: set[int] = set()
        for i in sorted(out):
            if self.node[i].is_host or load[i] <= 0:
                continue  # a host's own traffic leaves with the host
            alts = self._alternatives(i, out)
            if not alts:
                return Prediction(self.ports[i], float("inf"), float(load[i]))
            load[alts] += load[i] / len(alts)
            moved_total += float(load[i])
            load[i] = 0.0
            touched.update(alts)
        for step in action.steps:
            if step.op is StepOp.SET_HASH and step.params.get("l4") is True:
                moved_total += self._spread(load, step.target, out, touched)
        if not touched:
            return None
        cand = np.array(sorted(touched), np.int64)
        util = load[cand] / np.maximum(self.speed_bps[cand], 1.0)
        worst = int(cand[int(np.argmax(util))])
        return Prediction(self.ports[worst], float(util.max()), moved_total)

    def _alternatives(self, i: int, out: Collection[int]) -> list[int]:
        """Ports of the same switch towards neighbours of the same role, still in service."""
        peer = int(self.peer[i])
        if peer < 0:
            return []
        role = self.node[peer].role
        return [j for j in self.node_ports[self.node[i].id]
                if j != i and j not in out and self.peer[j] >= 0
                and self.node[int(self.peer[j])].role is role]

    def _spread(self, load: F64, switch: str, out: Collection[int], touched: set[int]
                ) -> float:
        """Share the load of ``switch``'s in-service ports towards each switch role in
        proportion to their speeds; return the traffic moved (b/s) and add the ports to
        ``touched``."""
        groups: dict[NodeRole, list[int]] = {}
        for j in self.node_ports.get(switch, []):
            peer = int(self.peer[j])
            if j not in out and peer >= 0 and not self.node[peer].is_host:
                groups.setdefault(self.node[peer].role, []).append(j)
        moved = 0.0
        for ports in groups.values():
            g = np.array(ports, np.int64)
            even = load[g].sum() * self.speed_bps[g] / max(float(self.speed_bps[g].sum()), 1.0)
            moved += float(np.maximum(load[g] - even, 0.0).sum())
            load[g] = even
            touched.update(ports)
        return moved

    def spares(self, placement: Mapping[str, Collection[str]],
               out_of_service: Collection[str]) -> list[str]:
        """Hosts in no job and not out of service."""
        busy = {h for hosts in placement.values() for h in hosts}
        return [n.id for n in self.topology.hosts()
                if n.id not in busy and n.id not in out_of_service]
