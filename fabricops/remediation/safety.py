"""Safety limits: the confidence floor and the blast radius of what is applied at once.

``BlastRadius`` keeps the footprint of every action currently in effect
(applied or verified, not rolled back): the switch-facing ports it drained or
shut, per switch, and the hosts it drained; and when actions were applied.
``admit`` says why an action would break a limit, or None. An action that
changes nothing (a ticket) has no footprint and is always admitted. A hash fix
(``set_hash``) moves flows but drains no port and takes out no host: it has no
footprint, yet counts against the actions per window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.actions import Action, ActionKind, ActionMode, StepOp
from fabricops.core.entities import split_port
from fabricops.core.topology import Topology


class SafetyConfig(BaseModel):
    """What remediation may do on its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ActionMode = Field(default=ActionMode.APPROVE,
                             description="observe: propose only; approve: a person approves; "
                                         "auto: apply when every check passes")
    confidence_floor: float = Field(default=0.8, ge=0, le=1,
                                    description="Diagnoses below this get no action")
    max_uplink_share: float = Field(default=0.25, ge=0, le=1,
                                    description="Share of a switch's switch-facing ports that "
                                                "may be drained or shut at once")
    max_hosts_drained: int = Field(default=2, ge=0, description="Hosts out of service at once")
    max_actions: int = Field(default=5, ge=0, description="Actions applied per window")
    window_s: float = Field(default=300.0, gt=0)
    max_link_load: float = Field(default=0.9, gt=0,
                                 description="Pre-check: refuse if a remaining link's predicted "
                                             "utilization passes this")


@dataclass(frozen=True)
class Footprint:
    """What an action takes out of service."""

    ports: frozenset[str] = frozenset()  # switch-facing switch ports drained or shut
    hosts: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.ports and not self.hosts


def footprint(action: Action, topology: Topology) -> Footprint:
    """The switch-facing ports and hosts ``action``'s steps take out of service."""
    ports: set[str] = set()
    hosts: set[str] = set()
    for step in action.steps:
        if step.op is StepOp.DRAIN_HOST:
            hosts.add(step.target)
        drains = step.op is StepOp.SET_WEIGHT and step.params.get("weight") == 0
        if not (drains or step.op is StepOp.SHUT_PORT):
            continue
        peer = topology.peer_of.get(step.target)
        if peer is None or topology.port_by_id[peer][0].is_host:
            continue  # a host-facing port is not fabric capacity
        ports.add(step.target)
        if step.op is StepOp.SHUT_PORT and not topology.port_by_id[step.target][0].is_host:
            ports.add(peer)
    return Footprint(frozenset(ports), frozenset(hosts))


@dataclass
class BlastRadius:
    """Footprints in effect and recent applications (see the module docstring)."""

    config: SafetyConfig
    topology: Topology
    active: dict[str, Footprint] = field(default_factory=dict)
    applied_ns: deque[int] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.fabric_ports: dict[str, int] = {}
        for port, peer in self.topology.peer_of.items():
            node, peer_node = self.topology.port_by_id[port][0], self.topology.port_by_id[peer][0]
            if not node.is_host and not peer_node.is_host:
                self.fabric_ports[node.id] = self.fabric_ports.get(node.id, 0) + 1

    def admit(self, action: Action, now_ns: int) -> str | None:
        """Why applying ``action`` now would break a limit; None if it would not."""
        if action.kind is ActionKind.TICKET:
            return None
        fp = footprint(action, self.topology)
        cfg = self.config
        self._expire(now_ns)
        if len(self.applied_ns) + 1 > cfg.max_actions:
            return (f"blast radius: {len(self.applied_ns)} actions applied in the last "
                    f"{cfg.window_s:g} s; the limit is {cfg.max_actions}")
        hosts = set().union(*(f.hosts for f in self.active.values())) | fp.hosts
        if len(hosts) > cfg.max_hosts_drained:
            return (f"blast radius: {len(hosts)} hosts would be out of service; the limit "
                    f"is {cfg.max_hosts_drained}")
        out = set().union(*(f.ports for f in self.active.values())) | fp.ports
        for switch in sorted({split_port(p)[0] for p in fp.ports}):
            total = self.fabric_ports.get(switch, 0)
            n = sum(1 for p in out if split_port(p)[0] == switch)
            if total == 0 or n > cfg.max_uplink_share * total:
                return (f"blast radius: {n} of {switch}'s {total} switch-facing ports would be "
                        f"drained or shut; the limit is {cfg.max_uplink_share:.0%}")
        return None

    def record(self, action: Action, now_ns: int) -> None:
        """``action`` was applied: its footprint is in effect."""
        if action.kind is not ActionKind.TICKET:
            self.applied_ns.append(now_ns)
        self.active[action.id] = footprint(action, self.topology)

    def release(self, action_id: str) -> None:
        """The action was rolled back: its footprint is gone."""
        self.active.pop(action_id, None)

    def hosts_out(self) -> frozenset[str]:
        return frozenset().union(*(f.hosts for f in self.active.values()))

    def _expire(self, now_ns: int) -> None:
        horizon = now_ns - round(self.config.window_s * 1e9)
        while self.applied_ns and self.applied_ns[0] <= horizon:
            self.applied_ns.popleft()
