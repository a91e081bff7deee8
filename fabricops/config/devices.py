"""What one switch or one host should run: the fabric intent resolved per device.

A ``SwitchIntent`` carries the switch's hash seed, MTU, classification, PFC and, per
port, the speed, cable length, computed headroom and ECN profile. A ``HostIntent``
carries its NICs and their DCQCN parameters. Both are frozen and are the shape that
renders write and that a configuration check can rebuild from a running device and
compare, setting by setting, through ``settings``. Built by ``plan``; a switch whose
headroom does not fit its buffer is refused with the numbers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.config.intent import (
    DcqcnPolicy,
    EcnProfile,
    HashField,
    HashSeed,
    LoadBalancing,
    PfcPolicy,
    QosPolicy,
)


class _Device(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SwitchPort(_Device):
    """One cabled switch port."""

    name: str
    speed_bps: int = Field(gt=0)
    peer: str | None = Field(description="Port id at the other end of the link")
    cable_m: float = Field(gt=0, description="Cable length used for the headroom")
    headroom_bytes: int = Field(gt=0, description="PFC headroom of the lossless priority")
    ecn: EcnProfile


class SwitchIntent(_Device):
    """The RoCE settings of one switch."""

    kind: Literal["switch"] = "switch"
    device: str
    role: str = Field(description="Topology role: leaf, spine, agg, core or switch")
    tier: str = Field(description="Tier whose hash seed the switch uses")
    hash_seed: HashSeed
    hash_fields: tuple[HashField, ...]
    load_balancing: LoadBalancing
    mtu_bytes: int
    qos: QosPolicy
    pfc: PfcPolicy
    headroom_budget_bytes: int = Field(gt=0, description="Buffer headroom may take in total")
    ports: tuple[SwitchPort, ...]

    @model_validator(mode="after")
    def _check(self) -> SwitchIntent:
        need = self.headroom_total_bytes
        if need > self.headroom_budget_bytes:
            raise ValueError(
                f"{self.device}: PFC headroom {need / 1e6:.1f} MB for {len(self.ports)} ports "
                f"does not fit the {self.headroom_budget_bytes / 1e6:.1f} MB headroom budget; "
                "shorten cables, lower the MTU or raise headroom.max_headroom_share")
        return self

    @property
    def headroom_total_bytes(self) -> int:
        """Headroom the switch reserves: every port's, once per lossless priority."""
        return sum(p.headroom_bytes for p in self.ports) if self.pfc.enabled else 0

    @property
    def pfc_priorities(self) -> tuple[int, ...]:
        """Priorities with PFC on."""
        return (self.qos.lossless_priority,) if self.pfc.enabled else ()


class Nic(_Device):
    """One RoCE NIC of a host."""

    name: str = Field(description="Interface name (the topology's port name)")
    speed_bps: int = Field(gt=0)
    peer: str | None = Field(description="Switch port id the NIC is cabled to")
    cable_m: float = Field(gt=0)
    rdma_device: str = Field(description="RDMA device of the NIC, e.g. mlx5_0")


class HostIntent(_Device):
    """The RoCE settings of one host's NICs."""

    kind: Literal["host"] = "host"
    device: str
    nic_model: str | None = Field(description="NIC model if the topology names it")
    mtu_bytes: int
    qos: QosPolicy
    pfc: PfcPolicy
    dcqcn: DcqcnPolicy
    nics: tuple[Nic, ...]

    @model_validator(mode="after")
    def _check(self) -> HostIntent:
        for nic in self.nics:
            if self.dcqcn.rp.min_rate_mbps * 1_000_000 >= nic.speed_bps:
                raise ValueError(
                    f"{self.device}:{nic.name}: DCQCN min_rate_mbps "
                    f"{self.dcqcn.rp.min_rate_mbps} is not below the NIC speed")
        return self

    @property
    def pfc_priorities(self) -> tuple[int, ...]:
        """Priorities with PFC on."""
        return (self.qos.lossless_priority,) if self.pfc.enabled else ()

    @property
    def roce_tos(self) -> int:
        """IP TOS byte of RoCE traffic: the RoCE DSCP with ECT(0), so switches can mark it."""
        return self.qos.roce_dscp << 2 | 0b10


DeviceIntent = SwitchIntent | HostIntent


def settings(device: DeviceIntent) -> dict[str, Any]:
    """Every setting of ``device`` as ``{"dotted.path": value}``; ports and NICs by name.

    Two devices' settings compare key by key, which is how running configuration
    will be checked against intent.
    """
    doc = device.model_dump(mode="json")
    items = doc.pop("ports", None) or doc.pop("nics", None) or []
    flat: dict[str, Any] = {}
    _flatten(doc, "", flat)
    collection = "ports" if isinstance(device, SwitchIntent) else "nics"
    for item in items:
        name = item.pop("name")
        _flatten(item, f"{collection}.{name}.", flat)
    return flat


def _flatten(doc: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in doc.items():
        if isinstance(value, dict):
            _flatten(value, f"{prefix}{key}.", out)
        else:
            out[f"{prefix}{key}"] = value
