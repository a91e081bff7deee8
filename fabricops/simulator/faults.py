"""The fault catalogue: what can break, on which entity, with what parameters.

A fault is injected at ``start_s`` for ``duration_s`` on one entity. Its ground
truth (root entity, type, start, end) is recorded so that an evaluation can
score a diagnosis; nothing else in the platform may read it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricops.core.entities import EntityKind, entity_kind
from fabricops.core.faults import SETTING_TARGETS, TARGETS, FaultType, SettingFault, Target
from fabricops.core.topology import Topology


class FaultError(ValueError):
    """A fault that cannot be injected; the message names the fault and the cause."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoParams(_Params):
    pass


class FlapParams(_Params):
    period_s: float = Field(default=4.0, gt=0, description="Time from one drop to the next")
    down_s: float = Field(default=1.0, gt=0, description="How long each drop lasts")


class LossParams(_Params):
    loss_rate: float = Field(default=1e-3, gt=0, lt=1, description="Share of frames corrupted")
    direction: Literal["both", "a_to_b", "b_to_a"] = "both"


class OpticParams(_Params):
    decay_db_per_s: float = Field(default=0.1, gt=0, description="Receive power lost per second")
    direction: Literal["both", "a_to_b", "b_to_a"] = "a_to_b"


class PolarizationParams(_Params):
    pass


class IncastParams(_Params):
    fan_in: int = Field(default=16, ge=1, description="Senders converging on the victim NIC")
    rate_share: float = Field(default=1.0, gt=0, le=1, description="Of each sender's line rate")


class SlowReceiverParams(_Params):
    drain_share: float = Field(default=0.2, ge=0, lt=1, description="Share of line rate drained")


class EcnParams(_Params):
    mode: Literal["aggressive", "disabled"] = "aggressive"


class LinkEndParams(_Params):
    end: Literal["a", "b"] = Field(default="b", description="Which end of the link changes")


class PfcPriorityParams(LinkEndParams):
    priority: int = Field(default=4, ge=0, le=7, description="No-drop priority set instead")


class MtuParams(LinkEndParams):
    mtu_bytes: int = Field(default=1500, ge=68, le=9216, description="MTU set on that end")


class HeadroomParams(LinkEndParams):
    share: float = Field(default=0.25, ge=0, lt=1, description="Of the headroom the cable needs")


class EcnThresholdParams(_Params):
    min_threshold_bytes: int = Field(default=4_000_000, ge=0)
    max_threshold_bytes: int = Field(default=16_000_000, gt=0)
    mark_probability_pct: int = Field(default=10, ge=0, le=100)


PARAMS: dict[FaultType | SettingFault, type[_Params]] = {
    FaultType.LINK_DOWN: NoParams,
    FaultType.LINK_FLAP: FlapParams,
    FaultType.GRAY_LOSS: LossParams,
    FaultType.OPTIC_DEGRADATION: OpticParams,
    FaultType.HASH_POLARIZATION: PolarizationParams,
    FaultType.INCAST: IncastParams,
    FaultType.PFC_STORM: NoParams,
    FaultType.SLOW_RECEIVER: SlowReceiverParams,
    FaultType.NIC_DOWN: NoParams,
    FaultType.SWITCH_DOWN: NoParams,
    FaultType.PFC_DEADLOCK: NoParams,
    FaultType.ECN_MISCONFIG: EcnParams,
    SettingFault.PFC_PRIORITY_MISMATCH: PfcPriorityParams,
    SettingFault.MTU_MISMATCH: MtuParams,
    SettingFault.HEADROOM_SHORT: HeadroomParams,
    SettingFault.ECN_THRESHOLD: EcnThresholdParams,
    SettingFault.HASH_SEED_EQUAL: NoParams,
}

