"""The control surface of the simulated fabric: what a real fabric lets an operator do.

Every operation names its target by entity id and raises ``ControlError``
naming the target when it cannot be done. Effects start at the next tick;
routing follows link state changes after the convergence delay, while WCMP
weights, ECMP hash fields and flow relabelling take effect at once (they are
local decisions). A switch's configured hash fields override a fault's: a
polarized switch set to hash L3+L4 spreads again while the fault lasts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fabricops.core.entities import EntityKind, entity_kind
from fabricops.simulator.faults import FaultError, FaultSpec
from fabricops.simulator.workload import roce_sports

if TYPE_CHECKING:
    from fabricops.simulator.engine import Simulator

I32 = npt.NDArray[np.int32]
HASH_UNSET, HASH_L3, HASH_L3_L4 = -1, 0, 1
"""Values of ``Simulator.hash_config`` per switch: never configured, L3 only, L3+L4."""


class ControlError(ValueError):
    """A control operation that cannot be carried out; the message names the target."""


class Control:
    """Operations on a running simulator (``sim.control``)."""

    def __init__(self, sim: Simulator) -> None:
        self._sim = sim

    def _port(self, port: str) -> int:
        if port not in self._sim.fabric.topology.port_by_id:
            raise ControlError(f"port {port!r} does not exist")
        return self._sim.fabric.port_index(port)

    def _link_of(self, port: str) -> int:
        p = self._port(port)
        ch = int(self._sim.fabric.port_tx_ch[p])
        if ch < 0:
            raise ControlError(f"port {port!r} is not cabled")
        return ch // 2

    def shut_port(self, port: str) -> None:
        """Administratively disable a port (and so its link)."""
        self._sim.admin_up[self._link_of(port)] = False

    def no_shut_port(self, port: str) -> None:
        """Re-enable a port shut with ``shut_port``."""
        self._sim.admin_up[self._link_of(port)] = True

    def set_wcmp_weights(self, switch: str, weights: dict[str, int]) -> None:
        """Set the WCMP weight of some of a switch's egress ports (0 drains a port)."""
        sim = self._sim
        node = sim.fabric.topology.node_by_id.get(switch)
        if node is None or node.is_host:
            raise ControlError(f"{switch!r} is not a switch of this fabric")
        channels = []
        for port, weight in weights.items():
            p = self._port(port)
            if sim.fabric.node_ids[sim.fabric.port_node[p]] != switch:
                raise ControlError(f"port {port!r} is not on switch {switch!r}")
            if weight < 0:
                raise ControlError(f"weight of port {port!r} must be >= 0, got {weight}")
            channels.append(int(sim.fabric.port_tx_ch[p]))
            sim.router.weight[channels[-1]] = weight
        sim.reroute_changed(sim.router.dist, np.array(channels, np.int32))

    def set_ecmp_hash(self, switch: str, *, l4: bool) -> None:
        """Configure the fields a switch's ECMP hash uses: L3+L4 (the flow's UDP source
        port too) if ``l4``, else source and destination address only."""
        sim, sw = self._sim, self._switch(switch)
        sim.hash_config[sw] = HASH_L3_L4 if l4 else HASH_L3
        if bool(sim.router.l3_only[sw]) == l4:
            sim.router.l3_only[sw] = not l4
            sim.reroute_all()

    def ecmp_hash_l4(self, switch: str) -> bool:
        """Whether a switch's ECMP hash uses the UDP source port now (configured or not)."""
        return not bool(self._sim.router.l3_only[self._switch(switch)])

    def _switch(self, switch: str) -> int:
        node = self._sim.fabric.topology.node_by_id.get(switch)
        if node is None or node.is_host:
            raise ControlError(f"{switch!r} is not a switch of this fabric")
        return int(self._sim.fabric.node_switch[self._sim.fabric.node_index(switch)])

    def relabel_flows(self, entity: str) -> int:
        """Give new UDP source ports to the flows of a NIC, a job, or crossing a link.

        Returns how many flows were relabelled (and so re-hashed by ECMP).
        """
        sim = self._sim
        flows = self._select_flows(entity)
        fl = sim.workload.flows
        fl.sport[flows] = roce_sports(sim.rng, len(flows))
        sim.route_flows(flows)
        return len(flows)

    def _select_flows(self, entity: str) -> I32:
        sim, fl = self._sim, self._sim.workload.flows
        kind = entity_kind(entity)
        if kind is EntityKind.JOB:
            jobs = [i for i, s in enumerate(sim.workload.specs) if s.name == entity]
            if not jobs:
                raise ControlError(f"job {entity!r} does not exist")
            mask = fl.job == jobs[0]
        elif kind is EntityKind.LINK and entity in sim.fabric.topology.link_by_id:
            li = sim.fabric.link_index(entity)
            mask = (sim.paths[: len(fl)] // 2 == li).any(axis=1)
        elif kind is EntityKind.PORT:
            nic = sim.fabric.port_nic[self._port(entity)]
            if nic < 0:
                raise ControlError(f"{entity!r} is not a NIC; give a NIC, a link or a job")
            mask = fl.src_nic == nic
        else:
            raise ControlError(f"{entity!r} is not a NIC, link or job of this fabric")
        return np.flatnonzero(mask & fl.active).astype(np.int32)

    def _host(self, host: str) -> int:
        node = self._sim.fabric.topology.node_by_id.get(host)
        if node is None or not node.is_host:
            raise ControlError(f"{host!r} is not a host of this fabric")
        return self._sim.fabric.node_index(host)

    def _job(self, job: str) -> int:
        for i, spec in enumerate(self._sim.workload.specs):
            if spec.name == job:
                return i
        raise ControlError(f"job {job!r} does not exist")

    def drain_host(self, host: str) -> str | None:
        """Take a host out of service: its job re-forms without it. Returns that job."""
        sim, h = self._sim, self._host(host)
        wl = sim.workload
        wl.drained[h] = True
        for j, hosts in enumerate(wl.hosts):
            if h in hosts:
                remaining = [x for x in hosts if x != h]
                if len(remaining) < 2:
                    raise ControlError(f"draining {host!r} would leave job "
                                       f"{wl.specs[j].name!r} with fewer than two hosts")
                sim.route_flows(wl.set_hosts(j, remaining))
                return wl.specs[j].name
        return None

    def attach_spare(self, job: str, host: str | None = None) -> str:
        """Add a spare host (the given one, or the first free) to a job. Returns the host."""
        sim = self._sim
        j = self._job(job)
        free = sim.workload.free_hosts()
        if host is None:
            if not free:
                raise ControlError(f"no spare host is free for job {job!r}")
            h = free[0]
        else:
            h = self._host(host)
            if h not in free:
                raise ControlError(f"host {host!r} is not a free spare")
        sim.route_flows(sim.workload.set_hosts(j, [*sim.workload.hosts[j], h]))
        return sim.fabric.node_ids[h]

    def restore_host(self, host: str, job: str) -> None:
        """Undo ``drain_host``: the host is back in service and rejoins ``job``."""
        sim, h, j = self._sim, self._host(host), self._job(job)
        sim.workload.drained[h] = False
        if h not in sim.workload.hosts[j]:
            if sim.workload.busy[h]:
                raise ControlError(f"host {host!r} is busy in another job")
            sim.route_flows(sim.workload.set_hosts(j, [*sim.workload.hosts[j], h]))

    def release_spare(self, host: str, job: str) -> None:
        """Undo ``attach_spare``: the host leaves ``job`` and is a free spare again."""
        sim, h, j = self._sim, self._host(host), self._job(job)
        hosts = sim.workload.hosts[j]
        if h in hosts:
            if len(hosts) <= 2:
                raise ControlError(f"releasing {host!r} would leave job {job!r} with fewer "
                                   "than two hosts")
            sim.route_flows(sim.workload.set_hosts(j, [x for x in hosts if x != h]))

    def limit_ingress(self, nic: str, share: float, job: str = "") -> float:
        """Pace the traffic into NIC ``nic`` from outside ``job`` ("": all of it) to
        ``share`` of its line rate, as a scheduler pacing or moving the senders would;
        1 lifts the limit. Returns the share in force before."""
        sim = self._sim
        port = sim.fabric.topology.port_by_id.get(nic)
        if port is None or not port[0].is_host:
            raise ControlError(f"{nic!r} is not a NIC of this fabric")
        if not 0.0 < share <= 1.0:
            raise ControlError(f"ingress share {share} of {nic!r} is not in (0, 1]")
        index = int(sim.fabric.port_nic[sim.fabric.port_index(nic)])
        return sim.workload.limit_ingress(index, share, self._job(job) if job else -1)

    def wcmp_weight(self, port: str) -> int:
        """The WCMP weight of a switch's egress port (1 unless set)."""
        return int(self._sim.router.weight[self._sim.fabric.port_tx_ch[self._port(port)]])

    def reboot(self, node: str) -> None:
        """Reboot a device now: its counters restart from zero."""
        if node not in self._sim.fabric.topology.node_by_id:
            raise ControlError(f"node {node!r} does not exist")
        self._sim.telemetry.reset_node(self._sim.fabric.node_index(node))

    def incast_flows(self, spec: FaultSpec, index: int) -> I32:
        """Create the idle sender flows of an incast fault on NIC ``spec.entity``."""
        sim = self._sim
        fab = sim.fabric
        if spec.entity not in fab.topology.port_by_id or fab.port_nic[
                fab.port_index(spec.entity)] < 0:
            raise FaultError(f"fault #{index} (incast on {spec.entity!r}): "
                             "incast needs a NIC as its entity")
        victim = int(fab.port_nic[fab.port_index(spec.entity)])
        fan_in = spec.typed_params().fan_in
        cands = fab.rail_peers(victim)
        if len(cands) < fan_in:
            raise FaultError(f"fault #{index} (incast on {spec.entity!r}): fan_in {fan_in} "
                             f"exceeds the {len(cands)} NICs that can reach it")
        src = np.sort(sim.rng.choice(cands, size=fan_in, replace=False)).astype(np.int32)
        flows = sim.workload.flows.append(src, np.full(fan_in, victim, np.int32), -1,
                                          roce_sports(sim.rng, fan_in))
        sim.route_flows(flows)
        return flows
