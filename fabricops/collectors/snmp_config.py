"""Configuration of the SNMP poller: the switches it polls and how hard it may push.

Per-target transport settings (timeout, retries, GETBULK repetitions, varbinds per
request, GETBULK or GETNEXT, SNMPv3 context and engine discovery tries, port naming
template) come from the inventory's ``snmp`` key of each target; those it leaves
unset take the poller's defaults (:class:`SnmpPollerConfig`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.inventory import Inventory, SnmpCredentials


class SnmpTarget(BaseModel):
    """One switch to poll."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1, description="Device id; entities are device:ifName")
    host: str = Field(default="127.0.0.1", description="IPv4 address or name")
    port: int = Field(default=161, ge=1, le=65535, description="UDP port of the agent")
    credentials: SnmpCredentials = Field(
        default_factory=lambda: SnmpCredentials(community="public"),
        description="v2c community, or v3 user, keys and context")
    interval_s: float = Field(default=10.0, gt=0, le=3600, description="Unless a policy says")
    timeout_s: float = Field(default=1.0, gt=0, le=60, description="Per request try")
    retries: int = Field(default=1, ge=0, le=10, description="Tries after the first")
    max_repetitions: int | None = Field(default=None, ge=1, le=1000,
                                        description="GETBULK rows per column (poller's if None)")
    max_varbinds_per_request: int | None = Field(
        default=None, ge=1, le=10_000, description="Caps OIDs x repetitions (poller's if None)")
    walk: Literal["getbulk", "getnext"] = Field(
        default="getbulk", description="getnext for agents without GETBULK (v1 always)")
    engine_discovery_tries: int = Field(
        default=3, ge=1, le=10, description="SNMPv3: tries of the first request to the agent")
    port_name: str | None = Field(default=None, description="Port naming template")

    @model_validator(mode="after")
    def _complete(self) -> SnmpTarget:
        c = self.credentials
        if c.version in ("v1", "v2c") and not c.community:
            raise ValueError(f"SNMP target {self.device}: {c.version} needs a community")
        if c.version == "v3" and not (c.user and c.auth_key and c.priv_key):
            raise ValueError(f"SNMP target {self.device}: v3 needs user, auth_key and priv_key")
        return self

    @property
    def getnext(self) -> bool:
        """True if walks use GETNEXT (asked for, or SNMPv1, which has no GETBULK)."""
        return self.walk == "getnext" or self.credentials.version == "v1"

    @property
    def where(self) -> str:
        return f"SNMP target {self.device} ({self.host}:{self.port})"


class SnmpPollerConfig(BaseModel):
    """Targets and how hard the poller may push."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[SnmpTarget, ...] = Field(default=(), description="One per device")
    max_in_flight: int = Field(default=32, ge=1, description="Walks at once")
    max_probes_in_flight: int = Field(default=8, ge=1, description="Probes of down targets")
    down_probe_interval_s: float = Field(
        default=5.0, gt=0, le=3600, description="How often a down target is probed")
    max_repetitions: int = Field(default=32, ge=1, le=1000,
                                 description="GETBULK rows per column and request")
    max_varbinds_per_request: int = Field(default=512, ge=1,
                                          description="Caps rows x columns of one GETBULK")
    describe_every_polls: int | None = Field(
        default=None, ge=1, description="Also describe every N-th poll (None: only when "
        "sysUpTime goes back or ifTableLastChange moves)")
    port_names_by_vendor: dict[str, str] = Field(
        default_factory=dict, description="Port naming template by dotted sysObjectID prefix")
    max_rows_per_column: int = Field(default=100_000, ge=1,
                                     description="A longer column fails the poll")
    pfc_fallback_priority: int | None = Field(
        default=3, ge=0, le=7, description="Priority of IEEE8021-PFC-MIB per-port totals")

    @model_validator(mode="after")
    def _unique(self) -> SnmpPollerConfig:
        seen: set[str] = set()
        for t in self.targets:
            if t.device in seen:
                raise ValueError(f"SNMP target {t.device} is listed twice")
            seen.add(t.device)
        return self


def targets_from_inventory(inventory: Inventory) -> tuple[SnmpTarget, ...]:
    """The inventory's SNMP targets with their effective intervals."""
    return tuple(
        SnmpTarget(device=t.device, host=t.host_port()[0], port=t.host_port()[1],
                   credentials=t.snmp, interval_s=inventory.interval_of(t),
                   **transport_settings(t.snmp))
        for t in inventory.by_protocol("snmp"))


def transport_settings(c: SnmpCredentials) -> dict[str, object]:
    """The transport settings an inventory entry sets (unset ones are left out)."""
    settings = {"timeout_s": c.timeout_s, "retries": c.retries,
                "max_repetitions": c.max_repetitions,
                "max_varbinds_per_request": c.max_varbinds_per_request, "walk": c.walk,
                "engine_discovery_tries": c.engine_discovery_tries, "port_name": c.port_name}
    return {k: v for k, v in settings.items() if v is not None}


__all__ = ["SnmpPollerConfig", "SnmpTarget", "targets_from_inventory", "transport_settings"]