class FaultSpec(BaseModel):
    """One fault to inject. ``duration_s`` None lasts to the end of the run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: FaultType | SettingFault
    entity: str
    start_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    params: dict[str, Any] = Field(default_factory=dict)

    def typed_params(self) -> Any:
        return PARAMS[self.type].model_validate(self.params)

    def end_s(self, horizon_s: float = float("inf")) -> float:
        return horizon_s if self.duration_s is None else min(self.start_s + self.duration_s,
                                                              horizon_s)


class GroundTruth(BaseModel):
    """What really broke: for scoring diagnoses only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fault_id: int
    type: FaultType | SettingFault
    entity: str
    start_s: float
    end_s: float | None
    params: dict[str, Any]


def parse_fault(doc: Any, index: int) -> FaultSpec:
    """Validate one fault document; FaultError names the fault and the field."""
    label = f"fault #{index}"
    if isinstance(doc, dict) and "type" in doc:
        label += f" ({doc.get('type')} on {doc.get('entity', '?')!r})"
    try:
        spec = FaultSpec.model_validate(doc)
        spec.typed_params()
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        got = f", got {err['input']!r}" if err["type"] != "missing" else ""
        raise FaultError(f"{label}: {loc}: {err['msg']}{got}") from None
    return spec


def check_target(spec: FaultSpec, topo: Topology, index: int) -> None:
    """Refuse a fault whose entity does not exist or is of the wrong kind."""
    want = SETTING_TARGETS[spec.type] if isinstance(spec.type, SettingFault) \
        else TARGETS[spec.type]
    label = f"fault #{index} ({spec.type.value} on {spec.entity!r})"
    if not topo.entity_exists(spec.entity):
        raise FaultError(f"{label}: entity {spec.entity!r} does not exist in the topology")
    kind = entity_kind(spec.entity)
    node = topo.node_by_id.get(spec.entity)
    port = topo.port_by_id.get(spec.entity)
    is_nic = port is not None and port[0].is_host
    ok = {
        "link": kind is EntityKind.LINK,
        "nic": is_nic,
        "host_or_nic": is_nic or (node is not None and node.is_host),
        "switch": node is not None and not node.is_host,
    }[want]
    if not ok:
        hint = ""
        if want == "link" and port is not None and spec.entity in topo.peer_of:
            hint = f"; did you mean link {topo.link_of_port(spec.entity)!r}?"
        raise FaultError(f"{label}: {spec.type.value} needs a {want.replace('_', ' ')}, "
                         f"and {spec.entity!r} is a {kind.value}{hint}")


class MiswireSpec(BaseModel):
    """A ``miswire``: the far (``b``) ends of two links swapped, as a cabling mistake.

    The intended topology stays as built; what the devices see of their neighbours
    (LLDP) follows the true wiring. Its ground truth is the spec itself.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["miswire"] = "miswire"
    links: tuple[str, str] = Field(description="Ids of the two links whose far ends swap")


def miswired_peers(topo: Topology, miswires: list[MiswireSpec]) -> dict[str, str]:
    """Port id to the port id really cabled to it, with ``miswires`` applied in order.

    FaultError names a miswire whose links do not exist or are the same link.
    """
    peers = dict(topo.peer_of)
    for i, spec in enumerate(miswires):
        label = f"miswire #{i} ({' and '.join(spec.links)})"
        ends = [topo.link_by_id.get(link) for link in spec.links]
        if any(e is None for e in ends):
            raise FaultError(f"{label}: both must be links of the topology")
        if spec.links[0] == spec.links[1]:
            raise FaultError(f"{label}: a link cannot be swapped with itself")
        near = [e.a for e in ends if e is not None]
        far = [peers[n] for n in near]
        for n, f in zip(near, reversed(far), strict=True):
            peers[n], peers[f] = f, n
    return peers


__all__ = ["PARAMS", "TARGETS", "FaultError", "FaultSpec", "FaultType", "GroundTruth",
           "MiswireSpec", "SettingFault", "Target", "check_target", "miswired_peers", "parse_fault"]
