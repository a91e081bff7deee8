"""Policy: which remedy a diagnosis gets, and the steps that carry it out.

``plan`` is pure: a diagnosis, the topology and the job placement in, proposed
actions out. The remedy per fault type is configurable (``PolicyConfig.remedies``);
the defaults:

- bad link (down, flapping, gray loss, degrading optic) -> drain it from
  ECMP/WCMP at both switch ends (or ``shut_link``); a link to a host's NIC
  cannot be drained around, so its host is replaced instead. Where one end's
  switch does not report (in the diagnosis's ``missing``: its agent or
  management network is gone, though it may forward), only the other end can
  be configured: it is shut, which takes the link out in both directions
  (``shut_link``); where neither reports, a ticket;
- PFC deadlock -> shut one link of the cycle (the root), which breaks it;
- hash polarization -> set the diagnosed switch's ECMP hash back to L3+L4
  (``fix_hash``: its hash ignored the UDP source port, so every queue pair of a
  NIC pair took one uplink); ``relabel_flows`` (new UDP source ports for the
  affected jobs' flows) can be configured instead, but cannot undo L3-only
  hashing;
- PFC storm -> isolate the NIC's switch port, then replace the node;
- slow receiver, dead NIC -> replace the node (drain it from its job,
  attach a spare);
- switch down -> drain every neighbour port facing it (traffic moves now,
  not after routing converges; not on neighbours that do not report) and raise
  a ticket;
- ECN misconfiguration -> restore the diagnosed switch's ECN settings (the ECN
  profile of the lossless queue on every port, ``restore_config``) to their intent,
  given as ``intent`` (device -> setting key -> value, see
  :mod:`fabricops.core.roce_settings`); without an intent for the switch, a ticket;
- configuration drift (``config_drift``) -> restore the settings its evidence names;
- incast -> pace the traffic into the victim NIC from outside its job to
  ``incast_share`` of its line rate (``limit_incast``, one ``limit_ingress`` step for
  the scheduler or the hosts' rate limiters to carry out): the job's own traffic
  keeps its rate. Without a known job on the victim's host, a ticket.

An action's id derives from the diagnosis id, kind and target, so a revised
diagnosis of the same incident proposes the same actions (idempotence).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.actions import (
    Action,
    ActionKind,
    ActionMode,
    ActionState,
    AuditEntry,
    Param,
    Step,
    StepOp,
)
from fabricops.core.entities import split_port
from fabricops.core.faults import FaultType
from fabricops.core.records import Diagnosis
from fabricops.core.topology import Topology, TopologyError

DEFAULT_REMEDIES: dict[FaultType, ActionKind] = {
    FaultType.LINK_DOWN: ActionKind.DRAIN_LINK,
    FaultType.LINK_FLAP: ActionKind.DRAIN_LINK,
    FaultType.GRAY_LOSS: ActionKind.DRAIN_LINK,
    FaultType.OPTIC_DEGRADATION: ActionKind.DRAIN_LINK,
    FaultType.PFC_DEADLOCK: ActionKind.SHUT_LINK,
    FaultType.HASH_POLARIZATION: ActionKind.FIX_HASH,
    FaultType.PFC_STORM: ActionKind.ISOLATE_PORT,
    FaultType.SLOW_RECEIVER: ActionKind.REPLACE_NODE,
    FaultType.NIC_DOWN: ActionKind.REPLACE_NODE,
    FaultType.SWITCH_DOWN: ActionKind.DRAIN_SWITCH,
    FaultType.INCAST: ActionKind.LIMIT_INCAST,
    FaultType.ECN_MISCONFIG: ActionKind.RESTORE_CONFIG,
}
CONFIG_DRIFT = "config_drift"
"""Fault type of a drift diagnosis (``fabricops.config.drift``): its evidence names the
settings (signal ``setting <key>``) that left their intent."""
#: The settings a configuration fault type implicates (leaf keys, per port).
SETTINGS_OF: dict[FaultType, tuple[str, ...]] = {
    FaultType.ECN_MISCONFIG: ("ecn.enabled", "ecn.min_threshold_bytes",
                              "ecn.max_threshold_bytes", "ecn.mark_probability_pct"),
}


class PolicyConfig(BaseModel):
    """Which remedy each fault type gets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    remedies: dict[FaultType, ActionKind] = Field(
        default_factory=lambda: dict(DEFAULT_REMEDIES),
        description="Remedy per fault type; a type left out gets a ticket")
    incast_share: float = Field(
        default=0.1, gt=0, lt=1,
        description="Share of a victim NIC's line rate left to traffic from outside its "
                    "job while an incast is limited")


class PlanError(ValueError):
    """A diagnosis the policy cannot turn into steps; the message names the root and why."""


def action_id(diagnosis_id: str, kind: ActionKind, target: str) -> str:
    digest = hashlib.blake2b(f"{diagnosis_id}|{kind.value}|{target}".encode(),
                             digest_size=8).hexdigest()
    return f"act-{digest}"


class Policy:
    """Turns diagnoses into proposed actions (see the module docstring)."""

    def __init__(self, config: PolicyConfig, topology: Topology,
                 placement: Mapping[str, Sequence[str]] | None = None,
                 intent: Mapping[str, Mapping[str, Param]] | None = None) -> None:
        self.config = config
        self.topology = topology
        self.placement: Mapping[str, Sequence[str]] = placement if placement is not None else {}
        self.intent: Mapping[str, Mapping[str, Param]] = intent if intent is not None else {}

    def plan(self, d: Diagnosis, *, mode: ActionMode, ts_ns: int) -> Action:
        """The proposed remedy for ``d``; PlanError if its root does not fit the remedy."""
        known = d.fault_type in {t.value for t in FaultType}
        kind = self.config.remedies.get(FaultType(d.fault_type), ActionKind.TICKET) if known \
            else ActionKind.RESTORE_CONFIG if d.fault_type == CONFIG_DRIFT else ActionKind.TICKET
        kind, target, steps, reason = self._steps(kind, d)
        note = f"{d.fault_type} on {d.root} (confidence {d.confidence:.2f}): {reason}"
        return Action(
            id=action_id(d.id, kind, target), diagnosis_id=d.id, created_ns=ts_ns, ts_ns=ts_ns,
            kind=kind, target=target, fault_type=d.fault_type, confidence=d.confidence,
            mode=mode, steps=tuple(steps), affected_hosts=d.affected_hosts,
            affected_jobs=d.affected_jobs, reason=note,
            audit=(AuditEntry(ts_ns=ts_ns, actor="policy", state=ActionState.PROPOSED,
                              note=note),))

    def _steps(self, kind: ActionKind, d: Diagnosis) -> tuple[ActionKind, str, list[Step], str]:
        topo, root = self.topology, d.root
        if kind in (ActionKind.DRAIN_LINK, ActionKind.SHUT_LINK):
            link = topo.link_by_id.get(root)
            if link is None:
                raise PlanError(f"{kind.value} needs a link; the root {root!r} is not one")
            hosts = [p for p in (link.a, link.b) if topo.port_by_id[p][0].is_host]
            if hosts:
                return self._replace(split_port(hosts[0])[0], d,
                                     "a host link has no alternative path")
            quiet = _not_reporting((link.a, link.b), d)
            if len(quiet) == 2:
                return self._ticket(d, "neither end of the link reports, so neither can be "
                                       "configured; a person must look")
            if quiet:  # only the end that reports can be configured: shut it, which takes
                # the link out both ways (a weight at one end would leave the other's traffic)
                (end,) = {link.a, link.b} - set(quiet)
                return (ActionKind.SHUT_LINK, root, [Step(op=StepOp.SHUT_PORT, target=end)],
                        f"shut {end}: {split_port(quiet[0])[0]} does not report, so its end "
                        "cannot be drained")
            op = (StepOp.SET_WEIGHT, {"weight": 0}) if kind is ActionKind.DRAIN_LINK \
                else (StepOp.SHUT_PORT, {})
            steps = [Step(op=op[0], target=p, params=op[1]) for p in (link.a, link.b)]
            verb = "drain the link from ECMP/WCMP" if kind is ActionKind.DRAIN_LINK \
                else "shut the link"
            return kind, root, steps, verb
        if kind is ActionKind.ISOLATE_PORT:
            nic = self._nic(root, kind)
            switch_port = topo.attachment(nic)
            kind, host, steps, _ = self._replace(split_port(nic)[0], d, "")
            return (ActionKind.ISOLATE_PORT, nic,
                    [Step(op=StepOp.SHUT_PORT, target=switch_port), *steps],
                    f"isolate {switch_port}, then replace {host}")
        if kind is ActionKind.REPLACE_NODE:
            host = root if root in topo.node_by_id else split_port(self._nic(root, kind))[0]
            return self._replace(host, d, "drain the host from its job and attach a spare")
        if kind is ActionKind.RELABEL_FLOWS:
            jobs = d.affected_jobs or tuple(self.placement)
            if not jobs:
                return self._ticket(d, "no job is known to re-label")
            steps = [Step(op=StepOp.RELABEL_FLOWS, target=j) for j in jobs]
            return kind, root, steps, f"re-label the flows of {', '.join(jobs)}"
        if kind is ActionKind.DRAIN_SWITCH:
            return self._drain_switch(d)
        if kind is ActionKind.RESTORE_CONFIG:
            return self._restore(d)
        if kind is ActionKind.LIMIT_INCAST:
            return self._limit_incast(d)
        if kind is ActionKind.FIX_HASH:
            self._switch(root, kind)
            return (kind, root, [Step(op=StepOp.SET_HASH, target=root, params={"l4": True})],
                    "hash ECMP on L3+L4 (the UDP source port too) again")
        return self._ticket(d, "no automatic remedy; a person must look")

    def _restore(self, d: Diagnosis) -> tuple[ActionKind, str, list[Step], str]:
        if d.root not in self.topology.node_by_id:
            raise PlanError(f"restore_config needs a device; the root {d.root!r} is not one")
        intent = self.intent.get(d.root, {})
        if d.fault_type == CONFIG_DRIFT:  # the evidence names each drifted setting
            keys = {e.signal.removeprefix("setting ") for e in d.evidence
                    if e.signal.startswith("setting ")}
            leaves = tuple(sorted({k.split(".", 2)[-1] if k.startswith(("ports.", "nics."))
                                   else k for k in keys}))
            wanted = {k: v for k, v in intent.items() if k in keys}
        else:
            leaves = SETTINGS_OF.get(FaultType(d.fault_type), ())
            wanted = {k: v for k, v in intent.items() if k.split(".", 2)[-1] in leaves}
        if not wanted:
            return self._ticket(d, f"no intended value of {', '.join(leaves)} is known "
                                f"for {d.root}")
        return (ActionKind.RESTORE_CONFIG, d.root,
                [Step(op=StepOp.SET_CONFIG, target=d.root, params=wanted)],
                f"restore {', '.join(leaves)} ({len(wanted)} setting(s)) to intent")

    def _limit_incast(self, d: Diagnosis) -> tuple[ActionKind, str, list[Step], str]:
        nic = self._nic(d.root, ActionKind.LIMIT_INCAST)
        host = split_port(nic)[0]
        jobs = [job for job, hosts in self.placement.items() if host in hosts]
        if not jobs:
            return self._ticket(d, f"{host} runs no known job; whose traffic to keep is "
                                   "not known")
        share = self.config.incast_share
        return (ActionKind.LIMIT_INCAST, nic,
                [Step(op=StepOp.LIMIT_INGRESS, target=nic,
                      params={"share": share, "job": jobs[0]})],
                f"pace traffic into {nic} from outside {jobs[0]} to {share:.0%} of its "
                "line rate")

    def _switch(self, root: str, kind: ActionKind) -> None:
        node = self.topology.node_by_id.get(root)
        if node is None or node.is_host:
            raise PlanError(f"{kind.value} needs a switch; the root {root!r} is not one")

    def _nic(self, root: str, kind: ActionKind) -> str:
        found = self.topology.port_by_id.get(root)
        if found is None or not found[0].is_host:
            raise PlanError(f"{kind.value} needs a NIC; the root {root!r} is not one")
        return root

    def _replace(self, host: str, d: Diagnosis,
                 why: str) -> tuple[ActionKind, str, list[Step], str]:
        jobs = [job for job, hosts in self.placement.items() if host in hosts]
        if not jobs:
            return self._ticket(d, f"{host} runs no known job; nothing to replace")
        steps = [Step(op=StepOp.DRAIN_HOST, target=host, params={"job": jobs[0]}),
                 Step(op=StepOp.ATTACH_SPARE, target=jobs[0])]
        return ActionKind.REPLACE_NODE, host, steps, why or f"replace {host} in {jobs[0]}"

    def _drain_switch(self, d: Diagnosis) -> tuple[ActionKind, str, list[Step], str]:
        self._switch(d.root, ActionKind.DRAIN_SWITCH)
        node = self.topology.node_by_id[d.root]
        facing = []
        for port in node.ports:
            try:
                peer = self.topology.peer_of[f"{node.id}:{port.name}"]
            except KeyError:
                continue
            if not self.topology.port_by_id[peer][0].is_host:
                facing.append(peer)
        quiet = _not_reporting(facing, d)
        reporting = [p for p in facing if p not in quiet]
        steps = [Step(op=StepOp.SET_WEIGHT, target=p, params={"weight": 0}) for p in reporting]
        steps.append(Step(op=StepOp.TICKET, target=d.root,
                          params={"summary": f"{d.root} is down; traffic drained around it"}))
        return (ActionKind.DRAIN_SWITCH, d.root, steps,
                f"drain {len(reporting)} neighbour ports facing it and raise a ticket"
                + (f" ({len(quiet)} more on neighbours that do not report)" if quiet else ""))

    @staticmethod
    def _ticket(d: Diagnosis, why: str) -> tuple[ActionKind, str, list[Step], str]:
        summary = f"{d.fault_type} on {d.root}: {d.action or why}"
        return ActionKind.TICKET, d.root, [Step(op=StepOp.TICKET, target=d.root,
                                                params={"summary": summary[:500]})], why


def _not_reporting(ports: Sequence[str], d: Diagnosis) -> list[str]:
    """The ``ports`` whose switch ``d`` names as missing (stopped reporting)."""
    silent = set(d.missing)
    return [p for p in ports if split_port(p)[0] in silent]


__all__ = [
    "DEFAULT_REMEDIES",
    "SETTINGS_OF",
    "PlanError",
    "Policy",
    "PolicyConfig",
    "TopologyError",
    "action_id",
]
